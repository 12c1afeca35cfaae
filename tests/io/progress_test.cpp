#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <sstream>

#include "sprintnet/core/error.h"
#include "sprintnet/io/progress_bar.h"

namespace sprintnet {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A clock the test moves by hand.
struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  ProgressBar::Clock function() {
    return [this] { return now; };
  }
};

TEST(ProgressFormat, SiNumbersHaveThreeSignificantDigits) {
  EXPECT_EQ(format_si(52100.0), "52.1k");
  EXPECT_EQ(format_si(1234567.0), "1.23M");
  EXPECT_EQ(format_si(523.4), "523");
  EXPECT_EQ(format_si(5.2), "5.20");
  EXPECT_EQ(format_si(0.0), "0.00");
  EXPECT_EQ(format_si(999.7), "1.00k");  // rounds up into the next unit rather than "1000"
  EXPECT_EQ(format_si(99960.0), "100k");
  EXPECT_EQ(format_si(4e9), "4.00G");
}

// Four decimals, as every loss line gives them, up to 1e6; beyond, scientific form: a finite loss of 2.748e38 (an
// evaluated bias of 3e38) took 39 digits before the point. NaN without its sign, infinity as "inf".
TEST(ProgressFormat, LossesHaveFourDecimalsOrScientificFormWhenHuge) {
  EXPECT_EQ(format_loss(0.12344), "0.1234");
  EXPECT_EQ(format_loss(999999.0), "999999.0000");
  EXPECT_EQ(format_loss(2.748e38), "2.7480e+38");
  EXPECT_EQ(format_loss(-1.5e7), "-1.5000e+07");
  EXPECT_EQ(format_loss(-std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(format_loss(std::numeric_limits<double>::infinity()), "inf");
}

TEST(ProgressFormat, DurationsAsClockTime) {
  EXPECT_EQ(format_duration(7.0), "0:07");
  EXPECT_EQ(format_duration(754.0), "12:34");
  EXPECT_EQ(format_duration(3723.0), "1:02:03");
  EXPECT_EQ(format_duration(59.6), "1:00");
  EXPECT_EQ(format_duration(-3.0), "0:00");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "--:--");
}

TEST(ProgressFormat, BarAndLines) {
  EXPECT_EQ(format_bar(0.5, 10), "[#####.....]");
  EXPECT_EQ(format_bar(1.5, 4), "[####]");
  EXPECT_EQ(format_bar(0.0, 3), "[...]");
  const ProgressSnapshot snapshot{3, 10, 234, 468, 0.12341, 52100.0, 7.2};
  EXPECT_EQ(format_progress_line(snapshot, true),
            "epoch 3/10 [##########..........] 234/468 loss 0.1234 52.1k samples/s ETA 0:07");
  EXPECT_EQ(format_progress_line(snapshot, false), "epoch 3/10 step 234/468 loss 0.1234 52.1k samples/s ETA 0:07");
  EXPECT_THAT(format_progress_line(ProgressSnapshot{}, false), HasSubstr("ETA --:--"));
  ProgressSnapshot diverged;
  diverged.loss = -std::numeric_limits<double>::quiet_NaN();  // a NaN's sign means nothing: "nan", not "-nan"
  EXPECT_THAT(format_progress_line(diverged, false), HasSubstr("loss nan "));
}

TEST(ProgressFormat, BarLinesFitTheTerminalOneColumnShort) {
  const ProgressSnapshot snapshot{3, 10, 234, 468, 0.12341, 52100.0, 7.2};
  const std::string full = "epoch 3/10 [##########..........] 234/468 loss 0.1234 52.1k samples/s ETA 0:07";
  EXPECT_EQ(format_progress_line_to_fit(snapshot, 0), full);  // width unknown
  EXPECT_EQ(format_progress_line_to_fit(snapshot, static_cast<int>(full.size()) + 1), full);
  // One column less: the bar gives up a character.
  EXPECT_EQ(format_progress_line_to_fit(snapshot, static_cast<int>(full.size())),
            "epoch 3/10 [#########..........] 234/468 loss 0.1234 52.1k samples/s ETA 0:07");
  EXPECT_EQ(format_progress_line_to_fit(snapshot, 64), "epoch 3/10 [##...] 234/468 loss 0.1234 52.1k samples/s ETA 0:07");
  // Too narrow for a bar of 5: no bar, the position as a count.
  EXPECT_EQ(format_progress_line_to_fit(snapshot, 63), "epoch 3/10 234/468 loss 0.1234 52.1k samples/s ETA 0:07");
  // Then the throughput goes, then the line is cut.
  EXPECT_EQ(format_progress_line_to_fit(snapshot, 50), "epoch 3/10 234/468 loss 0.1234 ETA 0:07");
  EXPECT_EQ(format_progress_line_to_fit(snapshot, 20), "epoch 3/10 234/468 ");
  for (int columns = 1; columns <= 100; ++columns) {
    EXPECT_LE(format_progress_line_to_fit(snapshot, columns).size(), static_cast<std::size_t>(columns - 1)) << columns;
  }
}

TEST(ProgressBar, BarRedrawsFitTheTerminalAsItIsResized) {
  FakeClock clock;
  std::ostringstream out;
  int columns = 40;
  ProgressBar bar(out, ProgressMode::kBar, 10, 1, clock.function(), [&columns] { return columns; });
  bar.update(1, 1, 0.5, 1000.0);
  columns = 120;
  clock.now += kProgressRedrawInterval;
  bar.update(1, 2, 0.5, 1000.0);
  const std::string drawn = out.str();
  const std::size_t second = drawn.find('\r', 1);
  ASSERT_NE(second, std::string::npos);
  EXPECT_EQ(drawn.substr(0, second), "\repoch 1/1 1/10 loss 0.5000 ETA --:--\x1b[K");
  EXPECT_THAT(drawn.substr(second), HasSubstr("[####................] 2/10"));
}

TEST(ProgressBar, PlainModePrintsOneLinePerUpdateWithTheRunEta) {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar(out, ProgressMode::kPlain, 100, 2, clock.function());
  clock.now += 10s;
  bar.update(1, 50, 0.25, 52100.0);  // 50 steps in 10 s; 150 to go -> 30 s
  clock.now += 10s;
  bar.update(1, 100, 0.125, 1.5e6);  // 100 steps in 20 s; 100 to go -> 20 s
  bar.update(1, 100, 0.125, 1.5e6);  // the epoch's end reporting the step a log_every line just showed
  bar.finish_epoch("epoch 1: test accuracy 0.9");
  EXPECT_EQ(out.str(),
            "epoch 1/2 step 50/100 loss 0.2500 52.1k samples/s ETA 0:30\n"
            "epoch 1/2 step 100/100 loss 0.1250 1.50M samples/s ETA 0:20\n"
            "epoch 1: test accuracy 0.9\n");
  EXPECT_EQ(out.str().find_first_of("\r\x1b"), std::string::npos);
}

TEST(ProgressBar, EtaOfAResumedRunCountsOnlyStepsTimedHere) {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar(out, ProgressMode::kPlain, 100, 4, clock.function());
  clock.now += 5s;
  bar.update(3, 10, 1.0, 1.0);  // epochs 1-2 ran in an earlier process: 10 steps in 5 s, 190 to go
  EXPECT_THAT(out.str(), HasSubstr("ETA 1:35"));
}

TEST(ProgressBar, BarModeRedrawsInPlaceThrottled) {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar(out, ProgressMode::kBar, 10, 1, clock.function(), [] { return 200; });
  for (int step = 1; step <= 9; ++step) {
    clock.now += 1ms;  // far faster than the redraw interval: only the first update draws
    bar.update(1, step, 0.5, 1000.0);
  }
  const std::string first_draws = out.str();
  EXPECT_EQ(std::count(first_draws.begin(), first_draws.end(), '\r'), 1);
  clock.now += kProgressRedrawInterval;
  bar.update(1, 10, 0.5, 1000.0);
  const std::string drawn = out.str();
  EXPECT_EQ(std::count(drawn.begin(), drawn.end(), '\r'), 2);
  // The last step of an epoch always draws, so the bar ends full.
  EXPECT_THAT(drawn, HasSubstr("\repoch 1/1 [####################] 10/10 loss 0.5000 1.00k samples/s ETA 0:00\x1b[K"));
  EXPECT_EQ(drawn.find('\n'), std::string::npos);
  bar.finish_epoch("epoch 1 done");
  EXPECT_TRUE(out.str().ends_with("\x1b[K\nepoch 1 done\n")) << out.str();
}

TEST(ProgressBar, FinishEpochShowsAThrottledLastUpdate) {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar(out, ProgressMode::kBar, 100, 2, clock.function(), [] { return 0; });
  clock.now += 1s;
  bar.update(1, 1, 2.0, 10.0);
  bar.update(1, 2, 1.0, 10.0);  // no time passed: throttled
  EXPECT_THAT(out.str(), ::testing::Not(HasSubstr("2/100")));
  bar.finish_epoch("summary");
  EXPECT_THAT(out.str(), HasSubstr("2/100 loss 1.0000"));
  EXPECT_TRUE(out.str().ends_with("\nsummary\n"));
}

TEST(ProgressBar, NoneModePrintsOnlySummaries) {
  std::ostringstream out;
  ProgressBar bar(out, ProgressMode::kNone, 10, 3);
  bar.update(1, 5, 1.0, 100.0);
  bar.finish_epoch("epoch 1: loss 1.0");
  EXPECT_EQ(out.str(), "epoch 1: loss 1.0\n");
}

TEST(ProgressMode, AutoIsABarOnlyOnATerminal) {
  EXPECT_EQ(resolve_progress_mode("auto", true), ProgressMode::kBar);
  EXPECT_EQ(resolve_progress_mode("auto", false), ProgressMode::kPlain);
  EXPECT_EQ(resolve_progress_mode("bar", false), ProgressMode::kBar);
  EXPECT_EQ(resolve_progress_mode("plain", true), ProgressMode::kPlain);
  EXPECT_EQ(resolve_progress_mode("none", true), ProgressMode::kNone);
  EXPECT_THROW(resolve_progress_mode("fancy", true), Error);
}

}  // namespace
}  // namespace sprintnet
