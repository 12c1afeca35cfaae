// PNG decoding with stb_image. Debian ships stb_image compiled in libstb
// (all formats, default options), and asks users to link it rather than
// compile a second copy; we only ever hand it files that carry the PNG
// signature, so the other formats it knows are never reached.
#include <stb/stb_image.h>
#include <zlib.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "sprintnet/core/error.h"
#include "sprintnet/data/image.h"

namespace sprintnet {
namespace {

struct StbFree {
  void operator()(void* pixels) const { stbi_image_free(pixels); }
};

std::string_view failure_reason() {
  const char* reason = stbi_failure_reason();
  return reason != nullptr ? reason : "unknown error";
}

std::uint32_t big_endian32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

// What stb_image does not check, before it decodes: the critical chunks' CRCs, and the image data's inflated
// size against what a width x height image can need (at most 8 bytes a pixel and a filter byte a row
// in each of Adam7's 7 passes). A small file that inflates to gigabytes is refused without allocating
// for it: the data is inflated here into a small scratch buffer and only counted.
void check_chunks(std::span<const std::uint8_t> bytes, std::string_view origin, int width, int height) {
  const std::uint64_t most = std::uint64_t(height) * (std::uint64_t(width) * 8 + 7) + 64;
  z_stream inflater{};
  SN_CHECK(inflateInit(&inflater) == Z_OK, "{}: zlib could not start", origin);
  const std::unique_ptr<z_stream, int (*)(z_stream*)> end(&inflater, inflateEnd);
  std::vector<Bytef> scratch(64 * 1024);
  bool ended = false;  // the zlib stream's end came (stb_image ignores image data after it)
  bool complete = false;  // IEND came whole: a file cut short anywhere before its end is refused as truncated
  for (std::size_t at = 8; at + 12 <= bytes.size();) {
    const std::uint32_t length = big_endian32(&bytes[at]);
    const std::string_view type(reinterpret_cast<const char*>(&bytes[at + 4]), 4);
    SN_CHECK(length <= bytes.size() - at - 12, "{}: PNG chunk '{}' runs past the end of the file (a truncated file)",
             origin, type);
    // Critical chunks only (an uppercase first letter), as libpng: a damaged ancillary chunk (a text
    // comment) is one no decoder needs.
    const bool critical = type[0] >= 'A' && type[0] <= 'Z';
    const auto crc = crc32(0, &bytes[at + 4], static_cast<uInt>(length + 4));
    SN_CHECK(!critical || crc == big_endian32(&bytes[at + 8 + length]), "{}: PNG chunk '{}' fails its CRC (a corrupt "
             "file)", origin, type);
    if (type == "IDAT" && !ended) {
      inflater.next_in = const_cast<Bytef*>(&bytes[at + 8]);
      inflater.avail_in = length;
      while (inflater.avail_in > 0) {
        inflater.next_out = scratch.data();
        inflater.avail_out = static_cast<uInt>(scratch.size());
        const int status = inflate(&inflater, Z_NO_FLUSH);
        SN_CHECK(status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR,
                 "{}: corrupt PNG image data ({})", origin, inflater.msg != nullptr ? inflater.msg : "zlib error");
        SN_CHECK(inflater.total_out <= most, "{}: PNG image data inflates to more than the {} bytes a {}x{} image "
                 "can need", origin, most, width, height);
        ended = status == Z_STREAM_END;
        if (status != Z_OK) break;
      }
    }
    if (type == "IEND") {
      complete = true;
      break;
    }
    at += 12 + std::size_t{length};
  }
  SN_CHECK(complete, "{}: the PNG file ends before its IEND chunk (a truncated file of {} bytes)", origin, bytes.size());
}

}  // namespace

DecodedImage decode_png(std::span<const std::uint8_t> bytes, std::string_view origin) {
  SN_CHECK(bytes.size() <= static_cast<std::size_t>(INT_MAX), "{}: {} bytes is too large for the PNG decoder", origin,
           bytes.size());
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int length = static_cast<int>(bytes.size());
  int width = 0;
  int height = 0;
  int channels = 0;
  // The size first, so a corrupt or hostile one is refused before any allocation, and named: stb_image refuses
  // sizes it cannot decode (0 wide, or past its own limits) without saying which. IHDR is the first chunk; its
  // bytes 16-23 (after the signature and the chunk's length and type) hold the width and height, which are
  // what stb_image reads too (it refuses a file whose first chunk is not IHDR).
  if (bytes.size() >= 24 && std::string_view(reinterpret_cast<const char*>(&bytes[12]), 4) == "IHDR") {
    const std::uint64_t w = big_endian32(&bytes[16]), h = big_endian32(&bytes[20]);
    SN_CHECK(w >= 1 && h >= 1 && w * h <= std::uint64_t{kMaxImagePixels},
             "{}: a {}x{} PNG; images from 1x1 to {} pixels are accepted", origin, w, h, kMaxImagePixels);
  }
  SN_CHECK(stbi_info_from_memory(data, length, &width, &height, &channels) == 1, "{}: not a readable PNG ({})", origin,
           failure_reason());
  const std::int64_t pixels = std::int64_t{width} * height;

  check_chunks(bytes, origin, width, height);

  DecodedImage image;
  const bool sixteen_bit = stbi_is_16_bit_from_memory(data, length) == 1;
  std::unique_ptr<void, StbFree> decoded(
      sixteen_bit ? static_cast<void*>(stbi_load_16_from_memory(data, length, &width, &height, &channels, 0))
                  : static_cast<void*>(stbi_load_from_memory(data, length, &width, &height, &channels, 0)));
  SN_CHECK(decoded != nullptr, "{}: corrupt PNG ({})", origin, failure_reason());
  SN_CHECK(channels >= 1 && channels <= 4, "{}: PNG decoded to {} channels", origin, channels);
  image.height = height;
  image.width = width;
  image.channels = channels;
  image.max_value = sixteen_bit ? 65535 : 255;
  const auto count = static_cast<std::size_t>(pixels) * static_cast<std::size_t>(channels);
  if (sixteen_bit) {
    const auto* samples = static_cast<const std::uint16_t*>(decoded.get());
    image.samples.assign(samples, samples + count);
  } else {
    const auto* samples = static_cast<const std::uint8_t*>(decoded.get());
    image.samples.assign(samples, samples + count);
  }
  return image;
}

}  // namespace sprintnet
