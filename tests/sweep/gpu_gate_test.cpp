// The gate that keeps a sweep's later GPUs closed until the first GPU's first run says whether they
// pay for their contexts: workers of later GPUs wait, the first estimate decides, and a sweep whose
// first GPU ran out of runs releases them closed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "sprintnet/sweep/gpu_gate.h"

namespace sprintnet::sweep {
namespace {

using ::testing::HasSubstr;

TEST(GpuGate, LaterGpusWaitForTheFirstEstimateWhichDecides) {
  GpuGate gate(/*gated=*/true, /*runs_per_gpu=*/8, /*gpus=*/4);
  EXPECT_TRUE(gate.trains(0));  // the first GPU never waits
  std::atomic<int> answered{0};
  std::atomic<int> training{0};
  std::vector<std::jthread> later;
  for (int gpu = 1; gpu < 4; ++gpu) {
    later.emplace_back([&, gpu] {
      if (gate.trains(gpu)) ++training;
      ++answered;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(answered.load(), 0) << "a later GPU's worker went on before the gate decided";
  // 56 runs left at 0.4 s a wave: two GPUs (gpus_worth_opening).
  EXPECT_THAT(gate.estimate(0.4, 56), HasSubstr("2 of 4 GPUs train"));
  later.clear();  // joins
  EXPECT_EQ(answered.load(), 3);
  EXPECT_EQ(training.load(), 1);  // GPU 1 only
  EXPECT_EQ(gate.estimate(100.0, 56), "");  // decided once
  EXPECT_FALSE(gate.trains(3));
}

TEST(GpuGate, ClosingWithoutAnEstimateKeepsTheFirstGpuAlone) {
  GpuGate gate(true, 8, 2);
  std::jthread waiting([&] { EXPECT_FALSE(gate.trains(1)); });
  gate.close();
}

TEST(GpuGate, AnUngatedSweepTrainsOnEveryGpuAtOnce) {
  GpuGate gate(false, 8, 2);
  EXPECT_FALSE(gate.gated());
  EXPECT_TRUE(gate.trains(1));
  EXPECT_EQ(gate.estimate(0.01, 100), "");
}

}  // namespace
}  // namespace sprintnet::sweep
