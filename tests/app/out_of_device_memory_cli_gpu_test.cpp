// `sprintnet eval` and `sprintnet predict` with a model too big for the GPU: the out-of-memory advice
// names the run's config and the keys that sized the memory. Its own executable, labelled gpu and run
// serially: it drives the device out of memory on purpose, which can starve a GPU test run beside it
// (as memory_gpu_test's did: tests/memory/CMakeLists.txt).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "cli_run.h"
#include "sprintnet/train/trainer.h"
#include "support/gpu.h"
#include "support/test_util.h"
#include "support/tiny_run.h"

namespace sprintnet::train {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The advice comes while the model loads, before any batch: model.hidden = [1e11] asks 313 TB for its
// first weight, more than any GPU has. The model on disk is a tiny one trained on the CPU (a second).
TEST(EvalPredictCli, OutOfDeviceMemoryWhileLoadingNamesTheConfigAndItsKeys) {
  SN_REQUIRE_GPU();
  const fs::path dir = test::temp_dir("eval-predict-out-of-memory");
  const fs::path run = Trainer(test::tiny_run_config(dir, 100)).fit().run_dir;
  const fs::path pgm = dir / "flat.pgm";
  std::ofstream(pgm) << "P2 2 2 1\n0 1\n1 0\n";
  const std::string too_big = "--device cuda --set 'model.hidden=[100000000000]'";
  for (const std::string& command : {fmt::format("eval '{}' {}", run.string(), too_big),
                                     fmt::format("predict '{}' '{}' {}", run.string(), pgm.string(), too_big)}) {
    const test::CliResult result = test::run_cli(command, dir);
    EXPECT_EQ(result.exit_code, 1) << command;
    EXPECT_THAT(result.err, AllOf(HasSubstr("out of device memory"),
                                  HasSubstr("config.toml: the model ran out of device memory with "
                                            "train.eval_batch_size = "),
                                  HasSubstr("model.hidden = [100000000000]"),
                                  HasSubstr("--device cpu")))
        << command;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sprintnet::train
