// load_idx_dataset and make_normalization on small hand-made files.
#include "sprintnet/data/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "data/idx_files.h"
#include "sprintnet/data/idx.h"

namespace sprintnet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using test::error_message;
using test::ScratchDir;

struct SplitFiles {
  std::filesystem::path images, labels;
  std::vector<std::uint8_t> pixels;
  std::vector<std::int32_t> label_values;
};

std::vector<std::uint8_t> big_endian_i32(const std::vector<std::int32_t>& values) {
  std::vector<std::uint8_t> out;
  for (const std::int32_t v : values) {
    const auto u = static_cast<std::uint32_t>(v);
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(u >> shift));
  }
  return out;
}

// n random images of `sample_dims` and uint8 labels in [0, classes), the
// largest class present at a random index so that inference must find it.
SplitFiles write_split(const ScratchDir& dir, const std::string& prefix, std::int64_t n,
                       const std::vector<std::int64_t>& sample_dims, std::int64_t classes, Generator& gen) {
  SplitFiles split{dir / (prefix + "-images"), dir / (prefix + "-labels"), {}, {}};
  std::vector<std::int64_t> dims = {n};
  dims.insert(dims.end(), sample_dims.begin(), sample_dims.end());
  std::int64_t numel = 1;
  for (auto d : dims) numel *= d;
  split.pixels = test::random_bytes(static_cast<std::size_t>(numel), gen);
  std::vector<std::uint8_t> label_bytes = test::random_bytes(static_cast<std::size_t>(n), gen, 0, static_cast<unsigned>(classes));
  label_bytes[gen.below(static_cast<std::uint64_t>(n))] = static_cast<std::uint8_t>(classes - 1);
  split.label_values.assign(label_bytes.begin(), label_bytes.end());
  write_idx(split.images, IdxType::kU8, dims, split.pixels);
  write_idx(split.labels, IdxType::kU8, {n}, label_bytes);
  return split;
}

TEST(LoadIdxDataset, LoadsImagesOfAnySize) {
  ScratchDir dir("dataset-any-size");
  Generator gen(test::test_seed());
  const SplitFiles split = write_split(dir, "odd", 11, {5, 3}, 7, gen);
  const Dataset data = load_idx_dataset(split.images, split.labels);
  EXPECT_EQ(data.size(), 11);
  EXPECT_EQ(data.sample_shape, (Shape{5, 3}));
  EXPECT_EQ(data.num_classes, 7) << "inferred as max label + 1";
  EXPECT_EQ(data.images.shape(), (Shape{11, 15}));
  EXPECT_EQ(data.images.dtype(), DType::kU8);
  EXPECT_EQ(data.labels.dtype(), DType::kI32);
  EXPECT_EQ(data.images.to_vector<std::uint8_t>(), split.pixels);
  EXPECT_EQ(data.labels.to_vector<std::int32_t>(), split.label_values);
  EXPECT_FALSE(test::all_zero(data.images));
}

TEST(LoadIdxDataset, DecodesBigEndianInt32Labels) {
  ScratchDir dir("dataset-i32");
  Generator gen(test::test_seed());
  // Values above 255 exercise every byte of the big-endian decoding.
  std::vector<std::int32_t> labels(9);
  for (auto& v : labels) v = static_cast<std::int32_t>(gen.below(1000));
  labels[4] = 999;
  write_idx(dir / "images", IdxType::kU8, {9, 2}, test::random_bytes(18, gen));
  write_idx(dir / "labels", IdxType::kI32, {9}, big_endian_i32(labels));
  const Dataset data = load_idx_dataset(dir / "images", dir / "labels");
  EXPECT_EQ(data.labels.to_vector<std::int32_t>(), labels);
  EXPECT_EQ(data.num_classes, 1000);
}

TEST(LoadIdxDataset, RejectsSampleCountMismatch) {
  ScratchDir dir("dataset-count");
  Generator gen(test::test_seed());
  const auto images = dir / "images", labels = dir / "labels";
  write_idx(images, IdxType::kU8, {5, 2, 2}, test::random_bytes(20, gen));
  write_idx(labels, IdxType::kU8, {4}, test::random_bytes(4, gen, 0, 10));
  EXPECT_THAT(error_message([&] { load_idx_dataset(images, labels); }),
              AllOf(HasSubstr(images.string() + " has 5 samples"), HasSubstr(labels.string() + " has 4")));
}

TEST(LoadIdxDataset, RejectsLabelOutOfRangeNamingFileIndexAndValue) {
  ScratchDir dir("dataset-range");
  Generator gen(test::test_seed());
  const auto images = dir / "images", labels = dir / "labels";
  write_idx(images, IdxType::kU8, {6, 4}, test::random_bytes(24, gen));
  write_idx(labels, IdxType::kU8, {6}, {0, 6, 2, 9, 1, 3});
  EXPECT_THAT(error_message([&] { load_idx_dataset(images, labels, 7); }),
              AllOf(HasSubstr(labels.string()), HasSubstr("label 9 at index 3"), HasSubstr("[0, 7)")));
  EXPECT_EQ(load_idx_dataset(images, labels, 10).num_classes, 10) << "an explicit count wider than the labels is kept";

  write_idx(labels, IdxType::kI32, {6}, big_endian_i32({0, -2, 1, 1, 1, 1}));
  EXPECT_THAT(error_message([&] { load_idx_dataset(images, labels); }),
              AllOf(HasSubstr(labels.string()), HasSubstr("label -2 at index 1 is negative")));
  write_idx(labels, IdxType::kI32, {6}, big_endian_i32({0, 70000, 1, 1, 1, 1}));
  EXPECT_THAT(error_message([&] { load_idx_dataset(images, labels); }),
              AllOf(HasSubstr(labels.string()), HasSubstr("largest label is 70000")));
}

TEST(LoadIdxDataset, LimitKeepsTheFirstSamples) {
  ScratchDir dir("dataset-limit");
  Generator gen(test::test_seed());
  const SplitFiles split = write_split(dir, "ten", 10, {2, 3}, 5, gen);
  // The largest class only past the limit: num_classes still comes from the whole file.
  write_idx(split.labels, IdxType::kU8, {10}, {0, 1, 2, 0, 1, 2, 0, 1, 2, 4});

  const Dataset three = load_idx_dataset(split.images, split.labels, 0, 3);
  EXPECT_EQ(three.size(), 3);
  EXPECT_EQ(three.images.shape(), (Shape{3, 6}));
  EXPECT_EQ(three.images.to_vector<std::uint8_t>(), std::vector<std::uint8_t>(split.pixels.begin(), split.pixels.begin() + 18));
  EXPECT_EQ(three.labels.to_vector<std::int32_t>(), (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(three.num_classes, 5);

  EXPECT_EQ(load_idx_dataset(split.images, split.labels, 0, 1000).size(), 10) << "a limit past the end keeps all";
  EXPECT_THAT(error_message([&] { load_idx_dataset(split.images, split.labels, 0, -1); }), HasSubstr("negative"));
}

TEST(LoadIdxDataset, RejectsFilesInTheWrongRole) {
  ScratchDir dir("dataset-roles");
  Generator gen(test::test_seed());
  const SplitFiles split = write_split(dir, "x", 4, {3, 3}, 3, gen);
  EXPECT_THAT(error_message([&] { load_idx_dataset(split.labels, split.labels); }),
              AllOf(HasSubstr(split.labels.string()), HasSubstr("is this a labels file?")));
  EXPECT_THAT(error_message([&] { load_idx_dataset(split.images, split.images); }),
              AllOf(HasSubstr(split.images.string()), HasSubstr("is this an images file?")));
  const auto floats = dir / "floats";
  write_idx(floats, IdxType::kF32, {4, 2}, test::random_bytes(32, gen));
  EXPECT_THAT(error_message([&] { load_idx_dataset(floats, split.labels); }),
              AllOf(HasSubstr(floats.string()), HasSubstr("float32"), HasSubstr("must be uint8")));
  const auto shorts = dir / "shorts";
  write_idx(shorts, IdxType::kI16, {4}, test::random_bytes(8, gen));
  EXPECT_THAT(error_message([&] { load_idx_dataset(split.images, shorts); }),
              AllOf(HasSubstr(shorts.string()), HasSubstr("int16"), HasSubstr("uint8 or int32")));
}

Dataset dataset_of_pixels(const std::vector<std::uint8_t>& pixels, std::int64_t n) {
  Dataset data;
  data.name = "pixels";
  data.images = Tensor::from_vector(pixels, {n, static_cast<std::int64_t>(pixels.size()) / n});
  data.labels = Tensor::zeros({n}, DType::kI32);
  data.num_classes = 1;
  return data;
}

TEST(Normalization, UnitAndStandardOnAKnownDataset) {
  // Half 0, half 255: mean 0.5 and std 0.5 of x/255, so standard maps 0 -> -1 and 255 -> +1.
  const Dataset data = dataset_of_pixels({0, 255, 255, 0, 0, 255, 0, 255}, 2);
  const Normalization unit = make_normalization(data, "unit");
  EXPECT_DOUBLE_EQ(unit.scale, 1.0 / 255);
  EXPECT_DOUBLE_EQ(unit.shift, 0.0);
  const Normalization standard = make_normalization(data, "standard");
  // 1e-12: a handful of double operations on exactly representable inputs.
  EXPECT_NEAR(0 * standard.scale + standard.shift, -1.0, 1e-12);
  EXPECT_NEAR(255 * standard.scale + standard.shift, 1.0, 1e-12);
}

TEST(Normalization, StandardMatchesADirectComputation) {
  Generator gen(test::test_seed());
  const auto pixels = test::random_bytes(3 * 97, gen);
  const Normalization norm = make_normalization(dataset_of_pixels(pixels, 3), "standard");
  double sum = 0.0;
  for (auto p : pixels) sum += p / 255.0;
  const double mean = sum / static_cast<double>(pixels.size());
  double squares = 0.0;
  for (auto p : pixels) squares += (p / 255.0 - mean) * (p / 255.0 - mean);
  const double stddev = std::sqrt(squares / static_cast<double>(pixels.size()));
  ASSERT_GT(stddev, 0.1) << "random pixels should spread over [0, 255]";
  // 1e-12 relative: both sides sum the same 291 terms in double, in different orders.
  EXPECT_NEAR(norm.scale, 1.0 / (255 * stddev), 1e-12 * norm.scale);
  EXPECT_NEAR(norm.shift, -mean / stddev, 1e-12);
  // The transformed pixels have zero mean and unit variance.
  double t_sum = 0.0, t_squares = 0.0;
  for (auto p : pixels) {
    const double x = p * norm.scale + norm.shift;
    t_sum += x;
    t_squares += x * x;
  }
  EXPECT_NEAR(t_sum / static_cast<double>(pixels.size()), 0.0, 1e-9);
  EXPECT_NEAR(t_squares / static_cast<double>(pixels.size()), 1.0, 1e-9);
}

// MNIST-like images, mostly runs of zero pixels (counted eight at a time) and a size that is not a
// multiple of eight: the same statistics as a direct computation.
TEST(Normalization, RunsOfZeroPixelsAreCountedExactly) {
  Generator gen(test::test_seed());
  const auto noise = test::random_bytes(3 * 101, gen);
  std::vector<std::uint8_t> pixels(noise.size());
  // Random pixels in the first 6 of every 16, zeros elsewhere (an aligned run of 8 in each 16).
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = i % 16 < 6 ? noise[i] : 0;
  std::size_t zero_words = 0;
  for (std::size_t i = 0; i + 8 <= pixels.size(); i += 8) {
    zero_words += std::all_of(pixels.begin() + i, pixels.begin() + i + 8, [](auto p) { return p == 0; });
  }
  ASSERT_GE(zero_words, 18u) << "the fast path must be taken";
  const Normalization norm = make_normalization(dataset_of_pixels(pixels, 3), "standard");
  double sum = 0.0, squares = 0.0;
  for (auto p : pixels) sum += p / 255.0;
  const double mean = sum / static_cast<double>(pixels.size());
  for (auto p : pixels) squares += (p / 255.0 - mean) * (p / 255.0 - mean);
  const double stddev = std::sqrt(squares / static_cast<double>(pixels.size()));
  // 1e-12 relative: the same 303 terms in double, in different orders; a miscounted run of zeros
  // moves the mean by at least 8/303 of a pixel's share.
  EXPECT_NEAR(norm.scale, 1.0 / (255 * stddev), 1e-12 * norm.scale);
  EXPECT_NEAR(norm.shift, -mean / stddev, 1e-12 * std::abs(norm.shift));
}

TEST(Normalization, RejectsConstantPixelsAndUnknownModes) {
  const Dataset flat = dataset_of_pixels({7, 7, 7, 7}, 2);
  EXPECT_THAT(error_message([&] { make_normalization(flat, "standard"); }),
              AllOf(HasSubstr("every training pixel is 7"), HasSubstr("divide by zero")));
  EXPECT_DOUBLE_EQ(make_normalization(flat, "unit").scale, 1.0 / 255);
  EXPECT_THAT(error_message([&] { make_normalization(flat, "zscore"); }),
              AllOf(HasSubstr("data.normalize"), HasSubstr("\"zscore\""), HasSubstr("unit, standard")));
  // No pixels, or pixels that are not bytes: named before anything reads them.
  Dataset empty;
  empty.name = "nothing";
  EXPECT_THAT(error_message([&] { make_normalization(empty, "standard"); }), HasSubstr("'nothing' has no pixels"));
  Dataset floats = flat;
  floats.images = flat.images.to(DType::kF32);
  EXPECT_THAT(error_message([&] { make_normalization(floats, "standard"); }), HasSubstr("images are fp32"));
}

}  // namespace
}  // namespace sprintnet
