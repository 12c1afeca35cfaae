// Image files for `sprintnet predict`: PGM (P2, P5, 8 and 16 bit) and PNG
// (8-bit through stb_image_write, 16-bit built chunk by chunk here), colour
// and alpha conversion, resizing, and the errors for corrupt files.
#include "sprintnet/data/image.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stb/stb_image_write.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>

#include "sprintnet/core/error.h"
#include "sprintnet/core/random.h"
#include "sprintnet/data/idx.h"
#include "support/error_message.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using Bytes = std::vector<std::uint8_t>;

void write_bytes(const std::filesystem::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

Bytes text_bytes(std::string_view text) { return {text.begin(), text.end()}; }

Bytes random_bytes(std::size_t n, Generator& gen, std::uint32_t below = 256) {
  Bytes out(n);
  for (auto& b : out) b = static_cast<std::uint8_t>(gen.below(below));
  return out;
}

bool any_nonzero(const Bytes& bytes) {
  return std::any_of(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b != 0; });
}

// An 8-bit PNG through the encoder libstb ships; channels 1 to 4.
void write_png(const std::filesystem::path& path, int width, int height, int channels, const Bytes& samples) {
  ASSERT_EQ(samples.size(), static_cast<std::size_t>(width * height * channels));
  ASSERT_EQ(stbi_write_png(path.c_str(), width, height, channels, samples.data(), width * channels), 1) << path;
}

// A grayscale PNG of bit depth `depth` from its raw (filtered) image data, zlib-compressed into one
// IDAT: IHDR, IDAT, IEND, each chunk with its CRC. What stb_image_write cannot produce.
Bytes gray_png(std::uint32_t width, std::uint32_t height, std::uint8_t depth, const Bytes& raw) {
  auto put32 = [](Bytes& out, std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
  };
  Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  auto chunk = [&](std::string_view type, const Bytes& data) {
    put32(png, static_cast<std::uint32_t>(data.size()));
    Bytes body(type.begin(), type.end());
    body.insert(body.end(), data.begin(), data.end());
    png.insert(png.end(), body.begin(), body.end());
    put32(png, static_cast<std::uint32_t>(crc32(0, body.data(), static_cast<uInt>(body.size()))));
  };
  Bytes header;
  put32(header, width);
  put32(header, height);
  header.insert(header.end(), {depth, 0, 0, 0, 0});  // gray, deflate, filter 0, no interlace
  chunk("IHDR", header);
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  Bytes packed(packed_size);
  EXPECT_EQ(compress(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size())), Z_OK);
  packed.resize(packed_size);
  chunk("IDAT", packed);
  chunk("IEND", {});
  return png;
}

// A 16-bit grayscale PNG: filter-0 rows of big-endian samples.
Bytes png16_gray(std::uint32_t width, std::uint32_t height, const std::vector<std::uint16_t>& samples) {
  Bytes raw;
  for (std::uint32_t y = 0; y < height; ++y) {
    raw.push_back(0);  // filter: none
    for (std::uint32_t x = 0; x < width; ++x) {
      const std::uint16_t v = samples[y * width + x];
      raw.push_back(static_cast<std::uint8_t>(v >> 8));
      raw.push_back(static_cast<std::uint8_t>(v & 0xFF));
    }
  }
  return gray_png(width, height, 16, raw);
}

class ImageTest : public ::testing::Test {
 protected:
  std::filesystem::path dir_ = test::temp_dir("image");
  Generator gen_{test::test_seed()};
  void TearDown() override { std::filesystem::remove_all(dir_); }
};

TEST_F(ImageTest, BinaryPgmRoundTripsItsBytes) {
  const Bytes pixels = random_bytes(28 * 28, gen_);
  ASSERT_TRUE(any_nonzero(pixels));
  Bytes file = text_bytes("P5\n# made by a test\n28 28\n255\n");
  file.insert(file.end(), pixels.begin(), pixels.end());
  write_bytes(dir_ / "digit.pgm", file);
  EXPECT_EQ(load_image_for_model(dir_ / "digit.pgm", {28, 28, false}), pixels);
}

TEST_F(ImageTest, TextPgmIsScaledByItsMaxval) {
  // maxval 15: sample v is v/15 of white, so 255 * v / 15 = 17 v exactly.
  const Bytes values = random_bytes(4 * 3, gen_, 16);
  ASSERT_TRUE(any_nonzero(values));
  std::string text = "P2 # comment after the magic\n4 3\n15\n";
  for (std::size_t i = 0; i < values.size(); ++i) text += fmt::format("{}{}", values[i], i % 4 == 3 ? "\n" : "  ");
  const DecodedImage image = decode_pgm(text_bytes(text), "text.pgm");
  EXPECT_EQ(image.width, 4);
  EXPECT_EQ(image.height, 3);
  EXPECT_EQ(image.max_value, 15);
  const Bytes bytes = to_bytes(to_gray(image, false));
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(bytes[i], 17 * values[i]) << "pixel " << i;
}

TEST_F(ImageTest, SixteenBitPgmIsReadBigEndian) {
  std::vector<std::uint16_t> values(6);
  for (auto& v : values) v = static_cast<std::uint16_t>(gen_.below(65536));
  values[0] = 0x00FF;  // low byte only: reading one byte per sample would see 0
  Bytes file = text_bytes("P5 3 2 65535\n");
  for (const std::uint16_t v : values)
    file.insert(file.end(), {static_cast<std::uint8_t>(v >> 8), static_cast<std::uint8_t>(v)});
  const DecodedImage image = decode_pgm(file, "wide.pgm");
  EXPECT_EQ(image.max_value, 65535);
  EXPECT_EQ(image.samples, values);
}

TEST_F(ImageTest, GrayPngOfTheModelSizeKeepsItsBytesExactly) {
  const Bytes pixels = random_bytes(28 * 28, gen_);
  ASSERT_TRUE(any_nonzero(pixels));
  write_png(dir_ / "gray.png", 28, 28, 1, pixels);
  EXPECT_EQ(load_image_for_model(dir_ / "gray.png", {28, 28, false}), pixels);
  // --invert: 255 - v.
  const Bytes inverted = load_image_for_model(dir_ / "gray.png", {28, 28, true});
  for (std::size_t i = 0; i < pixels.size(); ++i) ASSERT_EQ(inverted[i], 255 - pixels[i]) << "pixel " << i;
}

TEST_F(ImageTest, ColourBecomesBt601Luma) {
  const int width = 5;
  const int height = 4;
  Bytes rgb = random_bytes(static_cast<std::size_t>(width * height * 3), gen_);
  // Pure primaries first: 0.299, 0.587 and 0.114 of 255 are 76.2, 149.7 and 29.1.
  const Bytes primaries = {255, 0, 0, 0, 255, 0, 0, 0, 255};
  std::copy(primaries.begin(), primaries.end(), rgb.begin());
  write_png(dir_ / "colour.png", width, height, 3, rgb);
  const Bytes gray = load_image_for_model(dir_ / "colour.png", {height, width, false});
  EXPECT_EQ(gray[0], 76);
  EXPECT_EQ(gray[1], 150);
  EXPECT_EQ(gray[2], 29);
  for (std::size_t p = 0; p < gray.size(); ++p) {
    const double luma = 0.299 * rgb[3 * p] + 0.587 * rgb[3 * p + 1] + 0.114 * rgb[3 * p + 2];
    // The luma is computed in double and stored as float before rounding: within a rounding step of exact.
    EXPECT_NEAR(gray[p], luma, 0.5 + 1e-4) << "pixel " << p;
  }
}

TEST_F(ImageTest, TransparentPixelsAreThePaper) {
  // RGBA: opaque white ink, half-transparent white, fully transparent (colour ignored), opaque black ink.
  const Bytes rgba = {255, 255, 255, 255, 255, 255, 255, 128, 17, 99, 200, 0, 0, 0, 0, 255};
  write_png(dir_ / "alpha.png", 4, 1, 4, rgba);
  // On black paper: white ink shows, half alpha is half gray (128/255 of white), transparent is black.
  EXPECT_EQ(load_image_for_model(dir_ / "alpha.png", {1, 4, false}), (Bytes{255, 128, 0, 0}));
  // --invert: transparent is white paper, which inverts to black; black ink becomes white.
  EXPECT_EQ(load_image_for_model(dir_ / "alpha.png", {1, 4, true}), (Bytes{0, 0, 0, 255}));
  // Gray + alpha follows the same rule.
  write_png(dir_ / "gray_alpha.png", 2, 1, 2, Bytes{200, 255, 200, 0});
  EXPECT_EQ(load_image_for_model(dir_ / "gray_alpha.png", {1, 2, false}), (Bytes{200, 0}));
}

TEST_F(ImageTest, SixteenBitPngIsSupported) {
  std::vector<std::uint16_t> values(3 * 2);
  for (auto& v : values) v = static_cast<std::uint16_t>(gen_.below(65536));
  values[0] = 0x00FF;
  values[1] = 0xFFFF;
  write_bytes(dir_ / "wide.png", png16_gray(3, 2, values));
  const DecodedImage image = decode_png(read_file_bytes(dir_ / "wide.png"), "wide.png");
  EXPECT_EQ(image.max_value, 65535);
  EXPECT_EQ(image.channels, 1);
  EXPECT_EQ(image.samples, values);
  const Bytes bytes = load_image_for_model(dir_ / "wide.png", {2, 3, false});
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(bytes[i], std::lround(255.0 * values[i] / 65535.0)) << "pixel " << i;
  }
}

TEST_F(ImageTest, ShrinkingAveragesAreas) {
  GrayImage image{56, 56, {}};
  for (int i = 0; i < 56 * 56; ++i) image.pixels.push_back(gen_.uniform_float());
  const GrayImage half = resize(image, 28, 28);
  ASSERT_EQ(half.pixels.size(), 28u * 28u);
  for (std::int64_t y = 0; y < 28; ++y) {
    for (std::int64_t x = 0; x < 28; ++x) {
      auto at = [&](std::int64_t yy, std::int64_t xx) { return image.pixels[static_cast<std::size_t>(yy * 56 + xx)]; };
      const double mean =
          (at(2 * y, 2 * x) + at(2 * y, 2 * x + 1) + at(2 * y + 1, 2 * x) + at(2 * y + 1, 2 * x + 1)) / 4.0;
      // Weights 1/2 per axis are exact; the only rounding is the float result.
      ASSERT_NEAR(half.pixels[static_cast<std::size_t>(y * 28 + x)], mean, 1e-6) << y << "," << x;
    }
  }
  // A non-integer factor: 3 → 2 pixels, each output covering 1.5 inputs.
  const GrayImage row{1, 3, {0.3f, 0.6f, 0.9f}};
  const GrayImage two = resize(row, 1, 2);
  EXPECT_NEAR(two.pixels[0], (2 * 0.3 + 0.6) / 3, 1e-6);  // float inputs: 1e-6 covers their rounding
  EXPECT_NEAR(two.pixels[1], (0.6 + 2 * 0.9) / 3, 1e-6);
}

TEST_F(ImageTest, GrowingIsBilinearWithAlignedCentres) {
  const GrayImage row{1, 2, {0.0f, 1.0f}};
  const GrayImage four = resize(row, 1, 4);
  // Output centres map to -0.25 (clamped), 0.25, 0.75, 1.25 (clamped) of the input.
  EXPECT_EQ(four.pixels, (std::vector<float>{0.0f, 0.25f, 0.75f, 1.0f}));
  // A constant image stays constant for any mix of growing and shrinking.
  const float value = gen_.uniform_float();
  const GrayImage flat{10, 40, std::vector<float>(400, value)};
  for (const GrayImage& out : {resize(flat, 28, 28), resize(flat, 13, 57)}) {
    for (const float v : out.pixels) ASSERT_NEAR(v, value, 1e-6);  // weights sum to 1 up to double rounding
  }
}

TEST_F(ImageTest, OtherSizesAreResizedAndVeryDifferentShapesRejected) {
  const Bytes big = random_bytes(56 * 56, gen_);
  write_png(dir_ / "big.png", 56, 56, 1, big);
  EXPECT_EQ(load_image_for_model(dir_ / "big.png", {28, 28, false}).size(), 28u * 28u);
  write_png(dir_ / "near.png", 30, 28, 1, random_bytes(30 * 28, gen_));
  EXPECT_EQ(load_image_for_model(dir_ / "near.png", {28, 28, false}).size(), 28u * 28u);
  write_png(dir_ / "wide.png", 56, 28, 1, random_bytes(56 * 28, gen_));
  const std::string message = test::error_message([&] { load_image_for_model(dir_ / "wide.png", {28, 28, false}); });
  EXPECT_THAT(message, HasSubstr("wide.png"));
  EXPECT_THAT(message, HasSubstr("56x28"));
  EXPECT_THAT(message, HasSubstr("aspect"));
}

TEST_F(ImageTest, IdxPixelsGoThroughTheSameConversion) {
  const Bytes pixels = random_bytes(28 * 28, gen_);
  EXPECT_EQ(gray_bytes_for_model(pixels, 28, 28, {28, 28, false}, "x.idx[0]"), pixels);
  const Bytes inverted = gray_bytes_for_model(pixels, 28, 28, {28, 28, true}, "x.idx[0]");
  for (std::size_t i = 0; i < pixels.size(); ++i) ASSERT_EQ(inverted[i], 255 - pixels[i]);
  EXPECT_EQ(gray_bytes_for_model(random_bytes(56 * 56, gen_), 56, 56, {28, 28, false}, "x.idx[1]").size(), 28u * 28u);
}

TEST_F(ImageTest, FileKindsAreDetectedByContent) {
  EXPECT_EQ(detect_image_file_kind(Bytes{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'}), ImageFileKind::kPng);
  EXPECT_EQ(detect_image_file_kind(text_bytes("P5\n")), ImageFileKind::kPgm);
  EXPECT_EQ(detect_image_file_kind(text_bytes("P2 ")), ImageFileKind::kPgm);
  EXPECT_EQ(detect_image_file_kind(Bytes{0, 0, 0x08, 3, 0, 0}), ImageFileKind::kIdx);
  EXPECT_EQ(detect_image_file_kind(Bytes{0x1F, 0x8B, 8}), ImageFileKind::kIdx);
  EXPECT_EQ(detect_image_file_kind(text_bytes("P6\n")), ImageFileKind::kUnknown);
  EXPECT_EQ(detect_image_file_kind(Bytes{0xFF, 0xD8, 0xFF, 0xE0}), ImageFileKind::kUnknown);
  EXPECT_EQ(detect_image_file_kind(Bytes{}), ImageFileKind::kUnknown);
}

TEST_F(ImageTest, CorruptFilesAreErrorsNamingTheFile) {
  const ImageOptions options{28, 28, false};
  auto expect_error = [&](const std::string& name, const Bytes& contents, const std::string& expected) {
    write_bytes(dir_ / name, contents);
    const std::string message = test::error_message([&] { load_image_for_model(dir_ / name, options); });
    EXPECT_THAT(message, HasSubstr(name)) << name;
    EXPECT_THAT(message, HasSubstr(expected)) << name;
  };
  write_png(dir_ / "good.png", 28, 28, 1, random_bytes(28 * 28, gen_));
  const Bytes png = read_file_bytes(dir_ / "good.png");
  expect_error("truncated.png", Bytes(png.begin(), png.begin() + static_cast<std::ptrdiff_t>(png.size() / 2)), "PNG");
  // Cut anywhere after the IHDR chunk, the end chunk included, the file is refused as truncated (stb_image
  // decoded a file cut inside IEND, and named cuts elsewhere by a few letters of a chunk type: "corrupt PNG (ID)").
  for (std::size_t size = 33; size < png.size(); ++size) {
    const std::string message = test::error_message([&] {
      write_bytes(dir_ / "cut.png", Bytes(png.begin(), png.begin() + static_cast<std::ptrdiff_t>(size)));
      load_image_for_model(dir_ / "cut.png", options);
    });
    EXPECT_THAT(message, AllOf(HasSubstr("cut.png"), HasSubstr("truncated"))) << size << " of " << png.size();
  }
  Bytes bad_crc = png;
  bad_crc[30] ^= 0x01;  // IHDR's CRC (signature 8, length 4, type 4, 13 bytes of header)
  expect_error("crc.png", bad_crc, "CRC");
  // A damaged ancillary chunk (here a text comment after IHDR) is skipped, as libpng skips it.
  Bytes comment = {0, 0, 0, 4, 't', 'E', 'X', 't', 'a', '=', 'b', '!', 0, 0, 0, 0};  // a wrong CRC of zeros
  Bytes with_comment = png;
  with_comment.insert(with_comment.begin() + 33, comment.begin(), comment.end());  // after IHDR (8 + 25)
  write_bytes(dir_ / "comment.png", with_comment);
  EXPECT_EQ(load_image_for_model(dir_ / "comment.png", options).size(), 28u * 28u);
  // 28 x 28 pixels whose image data inflates to 1 MiB (a bomb: a 2 MB file could inflate to gigabytes).
  expect_error("bomb.png", gray_png(28, 28, 8, Bytes(1 << 20, 0)), "inflates to more than");
  // Sizes stb_image refuses without saying why: named from the IHDR chunk.
  expect_error("empty-size.png", gray_png(0, 0, 8, Bytes{}), "a 0x0 PNG; images from 1x1");
  expect_error("huge.png", gray_png(100000, 100000, 8, Bytes(16, 0)), "a 100000x100000 PNG; images from 1x1");
  Bytes garbage(200, 0x42);  // the PNG signature, then bytes that are no chunk
  std::copy_n(png.begin(), 8, garbage.begin());
  expect_error("garbage.png", garbage, "PNG");
  expect_error("truncated.pgm", text_bytes("P5 28 28 255\nabc"), "truncated");
  expect_error("short.pgm", text_bytes("P2 2 2 255\n1 2 3"), "truncated");
  expect_error("above.pgm", text_bytes("P2 2 1 15\n3 16\n"), "above");
  expect_error("zero.pgm", text_bytes("P2 2 1 0\n0 0\n"), "maxval");
  expect_error("header.pgm", text_bytes("P5 28 x8 255\n"), "height");
  expect_error("trailing.pgm", text_bytes("P2 1 1 255\n7 8\n"), "after the image");
  expect_error("photo.jpg", Bytes{0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10}, "JPEG");
  expect_error("empty.png", Bytes{}, "is empty (0 bytes)");
  write_idx(dir_ / "images.idx", IdxType::kU8, {1, 2, 2}, Bytes{1, 2, 3, 4});
  EXPECT_THAT(test::error_message([&] { load_image_for_model(dir_ / "images.idx", options); }), HasSubstr("IDX"));
  EXPECT_THAT(test::error_message([&] { load_image_for_model(dir_ / "missing.png", options); }), HasSubstr("no such file"));
  EXPECT_THAT(test::error_message([&] { load_image_for_model(dir_, options); }), HasSubstr("directory"));
}

}  // namespace
}  // namespace sprintnet
