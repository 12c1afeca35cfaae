// on_device() on the CPU: the data set's own tensors, no copy.
#include "sprintnet/data/dataset_cache.h"

#include <gtest/gtest.h>

#include "data/dataset_cache_test_data.h"

namespace sprintnet {
namespace {

TEST(OnDevice, OnTheCpuIsTheDataSetItself) {
  Generator gen(test::test_seed());
  const LoadedData loaded = test::random_loaded_data(gen);
  const TrainTestData on_cpu = on_device(loaded, Device::cpu());
  EXPECT_EQ(on_cpu.train.images.raw_data(), loaded.data.train.images.raw_data());
  EXPECT_EQ(on_cpu.train.labels.raw_data(), loaded.data.train.labels.raw_data());
  EXPECT_EQ(on_cpu.test.images.raw_data(), loaded.data.test.images.raw_data());
  EXPECT_EQ(on_cpu.test.labels.raw_data(), loaded.data.test.labels.raw_data());
  EXPECT_TRUE(loaded.device_copies->by_device.empty()) << "no copy is kept for the CPU";
}

}  // namespace
}  // namespace sprintnet
