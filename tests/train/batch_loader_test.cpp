#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include "sprintnet/train/batch_loader.h"
#include "support/error_message.h"
#include "support/test_util.h"

namespace sprintnet::train {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A tiny dataset whose pixel values encode the sample index, so a batch shows which samples it holds.
Dataset indexed_dataset(std::int64_t n, std::int64_t features) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(n * features));
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t f = 0; f < features; ++f) pixels[static_cast<std::size_t>(i * features + f)] = static_cast<std::uint8_t>(i);
    labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % 3);
  }
  Dataset d;
  d.name = "indexed";
  d.images = Tensor::from_vector(pixels, {n, features});
  d.labels = Tensor::from_vector(labels, {n});
  d.sample_shape = {features};
  d.num_classes = 3;
  return d;
}

// A data set whose shapes disagree is named before anything reads it (10 images with 5 labels once trained on 5).
TEST(BatchLoader, RefusesImagesAndLabelsThatDoNotPair) {
  const Normalization norm{1.0, 0.0};
  const LoaderOptions options{4, false, false, 0};
  Dataset fewer_labels = indexed_dataset(10, 3);
  fewer_labels.labels = fewer_labels.labels.slice_rows(0, 5).clone();
  EXPECT_THROW(BatchLoader(fewer_labels, norm, options, Device::cpu()), Error);
  EXPECT_THROW(BatchLoader(Dataset{}, norm, options, Device::cpu()), Error);
  Dataset flat = indexed_dataset(10, 3);
  flat.images = flat.images.view({30});
  EXPECT_THROW(BatchLoader(flat, norm, options, Device::cpu()), Error);
}

TEST(BatchLoader, EveryEpochVisitsEachSampleOnceInANewOrder) {
  const Dataset data = indexed_dataset(100, 4);
  BatchLoader loader(data, Normalization{1.0, 0.0}, {.batch_size = 10, .shuffle = true, .drop_last = true, .seed = 3},
                     Device::cpu());
  ASSERT_EQ(loader.batches_per_epoch(), 10);
  std::vector<std::vector<int>> orders;
  for (int epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    std::vector<int> seen;
    for (std::int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
      const Batch batch = loader.batch(b);
      const auto x = batch.inputs.to_vector<float>();
      const auto y = batch.labels.to_vector<std::int32_t>();
      for (std::int64_t r = 0; r < 10; ++r) {
        const int sample = static_cast<int>(x[static_cast<std::size_t>(r * 4)]);
        EXPECT_EQ(y[static_cast<std::size_t>(r)], sample % 3);  // labels travel with their images
        seen.push_back(sample);
      }
    }
    orders.push_back(seen);
    std::sort(seen.begin(), seen.end());
    for (int i = 0; i < 100; ++i) ASSERT_EQ(seen[static_cast<std::size_t>(i)], i);
  }
  EXPECT_NE(orders[0], orders[1]);
}

TEST(BatchLoader, DropLastAndPartialBatches) {
  const Dataset data = indexed_dataset(25, 2);
  BatchLoader keep(data, Normalization{}, {.batch_size = 10, .shuffle = false, .drop_last = false}, Device::cpu());
  EXPECT_EQ(keep.batches_per_epoch(), 3);
  EXPECT_EQ(keep.batch(2).inputs.size(0), 5);
  EXPECT_EQ(keep.samples_per_epoch(), 25);
  BatchLoader drop(data, Normalization{}, {.batch_size = 10, .shuffle = false, .drop_last = true}, Device::cpu());
  EXPECT_EQ(drop.batches_per_epoch(), 2);
  EXPECT_EQ(drop.samples_per_epoch(), 20);
  EXPECT_THROW(drop.batch(2), Error);
  // A batch larger than the data set (drop_last off) is the whole set, with buffers of its size: a
  // batch_size near 2^63 must not allocate for that many rows.
  for (const std::int64_t huge : {std::int64_t{26}, std::numeric_limits<std::int64_t>::max()}) {
    BatchLoader all(data, Normalization{}, {.batch_size = huge, .shuffle = false, .drop_last = false}, Device::cpu());
    ASSERT_EQ(all.batches_per_epoch(), 1);
    EXPECT_EQ(all.batch(0).inputs.size(0), 25);
  }
}

// Too few samples for one batch under drop_last: the error names the keys that fix it and counts in words
// ("1 sample"); it named none and said "1 samples".
TEST(BatchLoader, TooFewSamplesForABatchNamesTheKeysThatFixIt) {
  const LoaderOptions options{.batch_size = 128, .shuffle = true, .drop_last = true, .seed = 1};
  Dataset one = indexed_dataset(1, 2);
  one.name = "mnist/train";
  EXPECT_THAT(test::error_message([&] { BatchLoader(one, Normalization{}, options, Device::cpu()); }),
              AllOf(HasSubstr("dataset 'mnist/train' has 1 sample, fewer than one batch of 128 (train.batch_size)"),
                    HasSubstr("train.batch_size to at most 1"), HasSubstr("train.drop_last = false"),
                    HasSubstr("data.train_limit")));
  EXPECT_THAT(test::error_message([&] { BatchLoader(indexed_dataset(5, 2), Normalization{}, options, Device::cpu()); }),
              AllOf(HasSubstr("has 5 samples,"), HasSubstr("at most 5")));
}

// Evaluation's batches: every sample once, in order, the last batch partial, whatever shuffle and drop_last say,
// and the epoch's own order untouched (a training loader evaluated mid-epoch goes on with its epoch).
TEST(BatchLoader, BatchesInOrderVisitEverySampleAndLeaveTheEpochAlone) {
  const Dataset data = indexed_dataset(25, 2);
  const LoaderOptions options{.batch_size = 10, .shuffle = true, .drop_last = true, .seed = 5};
  BatchLoader loader(data, Normalization{1.0, 0.0}, options, Device::cpu());
  BatchLoader untouched(data, Normalization{1.0, 0.0}, options, Device::cpu());
  loader.start_epoch(3);
  untouched.start_epoch(3);
  ASSERT_EQ(loader.batches_in_order(), 3);
  std::vector<float> seen;
  for (std::int64_t b = 0; b < loader.batches_in_order(); ++b) {
    const auto x = loader.batch_in_order(b).inputs.to_vector<float>();
    for (std::size_t r = 0; r < x.size(); r += 2) seen.push_back(x[r]);
  }
  std::vector<float> all(25);
  std::iota(all.begin(), all.end(), 0.0F);
  EXPECT_EQ(seen, all);
  EXPECT_THROW(loader.batch_in_order(3), Error);
  EXPECT_EQ(loader.batch(1).inputs.to_vector<float>(), untouched.batch(1).inputs.to_vector<float>());
  BatchLoader huge(data, Normalization{}, {.batch_size = std::numeric_limits<std::int64_t>::max(), .drop_last = false},
                   Device::cpu());
  EXPECT_EQ(huge.batches_in_order(), 1);
}

TEST(BatchLoader, NormalisesWithScaleAndShift) {
  const Dataset data = indexed_dataset(4, 1);
  BatchLoader loader(data, Normalization{0.5, -1.0}, {.batch_size = 4, .shuffle = false}, Device::cpu());
  EXPECT_EQ(loader.batch(0).inputs.to_vector<float>(), (std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f}));
}

}  // namespace
}  // namespace sprintnet::train
