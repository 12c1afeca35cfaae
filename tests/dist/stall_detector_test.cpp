// When a data-parallel rank counts as stalled (a peer died or hangs): only while a mark is pending,
// and only after the limit passes with no mark passed. No GPU needed.
#include <gtest/gtest.h>

#include "sprintnet/dist/stall_detector.h"
#include "support/error_message.h"

namespace sprintnet::dist {
namespace {

TEST(StallDetector, NothingPendingIsNeverAStallHoweverLong) {
  StallDetector d(30.0);
  EXPECT_FALSE(d.stalled(1000.0));
  d.recorded(0.0);
  d.passed(1.0);
  EXPECT_EQ(d.pending(), 0);
  EXPECT_FALSE(d.stalled(500.0));  // rank 0 evaluating, writing: idle, not stalled
  EXPECT_EQ(d.idle_s(500.0), 0.0);
}

TEST(StallDetector, APendingMarkWithNoProgressStallsAfterTheLimit) {
  StallDetector d(30.0);
  d.recorded(100.0);
  EXPECT_FALSE(d.stalled(129.0));
  EXPECT_TRUE(d.stalled(130.5));
  EXPECT_DOUBLE_EQ(d.idle_s(130.5), 30.5);
}

TEST(StallDetector, TheClockStartsAtTheFirstMarkAfterAnIdleSpellNotBefore) {
  StallDetector d(30.0);
  d.recorded(0.0);
  d.passed(1.0);
  d.recorded(200.0);  // 199 s idle before it: not counted
  EXPECT_FALSE(d.stalled(220.0));
  EXPECT_TRUE(d.stalled(231.0));
}

TEST(StallDetector, ALongEpochThatKeepsPassingMarksNeverStalls) {
  StallDetector d(30.0);
  // An epoch of 64 marks enqueued at once, each passed 20 s after the one before: 21 minutes in all.
  for (int i = 0; i < 64; ++i) d.recorded(0.0);
  for (int i = 1; i <= 64; ++i) {
    EXPECT_FALSE(d.stalled(20.0 * i - 0.5)) << "mark " << i;
    d.passed(20.0 * i);
  }
  EXPECT_EQ(d.pending(), 0);
  // A later mark passed late counts from the last pass, however many are queued behind it.
  d.recorded(2000.0);
  d.recorded(2000.0);
  d.passed(2010.0);
  EXPECT_FALSE(d.stalled(2039.0));
  EXPECT_TRUE(d.stalled(2041.0));
}

TEST(StallDetector, APassWithNothingPendingIsABug) {
  StallDetector d;
  EXPECT_NE(test::error_message([&] { d.passed(0.0); }).find("none pending"), std::string::npos);
  EXPECT_DOUBLE_EQ(d.limit_s(), kStallLimitSeconds);
  EXPECT_LT(kStallLimitSeconds, 60.0);  // the bound for a job to stop after a rank dies
}

}  // namespace
}  // namespace sprintnet::dist
