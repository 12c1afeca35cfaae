// Where a run's time goes (train/run_phases.h) and writes beside training (train/background_writer.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <new>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "sprintnet/core/error.h"
#include "sprintnet/train/background_writer.h"
#include "sprintnet/train/run_phases.h"

namespace sprintnet::train {
namespace {

TEST(RunPhases, SumsRepeatedPhasesInFirstUseOrderAndLeavesOverlappedOnesOut) {
  RunPhases phases;
  phases.add("training", 1.0);
  phases.add("evaluation", 0.25);
  phases.add("training", 2.0);
  phases.add("data", 5.0, /*overlapped=*/true);
  phases.add_first("process start", 0.5, 0.75);
  ASSERT_EQ(phases.phases().size(), 4U);
  EXPECT_EQ(phases.phases()[0].name, "process start");
  EXPECT_EQ(phases.phases()[1].name, "training");
  EXPECT_DOUBLE_EQ(phases.phases()[1].seconds, 3.0);
  EXPECT_DOUBLE_EQ(phases.serial_seconds(), 3.75);

  const nlohmann::json json = nlohmann::json::parse(phases.to_json(4.0));
  EXPECT_DOUBLE_EQ(json["wall_s"].get<double>(), 4.0);
  ASSERT_EQ(json["phases"].size(), 4U);
  EXPECT_EQ(json["phases"][3]["name"], "data");
  EXPECT_TRUE(json["phases"][3]["overlapped"].get<bool>());
  EXPECT_FALSE(json["phases"][1]["overlapped"].get<bool>());

  EXPECT_DOUBLE_EQ(phases.phases()[0].first_start_s, 0.25);  // the phase ends where it was said to
  EXPECT_DOUBLE_EQ(phases.phases()[0].last_end_s, 0.75);

  const std::string table = phases.format(4.0);
  EXPECT_NE(table.find("overlapped"), std::string::npos) << table;
  EXPECT_NE(table.find("0.250 s"), std::string::npos) << table;  // other = 4 - 3.75
}

TEST(RunPhases, RecordsWhenEachPhaseFirstBeganAndLastEndedOnTheProcessClock) {
  RunPhases phases;
  const double before = process_clock_s();
  { const ScopedPhase phase(phases, "plan"); std::this_thread::sleep_for(std::chrono::milliseconds(5)); }
  { const ScopedPhase phase(phases, "training"); std::this_thread::sleep_for(std::chrono::milliseconds(5)); }
  { const ScopedPhase phase(phases, "evaluation"); }
  { const ScopedPhase phase(phases, "training"); std::this_thread::sleep_for(std::chrono::milliseconds(5)); }
  const double after = process_clock_s();
  const Phase& plan = phases.phases()[0];
  const Phase& training = phases.phases()[1];
  const Phase& evaluation = phases.phases()[2];
  EXPECT_GE(plan.first_start_s, before);
  EXPECT_GE(plan.last_end_s - plan.first_start_s, 0.004);
  EXPECT_GE(training.first_start_s, plan.last_end_s - 1e-6);  // one after the other
  EXPECT_GE(evaluation.first_start_s, training.first_start_s);
  EXPECT_GE(training.last_end_s, evaluation.last_end_s + 0.004);  // the second training extends the first's end
  EXPECT_LE(training.last_end_s, after);
  EXPECT_GE(training.last_end_s - training.first_start_s, training.seconds - 1e-6);

  const nlohmann::json json = nlohmann::json::parse(phases.to_json(1.0));
  EXPECT_NEAR(json["phases"][1]["start_s"].get<double>(), training.first_start_s, 1e-5);
  EXPECT_NEAR(json["phases"][1]["end_s"].get<double>(), training.last_end_s, 1e-5);
}

TEST(RunPhases, AnotherThreadsPhaseKeepsItsOwnStartAndEnd) {
  RunPhases phases;
  phases.add_span("data", 0.10, 0.35, /*overlapped=*/true);
  ASSERT_EQ(phases.phases().size(), 1U);
  const Phase& data = phases.phases()[0];
  EXPECT_NEAR(data.seconds, 0.25, 1e-12);
  EXPECT_DOUBLE_EQ(data.first_start_s, 0.10);
  EXPECT_DOUBLE_EQ(data.last_end_s, 0.35);
  EXPECT_TRUE(data.overlapped);
  EXPECT_NEAR(process_clock_at(std::chrono::steady_clock::now()), process_clock_s(), 0.01);
}

TEST(RunPhases, ProcessAgeIsPositiveAndSmall) {
  const double age = process_age_s();
  EXPECT_GE(age, 0.0);
  EXPECT_LT(age, 3600.0);
}

TEST(BackgroundWriter, RunsJobsInOrderOneAtATime) {
  BackgroundWriter writer;
  std::atomic<int> running{0}, order{0};
  int first = -1, second = -1;
  writer.submit([&] {
    EXPECT_EQ(running.fetch_add(1), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    first = order.fetch_add(1);
    running.fetch_sub(1);
  });
  writer.submit([&] {
    EXPECT_EQ(running.fetch_add(1), 0);
    second = order.fetch_add(1);
    running.fetch_sub(1);
  });
  writer.wait();
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
}

TEST(BackgroundWriter, RethrowsAJobsErrorOnWaitAndOnTheNextSubmit) {
  BackgroundWriter writer;
  writer.submit([] { throw std::runtime_error("disk full"); });
  EXPECT_THROW(writer.wait(), std::runtime_error);
  writer.wait();  // reported once
  writer.submit([] { throw std::runtime_error("disk full"); });
  EXPECT_THROW(writer.submit([] {}), std::runtime_error);
}

// Out of host memory in a write (the Trainer's checkpoint snapshot is copied and serialised there): an error that
// names what was being written (the Trainer's words add what is left to resume from), not an anonymous bad_alloc.
TEST(BackgroundWriter, OutOfHostMemoryNamesTheWrite) {
  BackgroundWriter writer;
  writer.submit([] { throw std::bad_alloc(); }, "epoch 3's checkpoint in runs/x");
  EXPECT_THAT([&] { writer.wait(); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("out of host memory writing epoch 3's checkpoint in runs/x")));
}

}  // namespace
}  // namespace sprintnet::train
