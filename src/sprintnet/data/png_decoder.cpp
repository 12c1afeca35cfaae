// PNG decoding with stb_image. Debian ships stb_image compiled in libstb
// (all formats, default options), and asks users to link it rather than
// compile a second copy; we only ever hand it files that carry the PNG
// signature, so the other formats it knows are never reached.
#include <stb/stb_image.h>

#include <climits>
#include <memory>

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

}  // namespace

DecodedImage decode_png(std::span<const std::uint8_t> bytes, std::string_view origin) {
  SN_CHECK(bytes.size() <= static_cast<std::size_t>(INT_MAX), "{}: {} bytes is too large for the PNG decoder", origin,
           bytes.size());
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int length = static_cast<int>(bytes.size());
  int width = 0;
  int height = 0;
  int channels = 0;
  // The header first, so a corrupt or hostile size is refused before any allocation.
  SN_CHECK(stbi_info_from_memory(data, length, &width, &height, &channels) == 1, "{}: not a readable PNG ({})", origin,
           failure_reason());
  const std::int64_t pixels = std::int64_t{width} * height;
  SN_CHECK(width >= 1 && height >= 1 && pixels <= kMaxImagePixels,
           "{}: a {}x{} PNG is larger than the {} pixels accepted", origin, width, height, kMaxImagePixels);

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
