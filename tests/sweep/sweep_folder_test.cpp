// What a sweep may delete: a run folder only when it holds this sweep's own unfinished attempt with nothing to
// continue from. `sweep --resume` deleted a run that `sprintnet train --resume` had trained to another
// train.epochs (counted unfinished for having other epochs than the sweep's) and trained it again from the start,
// without a word; it deleted files it never wrote under a run's name too. Such a folder is left as it is now, and
// its run recorded as failed with an error naming the folder and what to do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sprintnet/core/stop_request.h"
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

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A sweep of a 1-epoch and a 200-epoch run, stopped (Ctrl-C) when the short one ends: the long one stops after its
// epoch with a checkpoint, unrecorded. Returns the sweep; its long run's folder is `long_run`.
SweepOptions sweep_stopped_in_its_long_run(const fs::path& dir, fs::path& long_run) {
  SweepOptions o = new_sweep(dir, "[sweep]\ngrid = { \"train.epochs\" = [1, 200] }\n");
  o.parallel = 2;
  {
    const test::StopRequestCleared cleared;
    EXPECT_EQ(run_sweep(o, [](const RunResult&, const SweepProgress&) { request_stop(); }).size(), 1u);
  }
  long_run = o.out_dir / "train.epochs=200";
  return o;
}

// The reviewer's case: the stopped run finished by `sprintnet train --resume RUN --set train.epochs=N` with N the
// epochs it had plus one (a user's run, not the sweep's 200). Its weights and metrics stay byte for byte.
TEST(SweepFolder, ARunTrainResumeFinishedAtOtherEpochsIsKeptAndItsRunFailed) {
  fs::path long_run;
  const SweepOptions o = sweep_stopped_in_its_long_run(test::temp_dir("sweep-folder-finished"), long_run);
  const std::int64_t stopped_at = train::read_checkpoint(train::latest_checkpoint(long_run)).epoch;
  ASSERT_LT(stopped_at, 200) << "the long run finished before the stop: the test proves nothing";
  const std::int64_t epochs = stopped_at + 1;
  train::Trainer user(train::plan_resume(long_run, {}, {fmt::format("train.epochs={}", epochs)}));
  user.set_quiet(true);
  user.fit();
  const std::string weights = test::file_bytes(long_run / "model.safetensors");
  const std::string rows = read_file(long_run / "metrics.jsonl");

  const std::vector<RunResult> results = resume_sweep(o.out_dir, 1);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].status, "done");
  EXPECT_EQ(results[1].status, "failed");
  EXPECT_THAT(results[1].error,
              AllOf(HasSubstr(fmt::format("{} holds a run of train.epochs = {} (its config.toml), not this sweep's 200",
                                          long_run.string(), epochs)),
                    HasSubstr("move the folder aside and resume the sweep")));
  EXPECT_EQ(results[1].epochs, 0) << "its metrics are not this run's";
  EXPECT_TRUE(test::file_bytes(long_run / "model.safetensors") == weights) << "deleted and trained again";
  EXPECT_EQ(read_file(long_run / "metrics.jsonl"), rows);
  EXPECT_THAT(read_file(o.out_dir / "summary.md"), HasSubstr("| train.epochs=200 | failed: " + long_run.string()));
  EXPECT_THAT(read_file(o.out_dir / "summary.csv"), HasSubstr("\ntrain.epochs=200,train.epochs=200,failed,,,,0,,"));
}

// A run the sweep finished and recorded, then taken on by `sprintnet train --resume RUN --set train.epochs=2`: the
// resume kept its record, and the summary showed the numbers of its first epoch, which its folder no longer holds
// (eval on it gave others). It is the failed run of a folder the sweep leaves as it is now, like one never recorded.
TEST(SweepFolder, ARecordedRunTrainedOnAfterwardsIsNoLongerCountedAsTheSweeps) {
  const fs::path dir = test::temp_dir("sweep-folder-trained-on");
  SweepOptions o = new_sweep(dir, "[sweep]\ngrid = { \"optim.lr\" = [0.1] }\n");
  o.parallel = 1;
  const std::vector<RunResult> first = run_sweep(o);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].status, "done") << first[0].error;
  ASSERT_EQ(first[0].epochs, 1);
  const fs::path run = o.out_dir / "optim.lr=0.1";
  train::Trainer user(train::plan_resume(run, {}, {"train.epochs=2"}));
  user.set_quiet(true);
  const train::TrainSummary trained_on = user.fit();
  ASSERT_NE(trained_on.final_test.loss, first[0].final_loss) << "the second epoch changed nothing: proves nothing";
  const std::string weights = test::file_bytes(run / "model.safetensors");

  const std::vector<RunResult> results = resume_sweep(o.out_dir, 1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, "failed");
  EXPECT_THAT(results[0].error,
              HasSubstr(fmt::format("{} holds a run of train.epochs = 2 (its config.toml), not this sweep's 1",
                                    run.string())));
  EXPECT_TRUE(test::file_bytes(run / "model.safetensors") == weights) << "deleted and trained again";
  EXPECT_EQ(read_metrics_jsonl(run / "metrics.jsonl").size(), 2u);
}

// Resumed by `train --resume --set train.epochs=N` and stopped again before N: a checkpoint the sweep could
// continue, but to N epochs, which it did (and recorded as the run of 200). Left as it is too.
TEST(SweepFolder, AStoppedRunGivenOtherEpochsIsNotContinuedToThem) {
  fs::path long_run;
  const SweepOptions o = sweep_stopped_in_its_long_run(test::temp_dir("sweep-folder-stopped"), long_run);
  const std::int64_t stopped_at = train::read_checkpoint(train::latest_checkpoint(long_run)).epoch;
  ASSERT_LT(stopped_at, 200);
  {
    const test::StopRequestCleared cleared;
    train::Trainer user(train::plan_resume(long_run, {}, {fmt::format("train.epochs={}", stopped_at + 5)}));
    user.set_quiet(true);
    user.on_epoch_end([](const train::EpochRecord&) { request_stop(); });  // Ctrl-C in its first epoch
    ASSERT_TRUE(user.fit().stop_signal.has_value());
  }
  const std::string rows = read_file(long_run / "metrics.jsonl");
  const std::vector<RunResult> results = resume_sweep(o.out_dir, 1);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].status, "failed");
  EXPECT_THAT(results[1].error, HasSubstr(fmt::format("holds a run of train.epochs = {} stopped after epoch {}, not "
                                                      "this sweep's 200", stopped_at + 5, stopped_at + 1)));
  EXPECT_EQ(read_file(long_run / "metrics.jsonl"), rows) << "trained on";
}

// A sweep over three learning rates killed after its first run. Then: the finished run's metrics are lost (and its
// record), a user's file sits in the second run's folder, and the third's holds a run of another config (the
// first's config.toml). Each is left as it is, its run failed, naming what it holds; put right, the sweep finishes.
TEST(SweepFolder, FilesTheSweepCannotCountAsItsOwnAttemptAreKept) {
  const fs::path dir = test::temp_dir("sweep-folder-foreign");
  SweepOptions o = new_sweep(dir, "[sweep]\ngrid = { \"optim.lr\" = [0.1, 0.2, 0.3] }\n");
  o.parallel = 1;
  struct Killed {};
  EXPECT_THROW(run_sweep(o, [](const RunResult&, const SweepProgress&) { throw Killed{}; }), Killed);
  const fs::path finished = o.out_dir / "optim.lr=0.1", users = o.out_dir / "optim.lr=0.2",
                 other = o.out_dir / "optim.lr=0.3";
  const std::string weights = test::file_bytes(finished / "model.safetensors");
  const std::string rows = read_file(finished / "metrics.jsonl");
  fs::remove(finished / "metrics.jsonl");
  write_state(o.out_dir, {});
  fs::create_directory(users);
  std::ofstream(users / "precious.txt") << "keep me\n";
  fs::create_directory(other);
  fs::copy_file(finished / "config.toml", other / "config.toml");

  const std::vector<RunResult> results = resume_sweep(o.out_dir, 1);
  ASSERT_EQ(results.size(), 3u);
  for (const RunResult& r : results) EXPECT_EQ(r.status, "failed") << r.name;
  EXPECT_THAT(results[0].error, HasSubstr(finished.string() + " holds final weights (model.safetensors)"));
  EXPECT_THAT(results[1].error, HasSubstr(users.string() + " holds files but no config.toml of a run"));
  EXPECT_THAT(results[2].error, HasSubstr(other.string() + " holds a run of another config than this sweep's: "
                                                           "optim.lr (0.1 in the folder, 0.3 for this run)"));
  EXPECT_TRUE(test::file_bytes(finished / "model.safetensors") == weights);
  EXPECT_TRUE(fs::exists(users / "precious.txt"));
  EXPECT_TRUE(fs::exists(other / "config.toml"));

  std::ofstream(finished / "metrics.jsonl") << rows;  // put right: counted finished, the others trained
  fs::remove_all(users);
  fs::remove_all(other);
  std::vector<std::string> trained;
  const std::vector<RunResult> done =
      resume_sweep(o.out_dir, 1, [&](const RunResult& r, const SweepProgress&) { trained.push_back(r.name); });
  ASSERT_EQ(done.size(), 3u);
  for (const RunResult& r : done) EXPECT_EQ(r.status, "done") << r.name << ": " << r.error;
  EXPECT_EQ(trained, (std::vector<std::string>{"optim.lr=0.2", "optim.lr=0.3"}));
}

// A failed run's folder holds only its own files, which a resume clears to train it again; a note or a picture the
// user put there went with them, without a word. Such a folder is kept now, its run recorded as failed naming the
// files; without them the run trains again.
TEST(SweepFolder, AFailedRunsFolderWithAUsersFilesIsKept) {
  const fs::path dir = test::temp_dir("sweep-folder-notes");
  SweepOptions o = new_sweep(dir, "[sweep]\ngrid = { \"optim.lr\" = [1e6] }\n");  // diverges in epoch 1
  o.parallel = 1;
  const std::vector<RunResult> first = run_sweep(o);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].status, "failed");
  const fs::path run = o.out_dir / first[0].name;
  ASSERT_TRUE(fs::is_directory(run)) << run;
  std::ofstream(run / "NOTES.md") << "why it diverged\n";
  fs::create_directory(run / "analysis");
  const std::vector<RunResult> kept = resume_sweep(o.out_dir, 1);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].status, "failed");
  EXPECT_THAT(kept[0].error, HasSubstr(run.string() + " holds files a run does not write (NOTES.md, analysis)"));
  EXPECT_EQ(read_file(run / "NOTES.md"), "why it diverged\n");
  EXPECT_TRUE(fs::is_directory(run / "analysis"));
  fs::remove(run / "NOTES.md");
  fs::remove(run / "analysis");
  const std::vector<RunResult> again = resume_sweep(o.out_dir, 1);  // its own files only: trained again
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].status, "failed");
  EXPECT_THAT(again[0].error, HasSubstr("training diverged"));
}

}  // namespace
}  // namespace sprintnet::sweep
