// What counts as a finished run of a sweep: what its folder shows (a run `sprintnet train --resume` finished after
// the sweep stopped is not trained again), and only with a finite test loss (a NaN one is a failed run, not a
// result to average, and a resume trains it again).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "sprintnet/io/metrics_writer.h"
#include "sprintnet/io/read_file.h"
#include "sprintnet/sweep/summary.h"
#include "sprintnet/sweep/sweep_runner.h"
#include "sprintnet/train/checkpoint.h"
#include "sprintnet/train/resume.h"
#include "sprintnet/train/trainer.h"
#include "support/stop_request_cleared.h"
#include "support/test_util.h"
#include "tiny_sweep.h"

namespace sprintnet::sweep {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// The sweep is stopped (Ctrl-C) while its 200-epoch run trains; `sprintnet train --resume` then finishes that run
// by itself. The sweep's resume retrained it from the start (its record was missing from sweep.json), throwing the
// finished run away: now its folder says it is done, and the summary takes its results from there.
TEST(SweepDone, ARunThatTrainResumeFinishedIsTakenFromItsFolderNotTrainedAgain) {
  const std::filesystem::path dir = test::temp_dir("sweep-done-by-train-resume");
  SweepOptions o = new_sweep(dir, "[sweep]\ngrid = { \"train.epochs\" = [1, 200] }\n");
  o.parallel = 2;
  {
    const test::StopRequestCleared cleared;
    ASSERT_EQ(run_sweep(o, [](const RunResult&, const SweepProgress&) { request_stop(); }).size(), 1u);
  }
  const std::filesystem::path long_run = o.out_dir / "train.epochs=200";
  ASSERT_LT(train::read_checkpoint(train::latest_checkpoint(long_run)).epoch, 200)
      << "the long run finished before the stop: the test proves nothing";

  train::Trainer finisher(train::plan_resume(long_run, {}, {}));  // what `sprintnet train --resume RUN` does
  finisher.set_quiet(true);
  const train::TrainSummary finished = finisher.fit();
  const std::string weights = test::file_bytes(long_run / "model.safetensors");
  const std::vector<MetricsRow> rows = read_metrics_jsonl(long_run / "metrics.jsonl");
  ASSERT_EQ(rows.size(), 200u);

  std::vector<std::string> trained;
  const std::vector<RunResult> results =
      resume_sweep(o.out_dir, 1, [&](const RunResult& r, const SweepProgress&) { trained.push_back(r.name); });
  EXPECT_TRUE(trained.empty()) << "trained again: " << trained.front();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].status, "done");
  EXPECT_EQ(results[1].epochs, 200);
  EXPECT_EQ(results[1].final_loss, finished.final_test.loss);
  EXPECT_EQ(results[1].final_accuracy, finished.final_test.accuracy);
  EXPECT_TRUE(test::file_bytes(long_run / "model.safetensors") == weights) << "its weights were written again";
  EXPECT_EQ(read_metrics_jsonl(long_run / "metrics.jsonl").size(), 200u);
  EXPECT_EQ(read_state(o.out_dir).size(), 2u);
  EXPECT_THAT(read_file(o.out_dir / "summary.csv"), HasSubstr("train.epochs=200,train.epochs=200,done,"));
}

// One step at lr 1e20 (600 training images would take six): the train loss is the first batch's, taken before the
// step, and the weights stay finite (~1e20 x a gradient), but the logits overflow fp32 (~1e40), so the test loss is
// NaN. Such a run counted as done, its NaN in the point's mean; it is a failed run with its error now.
TEST(SweepDone, ARunWhoseTestLossIsNaNFailsWithItsErrorAndIsNotAveraged) {
  const std::filesystem::path dir = test::temp_dir("sweep-done-nan");
  SweepOptions o = new_sweep(dir, "[sweep]\ngrid = { \"optim.lr\" = [0.1, 1e20] }\nseeds = [0, 1]\n");
  o.overrides = {"data.train_limit=100"};
  std::size_t failed = 0;
  const std::vector<RunResult> results =
      run_sweep(o, [&](const RunResult&, const SweepProgress& p) { failed = p.failed; });
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].status, "done") << results[0].error;
  EXPECT_TRUE(std::isfinite(results[0].final_loss));
  for (const std::size_t i : {2u, 3u}) {
    EXPECT_EQ(results[i].status, "failed") << results[i].name;
    EXPECT_THAT(results[i].error, AllOf(HasSubstr("training diverged: the test loss after epoch 1 is nan"),
                                        HasSubstr("try a lower optim.lr")));
    EXPECT_EQ(results[i].epochs, 1);
    // No final result (summary.csv wrote 0, the best loss there is), but what its metrics row says: the epoch's
    // test accuracy (a NaN output's argmax still picks a class) and training time.
    EXPECT_TRUE(std::isnan(results[i].final_loss) && std::isnan(results[i].final_accuracy));
    const std::vector<MetricsRow> rows = read_metrics_jsonl(o.out_dir / results[i].name / "metrics.jsonl");
    ASSERT_EQ(rows.size(), 1u);
    ASSERT_TRUE(rows[0].test_accuracy.has_value());
    EXPECT_EQ(results[i].best_accuracy, *rows[0].test_accuracy);
    EXPECT_EQ(results[i].train_s, rows[0].epoch_time_s);
  }
  EXPECT_THAT(read_file(o.out_dir / "summary.csv"),
              HasSubstr(fmt::format("\n\"optim.lr=1e+20,seed=0\",optim.lr=1e+20,failed,,{:.6f},,1,",
                                    results[2].best_accuracy)));
  EXPECT_EQ(failed, 2u);
  const std::vector<PointStats> stats = point_statistics(results);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[1].point, "optim.lr=1e+20");  // every run failed: last, with no mean
  EXPECT_EQ(stats[1].failed, 2);
  const std::string summary = read_file(o.out_dir / "summary.md");
  EXPECT_THAT(summary, AllOf(HasSubstr("| optim.lr=1e+20 | 2 | 2 | — | — | — |"),
                             HasSubstr("| optim.lr=1e+20,seed=0 | failed: training diverged: the test loss")));

  // A resume does not take such a run as finished: not when the sweep failed it, nor from a record that says
  // done with a NaN loss (written before such runs failed); it trains again, and fails again.
  std::vector<RunResult> state = read_state(o.out_dir);
  state[2].status = "done";
  state[2].error.clear();
  state[2].final_loss = std::numeric_limits<double>::quiet_NaN();
  write_state(o.out_dir, state);
  std::vector<std::string> trained;
  const std::vector<RunResult> resumed =
      resume_sweep(o.out_dir, 1, [&](const RunResult& r, const SweepProgress&) { trained.push_back(r.name); });
  EXPECT_EQ(trained, (std::vector<std::string>{"optim.lr=1e+20,seed=0", "optim.lr=1e+20,seed=1"}));
  ASSERT_EQ(resumed.size(), 4u);
  EXPECT_EQ(resumed[2].status, "failed");
}

}  // namespace
}  // namespace sprintnet::sweep
