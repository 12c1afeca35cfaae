// How a sweep spreads its runs: over every GPU or the one named, several per GPU by the model's
// size, on the CPU one run a core unless asked, with the cores shared out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sprintnet/sweep/worker_plan.h"
#include "support/error_message.h"

namespace sprintnet::sweep {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Config with(const std::vector<std::string>& overrides) { return config_from_overrides(overrides); }

TEST(WorkerPlan, TheDefaultModelFillsEveryGpuWithSeveralRuns) {
  const Config c = with({"device.name=\"auto\""});
  EXPECT_EQ(auto_runs_per_gpu(c), 8);
  const WorkerPlan two_gpus = plan_workers(c, 64, 0, 2, 16);
  ASSERT_EQ(two_gpus.devices.size(), 16u);
  EXPECT_EQ(two_gpus.devices[0], "cuda:0");
  EXPECT_EQ(two_gpus.devices[1], "cuda:1");  // round robin: the first runs start on different GPUs
  EXPECT_EQ(plan_workers(c, 3, 0, 2, 16).devices.size(), 3u);  // never more workers than runs
  EXPECT_THAT(plan_workers(with({"device.name=\"cuda\""}), 64, 0, 4, 16).devices.size(), 32u);
}

TEST(WorkerPlan, ANamedGpuKeepsItsRunsAndAnExplicitCountIsSpreadOverTheGpus) {
  EXPECT_THAT(plan_workers(with({"device.name=\"cuda:1\""}), 4, 2, 2, 16).devices, ElementsAre("cuda:1", "cuda:1"));
  EXPECT_THAT(plan_workers(with({}), 8, 3, 2, 16).devices, ElementsAre("cuda:0", "cuda:1", "cuda:0"));
  EXPECT_THAT(test::error_message([] { plan_workers(with({"device.name=\"cuda:2\""}), 4, 0, 2, 16); }),
              HasSubstr("only 2 CUDA device(s)"));
  EXPECT_THAT(test::error_message([] { plan_workers(with({}), 4, -1, 1, 16); }), HasSubstr("--parallel -1"));
}

TEST(WorkerPlan, AModelThatFillsTheGpuAloneRunsAloneOnIt) {
  const Config wide = with({"model.hidden=[4096, 4096, 4096, 4096]"});
  EXPECT_EQ(auto_runs_per_gpu(wide), 1);
  EXPECT_EQ(plan_workers(wide, 16, 0, 4, 16).devices.size(), 4u);
  EXPECT_GT(auto_runs_per_gpu(with({"model.hidden=[2048, 2048]"})), 1);
}

TEST(WorkerPlan, TheCpuRunsOneACoreOrAsAsked) {
  // Auto: one run a core (the step does the most work per core on one thread).
  const WorkerPlan sixteen = plan_workers(with({"device.name=\"cpu\""}), 16, 0, 2, 16);
  EXPECT_EQ(sixteen.devices.size(), 16u);
  EXPECT_EQ(sixteen.cpu_threads, 1);
  EXPECT_THAT(sixteen.reason, HasSubstr("16 runs at a time on the CPU, 1 thread each (auto"));
  EXPECT_EQ(plan_workers(with({"device.name=\"cpu\""}), 3, 0, 0, 16).cpu_threads, 5);  // 3 runs: 16 cores shared
  const WorkerPlan two = plan_workers(with({"device.name=\"cpu\""}), 8, 0, 0, 2);
  EXPECT_THAT(two.devices, ElementsAre("cpu", "cpu"));
  EXPECT_EQ(two.cpu_threads, 1);
  // One run: all the cores (the config's threads).
  const WorkerPlan one = plan_workers(with({"device.name=\"cpu\""}), 1, 0, 0, 16);
  EXPECT_THAT(one.devices, ElementsAre("cpu"));
  EXPECT_EQ(one.cpu_threads, 0);
  // The config's device.threads decides how many fit.
  EXPECT_EQ(plan_workers(with({"device.name=\"cpu\"", "device.threads=4"}), 8, 0, 0, 16).devices.size(), 4u);
  // --parallel N: N runs, the cores shared out.
  const WorkerPlan four = plan_workers(with({"device.name=\"auto\""}), 8, 4, 0, 16);  // auto without a GPU: CPU
  EXPECT_EQ(four.devices.size(), 4u);
  EXPECT_EQ(four.cpu_threads, 4);
  EXPECT_EQ(plan_workers(with({"device.name=\"cpu\"", "device.threads=2"}), 8, 4, 0, 16).cpu_threads, 0);
  EXPECT_EQ(plan_workers(with({"device.name=\"cpu\""}), 8, 1, 0, 16).devices.size(), 1u);
}

TEST(WorkerPlan, TheCpuRunsAtOnceFitInTheMemoryAvailable) {
  // 784-8192-8192-8192-10 with SGD momentum: 141 M parameters x 12 bytes (weights, gradients,
  // momentum) = 1.69 GB, and the activations of a 128-row and a 1000-row batch (0.57 GB): ~2.3 GB a
  // run. With 8 GiB available, 75 % of it holds 2 runs, not 16; with 16 GiB, 5.
  const Config wide = with({"device.name=\"cpu\"", "model.hidden=[8192, 8192, 8192]"});
  const std::int64_t run = cpu_run_bytes(wide);
  EXPECT_GT(run, std::int64_t{2200} << 20);
  EXPECT_LT(run, std::int64_t{2300} << 20);
  EXPECT_EQ(plan_workers(wide, 16, 0, 0, 16, std::int64_t{8} << 30).devices.size(), 2u);
  EXPECT_EQ(plan_workers(wide, 16, 0, 0, 16, std::int64_t{16} << 30).devices.size(), 5u);
  EXPECT_EQ(plan_workers(wide, 16, 0, 0, 16, std::int64_t{1} << 30).devices.size(), 1u);  // never fewer than one
  // The default model is small: the cores decide. Asked for, --parallel is not capped.
  EXPECT_EQ(plan_workers(with({"device.name=\"cpu\""}), 16, 0, 0, 16, std::int64_t{8} << 30).devices.size(), 16u);
  EXPECT_EQ(plan_workers(wide, 16, 8, 0, 16, std::int64_t{8} << 30).devices.size(), 8u);
  // Adam keeps two states, bf16 a copy: more bytes a run.
  EXPECT_GT(cpu_run_bytes(with({"model.hidden=[8192, 8192, 8192]", "optim.type=\"adam\""})), run);
}

}  // namespace
}  // namespace sprintnet::sweep
