// The real data sets that scripts/get-data puts in data/. MNIST is what
// training needs, so its absence is a failure (make test runs get-data first);
// Fashion-MNIST is optional and skips.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sprintnet/data/dataset.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

std::vector<std::int64_t> class_counts(const Dataset& data) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(data.num_classes));
  for (const std::int32_t label : data.labels.span<std::int32_t>()) ++counts[static_cast<std::size_t>(label)];
  return counts;
}

bool has_standard_files(const std::filesystem::path& folder) {
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                           "t10k-labels-idx1-ubyte"}) {
    if (!std::filesystem::exists(folder / name) && !std::filesystem::exists(folder / (std::string(name) + ".gz"))) {
      return false;
    }
  }
  return true;
}

TEST(RealData, MnistHasItsKnownShapeLabelsAndStatistics) {
  const auto folder = test::data_dir() / "mnist";
  ASSERT_TRUE(has_standard_files(folder)) << "MNIST is missing from " << folder.string()
                                          << ": run scripts/get-data (make test does)";
  DataConfig config;
  config.dataset = "mnist";
  config.dir = test::data_dir().string();
  const TrainTestData data = load_train_test(config);

  EXPECT_EQ(data.train.size(), 60000);
  EXPECT_EQ(data.test.size(), 10000);
  EXPECT_EQ(data.train.sample_shape, (Shape{28, 28}));
  EXPECT_EQ(data.train.images.shape(), (Shape{60000, 784}));
  EXPECT_EQ(data.test.images.shape(), (Shape{10000, 784}));
  EXPECT_EQ(data.train.num_classes, 10);
  // The published per-class counts of the two splits: every class present, nothing lost or reordered.
  EXPECT_EQ(class_counts(data.train),
            (std::vector<std::int64_t>{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949}));
  EXPECT_EQ(class_counts(data.test), (std::vector<std::int64_t>{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009}));
  EXPECT_EQ(data.train.labels.to_vector<std::int32_t>()[0], 5) << "the famous first training digit";

  // The usual MNIST constants 0.1307 / 0.3081, stated to 4 digits: hence 1e-3.
  const Normalization norm = make_normalization(data.train, "standard");
  const double stddev = 1.0 / (255.0 * norm.scale);
  const double mean = -norm.shift * stddev;
  EXPECT_NEAR(mean, 0.1307, 1e-3);
  EXPECT_NEAR(stddev, 0.3081, 1e-3);
}

TEST(RealData, FashionMnistTestSplitLoadsFromGzip) {
  const auto folder = test::data_dir() / "fashion-mnist";
  if (!has_standard_files(folder)) {
    GTEST_SKIP() << "Fashion-MNIST is not in " << folder.string()
                 << " (optional; scripts/get-data fetches it from the Debian package dataset-fashion-mnist)";
  }
  DataConfig config;
  config.dataset = "fashion-mnist";
  config.dir = test::data_dir().string();
  const DatasetFiles files = dataset_files(config);
  // Only the 10000-sample test split (gzipped, as get-data stores it): real data through zlib, quickly.
  const Dataset test_split = load_idx_dataset(files.test_images, files.test_labels);
  EXPECT_EQ(test_split.size(), 10000);
  EXPECT_EQ(test_split.sample_shape, (Shape{28, 28}));
  EXPECT_EQ(class_counts(test_split), std::vector<std::int64_t>(10, 1000)) << "Fashion-MNIST's test split is balanced";
}

}  // namespace
}  // namespace sprintnet
