// The rows kernel's timeline profile read back (train/stage_timeline.h): offsets against the previous step's last
// arrival, who is last, and the clock buffers it refuses.
#include "sprintnet/train/stage_timeline.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace sprintnet::train {
namespace {

// Blocks' regions of `region` stamps: [start, gather, then steps x 2 stamps]; block b's stamp k of step s
// at 1000 * (10 s + k + 1) + late[b][k] nanoseconds.
std::vector<std::int64_t> clock_of(int blocks, std::int64_t region, int steps, const std::vector<std::vector<int>>& late) {
  std::vector<std::int64_t> clock(static_cast<std::size_t>(blocks * region), 0);
  for (int b = 0; b < blocks; ++b) {
    clock[b * region] = 1;
    clock[b * region + 1] = 2;
    for (int s = 0; s < steps; ++s) {
      for (int k = 0; k < 2; ++k) clock[b * region + 2 + 2 * s + k] = 1000 * (10 * s + k + 1) + late[b][k];
    }
  }
  return clock;
}

TEST(StageTimeline, OffsetsAreFromThePreviousStepsLastArrival) {
  // Block 1 arrives 300 ns after block 0 every step; block 0 ends its first stage 200 ns after block 1.
  const std::vector<std::vector<int>> late = {{200, 0}, {0, 300}};
  const StageTimeline t = read_stage_timeline(clock_of(2, 16, 4, late), 2, 16, 4);
  EXPECT_EQ(t.stamps_per_step, 2);
  EXPECT_EQ(t.steps, 3);
  // Step s's last arrival: block 1's stamp 1 of step s - 1, at 1000 (10 (s - 1) + 2) + 300.
  EXPECT_NEAR(t.offset[0][0], (10000 + 1000 + 200 - 2000 - 300) * 1e-3, 1e-9);
  EXPECT_NEAR(t.offset[1][0], (10000 + 1000 - 2000 - 300) * 1e-3, 1e-9);
  EXPECT_NEAR(t.offset[0][1], (10000 + 2000 - 2000 - 300) * 1e-3, 1e-9);
  EXPECT_NEAR(t.offset[1][1], 10.0, 1e-9);
  EXPECT_EQ(t.last[0][0], 3);
  EXPECT_EQ(t.last[1][0], 0);
  EXPECT_EQ(t.last[1][1], 3);
  const std::string table = format_stage_timeline(t);
  EXPECT_NE(table.find("    1   8.70   10.00*"), std::string::npos) << table;
}

TEST(StageTimeline, RejectsBlocksThatWroteDifferentCounts) {
  std::vector<std::int64_t> clock = clock_of(2, 16, 4, {{0, 0}, {0, 0}});
  clock[16 + 9] = 0;  // block 1's last stamp missing
  EXPECT_THROW(read_stage_timeline(clock, 2, 16, 4), std::invalid_argument);
  EXPECT_THROW(read_stage_timeline(clock, 2, 16, 1), std::invalid_argument);
  EXPECT_THROW(read_stage_timeline(std::vector<std::int64_t>(8, 1), 2, 16, 4), std::invalid_argument);
}

}  // namespace
}  // namespace sprintnet::train
