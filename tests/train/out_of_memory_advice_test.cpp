// An out-of-memory error from a device allocator, caught where the run's config is known, names
// the config file and the keys that sized the memory with their values; other errors pass as
// they are. The device is the caching allocator's fake (tests/memory/), so this runs on the CPU.
#include "sprintnet/train/out_of_memory_advice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "memory/fake_device_memory.h"
#include "sprintnet/memory/allocator.h"
#include "sprintnet/memory/caching_allocator.h"

namespace sprintnet::train {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Values no default has, so the message can only have them from this config.
Config sized_config() {
  Config config;
  config.train.batch_size = 384;
  config.train.eval_batch_size = 2500;
  config.model.hidden = {1024, 512};
  config.device.name = "cuda:1";
  return config;
}

// The message of the OutOfMemoryError that a request the fake device cannot hold throws through
// advise_on_out_of_memory(); "" (and a test failure) when none does.
std::string advised_message(MemoryUse use) {
  test::FakeDeviceMemory device(4 * kMiB);
  CachingAllocator allocator(device);
  try {
    advise_on_out_of_memory("configs/big.toml", sized_config(), use,
                            [&] { return allocator.allocate(8 * kMiB, /*stream=*/0); });
  } catch (const OutOfMemoryError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no OutOfMemoryError came out of an 8 MiB request on a 4 MiB device";
  return {};
}

TEST(OutOfMemoryAdvice, TrainingNamesTheConfigFileAndTheKeysThatSizeMemoryKeepingTheAllocatorsMessage) {
  const std::string message = advised_message(MemoryUse::kTraining);
  EXPECT_THAT(message, AllOf(HasSubstr("out of device memory: cannot allocate 8388608 bytes"),
                             HasSubstr("fake device full")));  // the allocator's own message, first
  EXPECT_THAT(message, HasSubstr("\nconfigs/big.toml: the run ran out of device memory with train.batch_size = 384, "
                                 "train.eval_batch_size = 2500, model.hidden = [1024, 512], device.name = \"cuda:1\""));
  EXPECT_THAT(message, HasSubstr("lower train.batch_size, train.eval_batch_size or model.hidden"));
}

TEST(OutOfMemoryAdvice, ASweepRunAlsoSuggestsFewerRunsAtOnce) {
  const std::string message = advised_message(MemoryUse::kSweepRun);
  EXPECT_THAT(message, AllOf(HasSubstr("configs/big.toml: this run of the sweep"), HasSubstr("train.batch_size = 384"),
                             HasSubstr("--parallel")));
}

// A trained model's widths cannot change and its device is --device: only the batch is advised.
TEST(OutOfMemoryAdvice, InferenceNamesTheEvaluationBatchAndTheCpuNotTheTrainingKeys) {
  const std::string message = advised_message(MemoryUse::kInference);
  EXPECT_THAT(message, AllOf(HasSubstr("train.eval_batch_size = 2500, model.hidden = [1024, 512]"),
                             HasSubstr("--device cpu"), Not(HasSubstr("train.batch_size")),
                             Not(HasSubstr("device.name"))));
}

// The host allocator's failure is an OutOfMemoryError too (a model too wide for the machine, on the CPU):
// the advice names the same keys, says host memory, and suggests no GPU.
TEST(OutOfMemoryAdvice, HostMemoryIsNamedAsSuchWithTheSameKeys) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer aborts on an allocation this large instead of returning null";
#else
  const Config config = sized_config();
  try {
    advise_on_out_of_memory("configs/wide.toml", config, MemoryUse::kTraining,
                            [] { return cpu_allocator().allocate(std::size_t{1} << 62); });
    FAIL() << "a 4 EiB host allocation succeeded";
  } catch (const OutOfMemoryError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("out of host memory allocating 4611686018427387904 bytes"),
                                HasSubstr("\nconfigs/wide.toml: the run ran out of host memory with train.batch_size = "
                                          "384, train.eval_batch_size = 2500, model.hidden = [1024, 512]"),
                                Not(HasSubstr("a GPU"))));
  }
#endif
}

TEST(OutOfMemoryAdvice, OtherErrorsAndResultsPassUnchanged) {
  const Config config = sized_config();
  EXPECT_EQ(advise_on_out_of_memory("c.toml", config, MemoryUse::kTraining, [] { return 42; }), 42);
  try {
    advise_on_out_of_memory("c.toml", config, MemoryUse::kTraining,
                            []() -> int { throw Error("data.dir: no such folder"); });
    FAIL() << "the error was swallowed";
  } catch (const OutOfMemoryError&) {
    FAIL() << "an error that is not about memory became an out-of-memory error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "data.dir: no such folder");
  }
}

}  // namespace
}  // namespace sprintnet::train
