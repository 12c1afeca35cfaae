#include "sprintnet/data/image.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "sprintnet/core/error.h"
#include "sprintnet/io/read_file.h"

namespace sprintnet {
namespace {

inline constexpr std::array<std::uint8_t, 8> kPngSignature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
inline constexpr std::uint8_t kGzipMagic0 = 0x1F;
inline constexpr std::uint8_t kGzipMagic1 = 0x8B;
// Input files (images, predict's IDX files) are read whole; anything larger is not an input we could use.
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{1} << 30;

// ITU-R BT.601 luma weights.
inline constexpr double kLumaRed = 0.299;
inline constexpr double kLumaGreen = 0.587;
inline constexpr double kLumaBlue = 0.114;

bool starts_with(std::span<const std::uint8_t> bytes, std::span<const std::uint8_t> prefix) {
  return bytes.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), bytes.begin());
}

bool is_idx_type_code(std::uint8_t code) {
  return code == 0x08 || code == 0x09 || code == 0x0B || code == 0x0C || code == 0x0D || code == 0x0E;
}

// A hint for files people commonly pass by mistake.
std::string_view format_hint(std::span<const std::uint8_t> head) {
  if (head.size() >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF) return " (it looks like a JPEG)";
  if (head.size() >= 2 && head[0] == 'P' && head[1] >= '1' && head[1] <= '7') return " (a Netpbm file other than PGM)";
  if (head.size() >= 2 && head[0] == 'B' && head[1] == 'M') return " (it looks like a BMP)";
  if (head.size() >= 4 && head[0] == 'G' && head[1] == 'I' && head[2] == 'F') return " (it looks like a GIF)";
  return "";
}

// One output sample of a 1-D resampling: sum of weight * input[index].
struct Tap {
  std::int64_t index = 0;
  double weight = 0.0;
};

// For each output position, the input positions it reads and their weights.
std::vector<std::vector<Tap>> axis_taps(std::int64_t in, std::int64_t out) {
  std::vector<std::vector<Tap>> taps(static_cast<std::size_t>(out));
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    auto& row = taps[static_cast<std::size_t>(o)];
    if (in == out) {
      row.push_back({o, 1.0});
    } else if (in > out) {
      // Area averaging: the output pixel covers [start, end) of the input; each
      // input pixel counts by how much of it lies inside.
      const double start = static_cast<double>(o) * scale;
      const double end = static_cast<double>(o + 1) * scale;
      const auto first = static_cast<std::int64_t>(std::floor(start));
      const auto last = std::min(in, static_cast<std::int64_t>(std::ceil(end)));
      for (std::int64_t i = first; i < last; ++i) {
        const double overlap = std::min(end, static_cast<double>(i + 1)) - std::max(start, static_cast<double>(i));
        if (overlap > 0.0) row.push_back({i, overlap / scale});
      }
    } else {
      // Bilinear with pixel centres aligned (PIL, OpenCV, align_corners=False), edges clamped.
      const double x = std::clamp((static_cast<double>(o) + 0.5) * scale - 0.5, 0.0, static_cast<double>(in - 1));
      const auto i0 = static_cast<std::int64_t>(std::floor(x));
      const std::int64_t i1 = std::min(i0 + 1, in - 1);
      const double frac = x - static_cast<double>(i0);
      row.push_back({i0, 1.0 - frac});
      if (frac > 0.0) row.push_back({i1, frac});
    }
  }
  return taps;
}

void check_aspect_ratio(std::int64_t height, std::int64_t width, const ImageOptions& options, std::string_view origin) {
  const double aspect = static_cast<double>(width) / static_cast<double>(height);
  const double target = static_cast<double>(options.width) / static_cast<double>(options.height);
  const double distortion = std::max(aspect / target, target / aspect);
  SN_CHECK(distortion <= kMaxAspectDistortion,
           "{}: the image is {}x{} (width x height, aspect {:.2f}) but the model takes {}x{} (aspect {:.2f}); "
           "crop or pad it to a similar shape (up to {}x off is stretched to fit)",
           origin, width, height, aspect, options.width, options.height, target, kMaxAspectDistortion);
}

GrayImage fit_to_model(GrayImage gray, const ImageOptions& options, std::string_view origin) {
  if (gray.height == options.height && gray.width == options.width) return gray;
  check_aspect_ratio(gray.height, gray.width, options, origin);
  return resize(gray, options.height, options.width);
}

}  // namespace

ImageFileKind detect_image_file_kind(std::span<const std::uint8_t> head) {
  if (starts_with(head, kPngSignature)) return ImageFileKind::kPng;
  if (head.size() >= 3 && head[0] == 'P' && (head[1] == '2' || head[1] == '5') &&
      (head[2] == ' ' || head[2] == '\t' || head[2] == '\n' || head[2] == '\r' || head[2] == '#')) {
    return ImageFileKind::kPgm;
  }
  if (head.size() >= 2 && head[0] == kGzipMagic0 && head[1] == kGzipMagic1) return ImageFileKind::kIdx;
  if (head.size() >= 4 && head[0] == 0 && head[1] == 0 && is_idx_type_code(head[2]) && head[3] >= 1 && head[3] <= 4) {
    return ImageFileKind::kIdx;
  }
  return ImageFileKind::kUnknown;
}

GrayImage to_gray(const DecodedImage& image, bool invert) {
  SN_CHECK(image.channels >= 1 && image.channels <= 4, "an image of {} channels cannot be converted to gray",
           image.channels);
  SN_CHECK(image.max_value >= 1, "an image with maximum sample value {} cannot be converted", image.max_value);
  const auto pixels = static_cast<std::size_t>(image.height * image.width);
  const auto channels = static_cast<std::size_t>(image.channels);
  SN_CHECK(image.samples.size() == pixels * channels, "a {}x{} image of {} channels needs {} samples, it has {}",
           image.width, image.height, image.channels, pixels * channels, image.samples.size());
  const double max_value = image.max_value;
  const bool has_alpha = image.channels == 2 || image.channels == 4;
  const bool has_colour = image.channels >= 3;
  const double paper = invert ? 1.0 : 0.0;
  GrayImage out{image.height, image.width, std::vector<float>(pixels)};
  for (std::size_t p = 0; p < pixels; ++p) {
    const std::uint16_t* s = &image.samples[p * channels];
    double value = has_colour ? (kLumaRed * s[0] + kLumaGreen * s[1] + kLumaBlue * s[2]) / max_value : s[0] / max_value;
    if (has_alpha) {
      const double alpha = s[channels - 1] / max_value;
      value = alpha * value + (1.0 - alpha) * paper;
    }
    out.pixels[p] = static_cast<float>(invert ? 1.0 - value : value);
  }
  return out;
}

GrayImage resize(const GrayImage& image, std::int64_t height, std::int64_t width) {
  SN_CHECK(height >= 1 && width >= 1, "cannot resize an image to {}x{}", width, height);
  SN_CHECK(image.height >= 1 && image.width >= 1 &&
               image.pixels.size() == static_cast<std::size_t>(image.height * image.width),
           "cannot resize an empty or inconsistent {}x{} image", image.width, image.height);
  const auto column_taps = axis_taps(image.width, width);
  const auto row_taps = axis_taps(image.height, height);
  // Rows first (each input row to the output width), then columns.
  std::vector<double> rows(static_cast<std::size_t>(image.height * width));
  for (std::int64_t y = 0; y < image.height; ++y) {
    const float* in = &image.pixels[static_cast<std::size_t>(y * image.width)];
    for (std::int64_t x = 0; x < width; ++x) {
      double sum = 0.0;
      for (const Tap& tap : column_taps[static_cast<std::size_t>(x)]) sum += tap.weight * in[tap.index];
      rows[static_cast<std::size_t>(y * width + x)] = sum;
    }
  }
  GrayImage out{height, width, std::vector<float>(static_cast<std::size_t>(height * width))};
  for (std::int64_t y = 0; y < height; ++y) {
    for (std::int64_t x = 0; x < width; ++x) {
      double sum = 0.0;
      for (const Tap& tap : row_taps[static_cast<std::size_t>(y)]) {
        sum += tap.weight * rows[static_cast<std::size_t>(tap.index * width + x)];
      }
      out.pixels[static_cast<std::size_t>(y * width + x)] = static_cast<float>(sum);
    }
  }
  return out;
}

std::vector<std::uint8_t> to_bytes(const GrayImage& image) {
  std::vector<std::uint8_t> out(image.pixels.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double scaled = std::round(255.0 * static_cast<double>(image.pixels[i]));
    out[i] = static_cast<std::uint8_t>(std::clamp(scaled, 0.0, 255.0));
  }
  return out;
}

std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  SN_CHECK(std::filesystem::exists(status), "{}: no such file", path.string());
  SN_CHECK(!std::filesystem::is_directory(status), "{}: is a directory, not a file", path.string());
  // Read to the end, whatever size the file reports or cannot report (a pipe), the limit kept as the bytes come.
  const std::string bytes = read_file(path, "input file", kMaxInputFileBytes);
  return {bytes.begin(), bytes.end()};
}

std::vector<std::uint8_t> image_bytes_for_model(std::span<const std::uint8_t> file_bytes, std::string_view origin,
                                                const ImageOptions& options) {
  // (An empty pipe or file was "not a PNG or PGM", as if its bytes were of another kind.)
  SN_CHECK(!file_bytes.empty(), "{}: is empty (0 bytes): no image to classify", origin);
  DecodedImage decoded;
  switch (detect_image_file_kind(file_bytes)) {
    case ImageFileKind::kPng:
      decoded = decode_png(file_bytes, origin);
      break;
    case ImageFileKind::kPgm:
      decoded = decode_pgm(file_bytes, origin);
      break;
    case ImageFileKind::kIdx:
      SN_FAIL("{}: is an IDX file, not a single image", origin);
    case ImageFileKind::kUnknown:
      SN_FAIL("{}: not a PNG or PGM (P2/P5) image{}", origin,
              format_hint(file_bytes.first(std::min<std::size_t>(file_bytes.size(), 8))));
  }
  return to_bytes(fit_to_model(to_gray(decoded, options.invert), options, origin));
}

std::vector<std::uint8_t> load_image_for_model(const std::filesystem::path& path, const ImageOptions& options) {
  return image_bytes_for_model(read_file_bytes(path), path.string(), options);
}

std::vector<std::uint8_t> gray_bytes_for_model(std::span<const std::uint8_t> pixels, std::int64_t height,
                                               std::int64_t width, const ImageOptions& options,
                                               std::string_view origin) {
  SN_CHECK(height >= 1 && width >= 1 && pixels.size() == static_cast<std::size_t>(height * width),
           "{}: {} pixels do not make a {}x{} image", origin, pixels.size(), width, height);
  if (height == options.height && width == options.width && !options.invert) {
    return {pixels.begin(), pixels.end()};
  }
  DecodedImage decoded{height, width, 1, 255, {pixels.begin(), pixels.end()}};
  return to_bytes(fit_to_model(to_gray(decoded, options.invert), options, origin));
}

}  // namespace sprintnet
