// PGM decoding (Netpbm's gray format), both flavours:
//   P2: "P2 <width> <height> <maxval>" then width*height decimal samples
//   P5: the same header, one whitespace byte, then the samples in binary,
//       one byte each when maxval < 256, else two bytes big-endian
// '#' starts a comment that runs to the end of the line. Our own parser
// rather than stb_image's: stb reads only P5, does not scale samples by a
// maxval other than 255/65535, and does not notice a truncated raster.
#include <string>

#include "sprintnet/core/error.h"
#include "sprintnet/data/image.h"

namespace sprintnet {
namespace {

inline constexpr int kMaxPgmValue = 65535;
inline constexpr int kMaxOneByteValue = 255;

bool is_pnm_space(std::uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(std::uint8_t c) { return c >= '0' && c <= '9'; }

class PgmReader {
 public:
  PgmReader(std::span<const std::uint8_t> bytes, std::string_view origin) : bytes_(bytes), origin_(origin) {}

  // Skips whitespace and comments; false at the end of the file.
  bool skip_space() {
    while (pos_ < bytes_.size()) {
      if (is_pnm_space(bytes_[pos_])) {
        ++pos_;
      } else if (bytes_[pos_] == '#') {
        while (pos_ < bytes_.size() && bytes_[pos_] != '\n' && bytes_[pos_] != '\r') ++pos_;
      } else {
        return true;
      }
    }
    return false;
  }

  // A decimal number in [0, limit]; `what` names it in errors.
  std::int64_t number(std::string_view what, std::int64_t limit) {
    SN_CHECK(skip_space(), "{}: PGM file ends before its {}", origin_, what);
    SN_CHECK(is_digit(bytes_[pos_]), "{}: PGM {} is not a number (found byte 0x{:02x} at offset {})", origin_, what,
             bytes_[pos_], pos_);
    std::int64_t value = 0;
    while (pos_ < bytes_.size() && is_digit(bytes_[pos_])) {
      value = value * 10 + (bytes_[pos_] - '0');
      SN_CHECK(value <= limit, "{}: PGM {} exceeds {}", origin_, what, limit);
      ++pos_;
    }
    SN_CHECK(pos_ == bytes_.size() || is_pnm_space(bytes_[pos_]) || bytes_[pos_] == '#',
             "{}: PGM {} is followed by byte 0x{:02x} at offset {}, expected whitespace", origin_, what, bytes_[pos_],
             pos_);
    return value;
  }

  std::size_t pos() const { return pos_; }
  void advance(std::size_t n) { pos_ += n; }
  std::span<const std::uint8_t> rest() const { return bytes_.subspan(pos_); }

 private:
  std::span<const std::uint8_t> bytes_;
  std::string_view origin_;
  std::size_t pos_ = 0;
};

void check_no_trailing_data(PgmReader& reader, std::string_view origin) {
  SN_CHECK(!reader.skip_space(),
           "{}: unexpected data at offset {} after the image (a file of several images is not "
           "supported)",
           origin, reader.pos());
}

}  // namespace

DecodedImage decode_pgm(std::span<const std::uint8_t> bytes, std::string_view origin) {
  SN_CHECK(bytes.size() >= 2 && bytes[0] == 'P' && (bytes[1] == '2' || bytes[1] == '5'),
           "{}: not a PGM file (it must start with P2 or P5)", origin);
  const bool binary = bytes[1] == '5';
  PgmReader reader(bytes, origin);
  reader.advance(2);
  DecodedImage image;
  image.width = reader.number("width", kMaxImagePixels);
  image.height = reader.number("height", kMaxImagePixels);
  image.max_value = static_cast<int>(reader.number("maxval", kMaxPgmValue));
  SN_CHECK(image.width >= 1 && image.height >= 1, "{}: PGM size {}x{} is empty", origin, image.width, image.height);
  SN_CHECK(image.width * image.height <= kMaxImagePixels, "{}: a {}x{} PGM is larger than the {} pixels accepted",
           origin, image.width, image.height, kMaxImagePixels);
  SN_CHECK(image.max_value >= 1, "{}: PGM maxval is 0; it must be in [1, {}]", origin, kMaxPgmValue);
  const auto count = static_cast<std::size_t>(image.width * image.height);
  image.samples.resize(count);

  if (binary) {
    // Exactly one whitespace byte separates the header from the raster (whose bytes may look like anything).
    SN_CHECK(reader.pos() < bytes.size(), "{}: PGM file ends after its header, before the pixels", origin);
    reader.advance(1);
    const std::size_t bytes_per_sample = image.max_value > kMaxOneByteValue ? 2 : 1;
    const std::span<const std::uint8_t> raster = reader.rest();
    SN_CHECK(raster.size() >= count * bytes_per_sample,
             "{}: PGM is truncated: a {}x{} image needs {} bytes of pixels, the file has {}", origin, image.width,
             image.height, count * bytes_per_sample, raster.size());
    for (std::size_t i = 0; i < count; ++i) {
      image.samples[i] =
          bytes_per_sample == 1 ? raster[i] : static_cast<std::uint16_t>(raster[2 * i] << 8 | raster[2 * i + 1]);
      SN_CHECK(image.samples[i] <= image.max_value, "{}: PGM pixel {} is {}, above the maxval {}", origin, i,
               image.samples[i], image.max_value);
    }
    reader.advance(count * bytes_per_sample);
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      SN_CHECK(reader.skip_space(), "{}: PGM is truncated: a {}x{} image needs {} pixel values, the file has {}",
               origin, image.width, image.height, count, i);
      image.samples[i] = static_cast<std::uint16_t>(reader.number("pixel value", image.max_value));
    }
  }
  check_no_trailing_data(reader, origin);
  return image;
}

}  // namespace sprintnet
