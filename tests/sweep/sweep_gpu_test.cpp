// Runs that share a GPU (one stream each, from the sweep's worker threads) train exactly what they
// train alone: the compiled step and the fused engine are deterministic, so the metrics and weights
// are equal bit for bit.
#include <gtest/gtest.h>

#include <fstream>

#include "sprintnet/sweep/grid.h"
#include "sprintnet/sweep/summary.h"
#include "sprintnet/sweep/sweep_runner.h"
#include "sprintnet/train/fused_fit.h"
#include "same_runs.h"
#include "support/gpu.h"
#include "support/test_util.h"

namespace sprintnet::sweep {
namespace {

using train::gpu_runs_split_kernel;

// How many of the sweep's runs in `dir` waited for a turn for the GPU's SMs (train/sm_turns.h): the
// phase is in a run's phases.json whenever it took one, however short the wait.
int runs_that_took_turns(const std::filesystem::path& dir) {
  int turns = 0;
  for (const RunResult& r : read_state(dir)) {
    turns += test::file_bytes(dir / r.name / "phases.json").find("waiting for a turn on the GPU") != std::string::npos;
  }
  return turns;
}

// 12 runs of a small model, 6 at a time against one at a time, on one GPU.
void check_engine(const std::filesystem::path& dir, const std::string& engine, const std::string& hidden = "[128, 64]") {
  const std::filesystem::path config = dir / "sweep.toml";
  std::ofstream(config) << fmt::format(
      "[data]\ndir = \"{}\"\ntrain_limit = 10000\ntest_limit = 2000\n[model]\nhidden = {}\n[train]\n"
      "epochs = 2\ndrop_last = false\n[device]\nname = \"cuda:0\"\nengine = \"{}\"\n",
      test::data_dir().string(), hidden, engine);
  SweepOptions o;
  o.config_path = config;
  o.spec.axes = {{"optim.lr", {"0.05", "0.1", "0.2"}}, {"model.activation", {"\"relu\"", "\"gelu\""}}};
  o.spec.seeds = {0, 1};
  expect_side_by_side_equals_alone(o, dir, 6, "6 runs at a time over 1 GPU");
  for (const RunResult& r : read_state(dir / "alone")) {
    EXPECT_GT(r.final_accuracy, 0.8) << r.name;  // 2 epochs of 10000 samples: 0.85-0.95
  }
}

TEST(SweepOnAGpu, CompiledRunsSharingTheGpuEqualTheRunsAloneBitForBit) {
  SN_REQUIRE_GPU();
  const std::filesystem::path dir = test::temp_dir("sweep-gpu-compiled");
  check_engine(dir, "compiled");
  EXPECT_EQ(runs_that_took_turns(dir / "together"), 0) << "the compiled step's kernels come and go: no turns";
}

// auto: on Hopper the ReLU runs take the fused engine's rows kernel (16 SMs a run, one launch an
// epoch, deterministic) and the GELU runs the compiled step, side by side.
TEST(SweepOnAGpu, AutoRunsSharingTheGpuEqualTheRunsAloneBitForBit) {
  SN_REQUIRE_GPU();
  check_engine(test::temp_dir("sweep-gpu-auto"), "auto");
}

// The default model's width: on Hopper the ReLU runs take the quads kernel (one 16-block cluster a run),
// the GELU runs the split kernel's 256-wide shape (32 SMs a run); side by side as alone.
TEST(SweepOnAGpu, AutoRunsOfTheDefaultWidthSharingTheGpuEqualTheRunsAloneBitForBit) {
  SN_REQUIRE_GPU();
  const std::filesystem::path dir = test::temp_dir("sweep-gpu-auto-256");
  check_engine(dir, "auto", "[256, 256]");
  if (gpu_runs_split_kernel(0, 256, 2)) {
    // Each split-kernel run holds its 32 SMs from its first epoch to its last evaluation, in turns.
    EXPECT_EQ(runs_that_took_turns(dir / "together"), 12);
    EXPECT_EQ(runs_that_took_turns(dir / "alone"), 0) << "a run alone on its GPU takes no turn";
  }
}

TEST(SweepOnAGpu, EagerRunsSharingTheGpuEqualTheRunsAloneBitForBit) {
  SN_REQUIRE_GPU();
  check_engine(test::temp_dir("sweep-gpu-eager"), "eager");
}

}  // namespace
}  // namespace sprintnet::sweep
