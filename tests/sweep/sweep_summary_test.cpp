// What the summary writes for a value that is not known: a failed run's final accuracy and loss, a run's wall time
// when it was found finished in its folder, the standard deviation of a point of one run. summary.csv wrote 0 for
// them (a failed run's test loss 0.000000, the best there is) and summary.md 0.00; now an empty field and "—", as
// numpy (ddof=1) and pandas give NaN for the deviation of one value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "sprintnet/io/read_file.h"
#include "sprintnet/sweep/summary.h"
#include "support/test_util.h"

namespace sprintnet::sweep {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(SweepSummary, AValueNotKnownIsAnEmptyFieldNotZero) {
  const std::filesystem::path dir = test::temp_dir("sweep-summary-unknown");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // A failed run as train_one records it: no final accuracy or loss (left at RunResult's defaults), its best
  // accuracy and training time from its metrics rows.
  const RunResult failed{.name = "lr=9", .point = "lr=9", .overrides = {"lr=9"}, .status = "failed",
                         .error = "diverged", .best_accuracy = 0.084, .train_s = 0.5, .wall_s = 2.0, .epochs = 1};
  const RunResult alone{.name = "lr=1", .point = "lr=1", .overrides = {"lr=1"}, .status = "done", .error = "",
                        .final_accuracy = 0.9, .best_accuracy = 0.91, .final_loss = 0.3, .train_s = 1.5,
                        .wall_s = 2.5, .epochs = 2};
  RunResult found = alone;  // finished by `train --resume`: its wall time not known
  found.name = found.point = "lr=2";
  found.overrides = {"lr=2"};
  found.wall_s = nan;
  write_summary(dir, {failed, alone, found});

  const std::string csv = read_file(dir / "summary.csv");
  EXPECT_THAT(csv, AllOf(HasSubstr("\nlr=9,lr=9,failed,,0.084000,,1,0.5000,2.0000,lr=9,diverged\n"),
                         HasSubstr("\nlr=1,lr=1,done,0.900000,0.910000,0.300000,2,1.5000,2.5000,lr=1,\n"),
                         HasSubstr("\nlr=2,lr=2,done,0.900000,0.910000,0.300000,2,1.5000,,lr=2,\n"),
                         Not(HasSubstr("nan"))));
  const std::string md = read_file(dir / "summary.md");
  EXPECT_THAT(md, AllOf(HasSubstr("| lr=1 | 1 | 0 | 90.00 ± — | 0.3000 | 1.50 |"),
                        HasSubstr("| lr=9 | 1 | 1 | — | — | — |"),
                        HasSubstr("| lr=9 | failed: diverged | — | 8.40 | — | 1 | 0.50 | 2.00 |"),
                        HasSubstr("| lr=2 | done | 90.00 | 91.00 | 0.3000 | 2 | 1.50 | — |"), Not(HasSubstr("nan"))));

  const std::vector<PointStats> stats = point_statistics({alone, found});
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_TRUE(std::isnan(stats[0].std_accuracy)) << "one run has no sample deviation";
  RunResult twin = alone;
  twin.final_accuracy = 0.92;
  EXPECT_NEAR(point_statistics({alone, twin})[0].std_accuracy, 0.0141421356, 1e-9);  // sqrt(2 * 0.01^2 / (2 - 1))
}

}  // namespace
}  // namespace sprintnet::sweep
