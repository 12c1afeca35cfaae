// Turns for a shared GPU's SMs (train/sm_turns.h): capacity, first come first served, release.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "sprintnet/core/error.h"
#include "sprintnet/train/sm_turns.h"

namespace sprintnet::train {
namespace {

using namespace std::chrono_literals;

void wait_until_waiting(SmTurns& turns, int callers) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (turns.waiting(0) < callers && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(turns.waiting(0), callers);
}

TEST(SmTurns, HoldsAtMostTheGpusSmsAtOnce) {
  SmTurns turns;
  std::atomic<int> held{0}, most{0};
  std::vector<std::jthread> runs;
  for (int r = 0; r < 12; ++r) {
    runs.emplace_back([&] {
      SmTurns::Turn turn = turns.take(0, 32, 132);  // four at a time
      const int now = held.fetch_add(32) + 32;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      // Hold the turn until four are held at once (or long enough that they would have been, even on
      // a loaded machine: the loop ends as soon as they are).
      const auto deadline = std::chrono::steady_clock::now() + 60s;
      while (most.load() < 128 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
      held.fetch_sub(32);
    });
  }
  runs.clear();
  EXPECT_LE(most.load(), 128);
  EXPECT_EQ(most.load(), 128) << "four turns of 32 SMs fit 132 and should have run together";
}

TEST(SmTurns, ServesInArrivalOrderSoALargeRequestIsNotOvertaken) {
  SmTurns turns;
  SmTurns::Turn first = turns.take(0, 100, 132);
  std::mutex m;
  std::vector<int> order;
  std::jthread large([&] {
    SmTurns::Turn t = turns.take(0, 120, 132);  // must wait for `first`
    const std::lock_guard lock(m);
    order.push_back(120);
  });
  wait_until_waiting(turns, 1);  // the large request queues first
  std::jthread small([&] {
    SmTurns::Turn t = turns.take(0, 16, 132);  // would fit beside `first`, but arrived later
    const std::lock_guard lock(m);
    order.push_back(16);
  });
  wait_until_waiting(turns, 2);
  std::this_thread::sleep_for(10ms);
  {
    const std::lock_guard lock(m);
    EXPECT_TRUE(order.empty()) << "nothing may pass the queued 120-SM request while 100 SMs are held";
  }
  first.release();
  large.join();
  small.join();
  ASSERT_EQ(order.size(), 2U);
  EXPECT_EQ(order[0], 120);
  EXPECT_EQ(order[1], 16);
}

TEST(SmTurns, EveryCallerForOneGpuCountsInTheSameUnits) {
  SmTurns turns;
  SmTurns::Turn t = turns.take(0, 32, 132);
  EXPECT_THROW(turns.take(0, 32, 1 << 20), Error);
}

TEST(SmTurns, ARequestLargerThanTheGpuTakesTheWholeGpuAndGpusAreIndependent) {
  SmTurns turns;
  SmTurns::Turn whole = turns.take(0, 500, 132);
  EXPECT_TRUE(whole.held());
  SmTurns::Turn other_gpu = turns.take(1, 132, 132);  // GPU 1 is free
  EXPECT_TRUE(other_gpu.held());
  std::atomic<bool> got{false};
  std::jthread waiter([&] {
    SmTurns::Turn t = turns.take(0, 1, 132);
    got = true;
  });
  wait_until_waiting(turns, 1);
  EXPECT_FALSE(got.load());
  SmTurns::Turn moved = std::move(whole);  // moving keeps the turn
  EXPECT_FALSE(whole.held());
  std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(got.load());
  moved.release();
  waiter.join();
  EXPECT_TRUE(got.load());
}

}  // namespace
}  // namespace sprintnet::train
