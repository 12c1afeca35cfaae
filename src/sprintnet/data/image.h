#pragma once
// Image files turned into the pixels a model takes: PNG (via Debian's libstb)
// and PGM (P2 text, P5 binary; our own parser), decoded, converted to
// grayscale, resized and quantised to uint8 like the IDX data sets.
//
// Conventions, chosen to match MNIST (white digits on a black background):
//   - colour → gray by ITU-R BT.601 luma, 0.299 R + 0.587 G + 0.114 B, on the
//     stored (gamma-encoded) values, as PIL's Image.convert("L") does;
//   - transparent pixels are paper: alpha is composited onto black, or onto
//     white when `invert` is set (dark ink on light paper), and then inverted,
//     so a drawing on a transparent canvas comes out white-on-black either way;
//   - a different size is resized (area averaging when shrinking, bilinear
//     when growing); an aspect ratio more than kMaxAspectDistortion away from
//     the model's is rejected rather than silently squashed;
//   - 8- and 16-bit PNGs and PGMs of any maxval are scaled to [0, 1] exactly.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

namespace sprintnet {

enum class ImageFileKind { kPng, kPgm, kIdx, kUnknown };

// What the first bytes of a file say it is (never the file name): the PNG
// signature, "P2"/"P5", or an IDX header (00 00 type ndims, or gzip 1f 8b).
ImageFileKind detect_image_file_kind(std::span<const std::uint8_t> head);

// A decoded file before any conversion: interleaved channels (1 gray, 2 gray +
// alpha, 3 RGB, 4 RGBA), each sample in [0, max_value].
struct DecodedImage {
  std::int64_t height = 0;
  std::int64_t width = 0;
  int channels = 1;
  int max_value = 255;  // 255 for 8-bit files, 65535 for 16-bit, a PGM's maxval otherwise
  std::vector<std::uint16_t> samples;
};

// Decoders of file contents; `origin` names the file in errors.
DecodedImage decode_png(std::span<const std::uint8_t> bytes, std::string_view origin);
DecodedImage decode_pgm(std::span<const std::uint8_t> bytes, std::string_view origin);

// Gray pixels in [0, 1], row-major, 0 = black.
struct GrayImage {
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::vector<float> pixels;
};

// Luma of colour, alpha composited onto black (white when `invert`), then
// inverted (1 - v) when `invert`.
GrayImage to_gray(const DecodedImage& image, bool invert);
// Separable resampling, each axis on its own: area averaging where it shrinks,
// bilinear (pixel centres aligned, edges clamped) where it grows.
GrayImage resize(const GrayImage& image, std::int64_t height, std::int64_t width);
// round(255 * v), clamped.
std::vector<std::uint8_t> to_bytes(const GrayImage& image);

// How far (as a ratio >= 1) an image's width/height may differ from the
// model's before it is rejected instead of stretched.
inline constexpr double kMaxAspectDistortion = 1.25;
// Larger images are refused before decoding: a corrupt or hostile header
// must not make us allocate gigabytes.
inline constexpr std::int64_t kMaxImagePixels = std::int64_t{1} << 26;

struct ImageOptions {
  std::int64_t height = 28;  // the model's input size
  std::int64_t width = 28;
  bool invert = false;  // the image is dark ink on light paper
};

// Reads a PNG or PGM file and returns height*width bytes ready for the model.
// Throws sprintnet::Error naming the file when it is unreadable, corrupt, of
// another format, or of a very different aspect ratio.
std::vector<std::uint8_t> load_image_for_model(const std::filesystem::path& path, const ImageOptions& options);
// The same for a file's bytes already in memory (read_file_bytes); `origin` names the file in errors.
std::vector<std::uint8_t> image_bytes_for_model(std::span<const std::uint8_t> file_bytes, std::string_view origin,
                                                const ImageOptions& options);
// The same conversion for 8-bit gray pixels already in memory (an IDX image).
std::vector<std::uint8_t> gray_bytes_for_model(std::span<const std::uint8_t> pixels, std::int64_t height,
                                               std::int64_t width, const ImageOptions& options,
                                               std::string_view origin);

// The whole bytes of an input file (an image, or an IDX file predict reads), read once to its end through
// io/read_file.h, so a pipe (`<(command)`) works; refused, naming the file, when it is missing, a directory or a
// device, cannot be read, or holds more than 1 GiB (counted as the bytes come: no size is asked of a pipe).
std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path);

}  // namespace sprintnet
