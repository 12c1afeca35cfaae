// on_device() on a GPU: one copy a device for every copy of a LoadedData, made once even when runs
// ask for it at the same time (a sweep's workers), holding the data set's bytes.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "data/dataset_cache_test_data.h"
#include "sprintnet/data/dataset_cache.h"
#include "support/gpu.h"

namespace sprintnet {
namespace {

void expect_same_bytes(const Tensor& on_gpu, const Tensor& host, const char* what) {
  ASSERT_TRUE(on_gpu.device().is_cuda()) << what;
  const Tensor back = on_gpu.to(Device::cpu());
  ASSERT_EQ(back.nbytes(), host.nbytes()) << what;
  const auto* a = static_cast<const unsigned char*>(back.raw_data());
  const auto* b = static_cast<const unsigned char*>(host.raw_data());
  for (std::size_t i = 0; i < host.nbytes(); ++i) ASSERT_EQ(a[i], b[i]) << what << ", byte " << i;
}

TEST(OnDeviceGpu, CopiesTheDataSetOnceForEveryCopyOfIt) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  const LoadedData loaded = test::random_loaded_data(gen);
  const TrainTestData first = on_device(loaded, Device::cuda(0));
  expect_same_bytes(first.train.images, loaded.data.train.images, "train images");
  expect_same_bytes(first.train.labels, loaded.data.train.labels, "train labels");
  expect_same_bytes(first.test.images, loaded.data.test.images, "test images");
  expect_same_bytes(first.test.labels, loaded.data.test.labels, "test labels");
  EXPECT_EQ(first.train.num_classes, loaded.data.train.num_classes);
  EXPECT_EQ(first.train.sample_shape, loaded.data.train.sample_shape);

  const LoadedData copy = loaded;  // another run's copy from the cache
  const TrainTestData again = on_device(copy, Device::cuda(0));
  EXPECT_EQ(again.train.images.raw_data(), first.train.images.raw_data()) << "a second copy was made";
  EXPECT_EQ(again.test.labels.raw_data(), first.test.labels.raw_data());

  const LoadedData other = test::random_loaded_data(gen);  // another data set: its own copy, its own bytes
  const TrainTestData other_on_gpu = on_device(other, Device::cuda(0));
  EXPECT_NE(other_on_gpu.train.images.raw_data(), first.train.images.raw_data());
  expect_same_bytes(other_on_gpu.train.images, other.data.train.images, "the other data set's train images");
}

TEST(OnDeviceGpu, RunsAskingAtOnceShareOneCopy) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 1);
  const LoadedData loaded = test::random_loaded_data(gen);
  std::vector<const void*> seen(8, nullptr);
  {
    std::vector<std::jthread> runs;
    for (std::size_t i = 0; i < seen.size(); ++i) {
      runs.emplace_back([&, i] { seen[i] = on_device(loaded, Device::cuda(0)).train.images.raw_data(); });
    }
  }
  for (const void* p : seen) EXPECT_EQ(p, seen.front());
  EXPECT_EQ(loaded.device_copies->by_device.size(), 1u);
  expect_same_bytes(on_device(loaded, Device::cuda(0)).train.images, loaded.data.train.images, "train images");
}

}  // namespace
}  // namespace sprintnet
