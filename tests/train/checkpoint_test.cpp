// Checkpoints and resume: a run interrupted and resumed writes exactly what the
// uninterrupted run writes; checkpoints are pruned and scheduled as configured;
// damaged, foreign or half-written checkpoints are rejected or ignored with
// messages naming the file; and the `sprintnet train --resume` command line.
// Runs on a 2000-sample slice of MNIST with a 784-32-10 MLP, one CPU thread
// (bit-exact resume needs the same thread count; one thread is also the
// fastest on a shared two-core machine).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sprintnet/core/stop_request.h"
#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/metrics_writer.h"
#include "sprintnet/io/read_file.h"
#include "sprintnet/io/safetensors.h"
#include "sprintnet/optim/optimizer.h"
#include "sprintnet/train/batch_loader.h"
#include "sprintnet/train/checkpoint.h"
#include "sprintnet/train/evaluate.h"
#include "sprintnet/train/model_io.h"
#include "sprintnet/train/resume.h"
#include "sprintnet/train/run_directory.h"
#include "sprintnet/train/trainer.h"
#include "support/error_message.h"
#include "support/stop_request_cleared.h"
#include "support/test_util.h"

namespace sprintnet::train {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Thrown from an epoch callback: the run stops there as if it had been killed.
struct SimulatedKill {};

constexpr std::int64_t kEpochs = 5;

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> tiny_overrides(const fs::path& out_dir, const std::string& name) {
  return {
      fmt::format("seed={}", test::config_seed()),
      fmt::format("data.dir=\"{}\"", test::data_dir().string()),
      "data.train_limit=2000",
      "data.test_limit=500",
      "model.hidden=[32]",
      fmt::format("train.epochs={}", kEpochs),
      "device.name=\"cpu\"",
      "device.threads=1",
      fmt::format("output.dir=\"{}\"", out_dir.string()),
      fmt::format("output.name=\"{}\"", name),
      "output.progress=\"none\"",
  };
}

Config tiny_config(const fs::path& out_dir, const std::string& name, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> overrides = tiny_overrides(out_dir, name);
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return config_from_overrides(overrides);
}

// Trains `config` and stops after epoch `kill_after`, as a killed run would. Returns the run directory.
fs::path train_until_killed(const Config& config, std::int64_t kill_after) {
  Trainer trainer(config);
  trainer.on_epoch_end([kill_after](const EpochRecord& record) {
    if (record.epoch == kill_after) throw SimulatedKill{};
  });
  EXPECT_THROW(trainer.fit(), SimulatedKill);
  return fs::path(config.output.dir) / config.output.name;
}

TrainSummary resume(const fs::path& run_dir, const std::vector<std::string>& overrides = {}) {
  Trainer trainer(plan_resume(run_dir, {}, overrides));
  return trainer.fit();
}

// A metrics row without the fields that measure time: those are the only ones a resumed run may change.
nlohmann::json without_timings(const std::string& line) {
  nlohmann::json row = nlohmann::json::parse(line);
  row.erase("epoch_time_s");
  row.erase("samples_per_s");
  return row;
}

std::vector<std::string> csv_without_timings(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const std::string& line : lines) {
    std::vector<std::string> fields;
    std::stringstream row(line);
    for (std::string field; std::getline(row, field, ',');) fields.push_back(field);
    EXPECT_EQ(fields.size(), 8u) << line;
    if (fields.size() == 8u) fields.erase(fields.begin() + 5, fields.begin() + 7);  // epoch_time_s, samples_per_s
    out.push_back(fmt::format("{}", fmt::join(fields, ",")));
  }
  return out;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

void expect_same_tensors(const TensorList& a, const TensorList& b, std::string_view what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first) << what;
    EXPECT_TRUE(same_bytes(a[i].second, b[i].second)) << what << ": tensor " << a[i].first << " differs";
    EXPECT_FALSE(test::all_zero(a[i].second)) << what << ": tensor " << a[i].first << " is all zero";
  }
}

struct ResumeCase {
  const char* name;
  std::vector<std::string> overrides;
  std::int64_t kill_after;   // the run dies after this epoch's metrics row (and checkpoint, when one is due)
  bool partial_metrics_row;  // and mid-way through writing the next metrics row
};

void PrintTo(const ResumeCase& c, std::ostream* os) { *os << c.name; }

class ResumeIsBitExact : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(ResumeIsBitExact, MetricsWeightsAndOptimizerStateMatchTheUninterruptedRun) {
  const ResumeCase& c = GetParam();
  const fs::path out = test::temp_dir(fmt::format("resume-{}", c.name));
  const TrainSummary full = Trainer(tiny_config(out, "full", c.overrides)).fit();

  const fs::path run = train_until_killed(tiny_config(out, "cut", c.overrides), c.kill_after);
  ASSERT_EQ(read_lines(run / "metrics.jsonl").size(), static_cast<std::size_t>(c.kill_after));
  if (c.partial_metrics_row) std::ofstream(run / "metrics.jsonl", std::ios::app) << "{\"step\":4";
  const fs::path resumed_from = latest_checkpoint(run);
  EXPECT_EQ(resumed_from.filename(), "epoch-0002") << "every case resumes after epoch 2 of 5";
  const TrainSummary resumed = resume(run);
  ASSERT_EQ(resumed.epochs.size(), static_cast<std::size_t>(kEpochs - 2));
  EXPECT_EQ(resumed.run_dir, run);
  EXPECT_EQ(resumed.final_test.loss, full.final_test.loss);
  EXPECT_EQ(resumed.final_test.accuracy, full.final_test.accuracy);

  // Every row, the resumed epochs included, as the uninterrupted run wrote it (timings aside).
  const auto full_rows = read_lines(full.run_dir / "metrics.jsonl");
  const auto resumed_rows = read_lines(run / "metrics.jsonl");
  ASSERT_EQ(full_rows.size(), static_cast<std::size_t>(kEpochs));
  ASSERT_EQ(resumed_rows.size(), full_rows.size());
  for (std::size_t i = 0; i < full_rows.size(); ++i) {
    EXPECT_EQ(without_timings(resumed_rows[i]), without_timings(full_rows[i])) << "metrics row " << i;
  }
  EXPECT_EQ(csv_without_timings(read_lines(run / "metrics.csv")),
            csv_without_timings(read_lines(full.run_dir / "metrics.csv")));
  // The run learned something, so identical rows are not identical by being trivial.
  EXPECT_LT(nlohmann::json::parse(full_rows.back())["train_loss"].get<double>(),
            0.5 * nlohmann::json::parse(full_rows.front())["train_loss"].get<double>());

  EXPECT_EQ(read_file(run / "model.safetensors"), read_file(full.run_dir / "model.safetensors"));
  const Checkpoint a = read_checkpoint(latest_checkpoint(full.run_dir));
  const Checkpoint b = read_checkpoint(latest_checkpoint(run));
  EXPECT_EQ(a.epoch, kEpochs);
  EXPECT_EQ(b.epoch, kEpochs);
  EXPECT_EQ(a.step, b.step);
  expect_same_tensors(a.weights, b.weights, "final weights");
  expect_same_tensors(a.optimizer_state, b.optimizer_state, "final optimizer state");
  EXPECT_EQ(a.optimizer_counters, b.optimizer_counters);
  // The checkpoint it resumed from is older: training went on from it.
  EXPECT_FALSE(same_bytes(read_checkpoint(resumed_from.parent_path() / "epoch-0004").weights[0].second,
                          b.weights[0].second));
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoint, ResumeIsBitExact,
    ::testing::Values(
        // Momentum buffers and their "started" flags carry over.
        ResumeCase{"sgd_momentum", {"optim.type=\"sgd\"", "optim.momentum=0.9", "optim.nesterov=true"}, 2, false},
        // Adam's moments and per-parameter step counts carry over, and the cosine schedule and its
        // warm-up depend on the step. Checkpoints every 2 epochs and a kill after epoch 3 leave a
        // metrics row (and half of another) past the checkpoint, which the resume must drop.
        ResumeCase{"adamw_cosine",
                   {"optim.type=\"adamw\"", "optim.lr=0.003", "optim.weight_decay=0.01", "schedule.type=\"cosine\"",
                    "schedule.warmup_steps=10", "schedule.min_lr=0.0001", "checkpoint.every_epochs=2",
                    "checkpoint.keep_last=0"},
                   3, true}),
    [](const ::testing::TestParamInfo<ResumeCase>& param_info) { return std::string(param_info.param.name); });

std::vector<std::string> names_of(const std::vector<fs::path>& dirs) {
  std::vector<std::string> names;
  for (const fs::path& dir : dirs) names.push_back(dir.filename().string());
  return names;
}

TEST(Checkpoint, KeepLastAndEveryEpochsDecideWhichCheckpointsExist) {
  const fs::path out = test::temp_dir("checkpoint-schedule");
  using Names = std::vector<std::string>;
  const auto checkpoints_of = [&](const std::string& name, std::vector<std::string> overrides) {
    const TrainSummary summary = Trainer(tiny_config(out, name, overrides)).fit();
    EXPECT_EQ(latest_checkpoint(summary.run_dir).filename(), "epoch-0005") << name;
    return names_of(list_checkpoints(summary.run_dir));
  };
  EXPECT_EQ(checkpoints_of("keep2", {"checkpoint.keep_last=2"}), (Names{"epoch-0004", "epoch-0005"}));
  EXPECT_EQ(checkpoints_of("keep-all", {"checkpoint.keep_last=0"}),
            (Names{"epoch-0001", "epoch-0002", "epoch-0003", "epoch-0004", "epoch-0005"}));
  // Every 2 epochs, and always after the last.
  EXPECT_EQ(checkpoints_of("every2", {"checkpoint.every_epochs=2", "checkpoint.keep_last=0"}),
            (Names{"epoch-0002", "epoch-0004", "epoch-0005"}));
  EXPECT_EQ(checkpoints_of("end-only", {"checkpoint.every_epochs=0"}), (Names{"epoch-0005"}));
}

// A stop request (Ctrl-C in the CLI) ends the run after the epoch in progress with that epoch's checkpoint, though
// none is due, and the resumed run ends as the uninterrupted one. One the epoch callback makes ends the run after
// the callback's epoch, as a program that stops on a condition of its metrics expects.
TEST(Checkpoint, AStopRequestEndsTheRunAfterItsEpochWithACheckpointToResumeFrom) {
  const fs::path out = test::temp_dir("checkpoint-stop");
  const std::vector<std::string> end_only = {"checkpoint.every_epochs=0", "checkpoint.keep_last=0"};
  const TrainSummary full = Trainer(tiny_config(out, "full", end_only)).fit();
  Trainer trainer(tiny_config(out, "stopped", end_only));
  trainer.on_epoch_end([](const EpochRecord& record) {
    if (record.epoch == 2) request_stop();
  });
  TrainSummary stopped;
  {
    const test::StopRequestCleared cleared;
    stopped = trainer.fit();
  }
  ASSERT_EQ(stopped.stop_signal, std::optional<int>(0));
  EXPECT_EQ(stopped.epochs.size(), 2u);
  EXPECT_EQ(read_lines(stopped.run_dir / "metrics.jsonl").size(), 2u);
  EXPECT_EQ(names_of(list_checkpoints(stopped.run_dir)), std::vector<std::string>{"epoch-0002"});
  EXPECT_FALSE(fs::exists(stopped.run_dir / "model.safetensors")) << "the final weights are the last epoch's";
  EXPECT_FALSE(full.stop_signal);

  const TrainSummary resumed = resume(stopped.run_dir);
  EXPECT_FALSE(resumed.stop_signal);
  EXPECT_EQ(resumed.epochs.size(), 3u);
  EXPECT_EQ(resumed.final_test.loss, full.final_test.loss);
  EXPECT_EQ(read_file(stopped.run_dir / "model.safetensors"), read_file(full.run_dir / "model.safetensors"));
}

// A second fit() on one trainer trained the same epochs again into a new run whose checkpoints resume refused.
TEST(Checkpoint, ASecondFitIsRefusedNamingTheRunAndHowToContinueIt) {
  const fs::path out = test::temp_dir("checkpoint-fit-twice");
  Trainer trainer(tiny_config(out, "once", {"train.epochs=1"}));
  const TrainSummary first = trainer.fit();
  EXPECT_THAT([&] { trainer.fit(); },
              ThrowsMessage<Error>(AllOf(HasSubstr("fit() was already called"), HasSubstr(first.run_dir.string()),
                                         HasSubstr("train.epochs"))));
  EXPECT_FALSE(fs::exists(out / "once-1"));
  const TrainSummary more = Trainer(plan_resume(first.run_dir, {}, {"train.epochs=2"})).fit();
  EXPECT_EQ(more.epochs.size(), 1u);
}

// A finished run resumed for more epochs: its final weights were the earlier end's until the new end, and eval of
// the run (killed on the way, say) took them for the run's. They are removed when the resume starts training (the
// checkpoint it resumed from holds the same bytes), and the new end writes the run's final weights again.
TEST(Checkpoint, AResumeForMoreEpochsDropsTheEarlierEndsFinalWeights) {
  const fs::path out = test::temp_dir("checkpoint-extend");
  const TrainSummary first = Trainer(tiny_config(out, "extend", {"train.epochs=1"})).fit();
  const fs::path final_weights = first.run_dir / "model.safetensors";
  ASSERT_TRUE(fs::exists(final_weights));
  EXPECT_EQ(read_file(final_weights), read_file(first.run_dir / "checkpoints" / "epoch-0001" / "model.safetensors"));
  Trainer more(plan_resume(first.run_dir, {}, {"train.epochs=3"}));
  more.on_epoch_end([&](const EpochRecord& record) {
    if (record.epoch == 2) {
      EXPECT_FALSE(fs::exists(final_weights)) << "the earlier end's weights, during the extension";
      throw SimulatedKill{};
    }
  });
  EXPECT_THROW(more.fit(), SimulatedKill);
  EXPECT_FALSE(fs::exists(final_weights));
  const TrainSummary end = resume(first.run_dir);
  EXPECT_EQ(end.epochs.back().epoch, 3);
  EXPECT_EQ(read_file(final_weights), read_file(first.run_dir / "checkpoints" / "epoch-0003" / "model.safetensors"));
}

TEST(Checkpoint, WeightsFileHoldsOnlyTheModelSoPyTorchLoadsItStrictly) {
  const fs::path out = test::temp_dir("checkpoint-files");
  const fs::path run = Trainer(tiny_config(out, "run", {"train.epochs=1"})).fit().run_dir;
  const fs::path dir = latest_checkpoint(run);
  const SafetensorsFile weights = load_safetensors(dir / kCheckpointModelFileName);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : weights.tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(weights.metadata.at("format"), "pt");
  EXPECT_EQ(load_safetensors(run / "model.safetensors").metadata, weights.metadata) << "the final weights alike";
  const SafetensorsFile state = load_safetensors(dir / kCheckpointStateFileName);
  EXPECT_EQ(state.metadata.at("format"), kCheckpointStateFormat);
  EXPECT_EQ(state.metadata.at("epoch"), "1");
  EXPECT_EQ(state.metadata.at("step"), "15");  // 2000 samples / 128 per batch, the last partial batch dropped
  EXPECT_EQ(state.metadata.at("optimizer"), "sgd");
  EXPECT_EQ(state.metadata.at("optimizer.0.momentum_started"), "1");
  EXPECT_EQ(state.metadata.at("config"), read_file(dir / kCheckpointConfigFileName));
  EXPECT_EQ(state.tensors.size(), 4u);  // one momentum buffer per parameter
}

TEST(Checkpoint, DamagedStateFileIsRejectedNamingIt) {
  const fs::path out = test::temp_dir("checkpoint-damaged");
  const fs::path run = train_until_killed(tiny_config(out, "run"), 2);
  const fs::path state = latest_checkpoint(run) / kCheckpointStateFileName;
  const std::string bytes = read_file(state);

  std::ofstream(state, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  EXPECT_THAT([&] { plan_resume(run, {}, {}); }, ThrowsMessage<Error>(HasSubstr(state.string())));
  std::ofstream(state, std::ios::binary | std::ios::trunc) << bytes.substr(0, 5);
  EXPECT_THAT([&] { plan_resume(run, {}, {}); }, ThrowsMessage<Error>(HasSubstr(state.string())));
  fs::remove(state);
  EXPECT_THAT([&] { plan_resume(run, {}, {}); },
              ThrowsMessage<Error>(HasSubstr(fmt::format("{} is missing", kCheckpointStateFileName))));
  // The original bytes resume: the rejections were about the damage.
  std::ofstream(state, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_EQ(resume(run).epochs.size(), static_cast<std::size_t>(kEpochs - 2));
}

// A path that is there but is no file (here a directory named model.safetensors) was reported as missing, which
// sends a user looking for a file that is not lost. It is named as what it is.
TEST(Checkpoint, AFileThatIsADirectoryIsNamedAsOneNotAsMissing) {
  const fs::path out = test::temp_dir("checkpoint-not-a-file");
  const fs::path run = train_until_killed(tiny_config(out, "run"), 1);
  const fs::path weights = latest_checkpoint(run) / kCheckpointModelFileName;
  fs::remove(weights);
  fs::create_directory(weights);
  const std::string message = test::error_message([&] { plan_resume(run, {}, {}); });
  EXPECT_THAT(message, AllOf(HasSubstr(latest_checkpoint(run).string()), HasSubstr(kCheckpointModelFileName),
                             HasSubstr("it is a directory")));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("missing")));
}

TEST(Checkpoint, LeftoversOfAKilledWriteAreIgnoredAndCleanedUp) {
  const fs::path out = test::temp_dir("checkpoint-leftover");
  const fs::path run = train_until_killed(tiny_config(out, "run", {"checkpoint.keep_last=0"}), 2);
  const fs::path checkpoints = run / kCheckpointsDirName;
  // Killed while writing epoch 3: a half-written temporary directory.
  const fs::path temporary = checkpoints / ".epoch-0003.tmp.12345";
  fs::create_directories(temporary);
  std::ofstream(temporary / kCheckpointStateFileName) << "half a file";
  const fs::path latest_temporary = checkpoints / ".latest.tmp.12345.0";
  std::ofstream(latest_temporary) << "epoch-00";
  // Killed after renaming epoch 4's directory but before pointing `latest` at it (from an earlier life).
  fs::copy(checkpoints / "epoch-0002", checkpoints / "epoch-0004", fs::copy_options::recursive);
  EXPECT_EQ(latest_checkpoint(run).filename(), "epoch-0002");

  const TrainSummary resumed = resume(run);
  EXPECT_EQ(resumed.epochs.front().epoch, 3);
  EXPECT_FALSE(fs::exists(temporary));
  EXPECT_FALSE(fs::exists(latest_temporary));
  EXPECT_EQ(names_of(list_checkpoints(run)),
            (std::vector<std::string>{"epoch-0001", "epoch-0002", "epoch-0003", "epoch-0004", "epoch-0005"}));
  // epoch-0004 was rewritten by the resumed run, not kept from the copy of epoch 2.
  EXPECT_EQ(read_checkpoint(checkpoints / "epoch-0004").epoch, 4);
}

// The leftover of an earlier life (a checkpoint renamed into place before `latest` named it) goes at the resumed
// run's first checkpoint, not only when the run reaches its epoch and rewrites it: a run that dies again in
// between leaves no checkpoint of a life that `latest` never named. (In LeftoversOfAKilledWriteAreIgnoredAndCleanedUp
// the resumed run goes on to rewrite epoch 4, which hides whether the leftover was deleted.)
TEST(Checkpoint, ALeftoverNewerThanLatestGoesAtTheResumedRunsFirstCheckpoint) {
  const fs::path out = test::temp_dir("checkpoint-leftover-newer");
  const fs::path run = train_until_killed(tiny_config(out, "run", {"checkpoint.keep_last=0"}), 2);
  const fs::path checkpoints = run / kCheckpointsDirName;
  fs::copy(checkpoints / "epoch-0002", checkpoints / "epoch-0004", fs::copy_options::recursive);
  ASSERT_EQ(latest_checkpoint(run).filename(), "epoch-0002");

  Trainer resumed(plan_resume(run, {}, {}));
  resumed.on_epoch_end([](const EpochRecord& record) {
    if (record.epoch == 3) throw SimulatedKill{};
  });
  EXPECT_THROW(resumed.fit(), SimulatedKill);
  EXPECT_EQ(latest_checkpoint(run).filename(), "epoch-0003");
  EXPECT_EQ(names_of(list_checkpoints(run)), (std::vector<std::string>{"epoch-0001", "epoch-0002", "epoch-0003"}));
}

// A checkpoint whose write fails part way (here its second file: a full disk, say) leaves no temporary
// directory behind, and `latest` still names the checkpoint before it.
TEST(Checkpoint, AFailedWriteLeavesNothingBehind) {
  const fs::path out = test::temp_dir("checkpoint-failed-write");
  const fs::path run = train_until_killed(tiny_config(out, "run"), 1);
  Checkpoint checkpoint = read_checkpoint(latest_checkpoint(run));
  checkpoint.epoch = 2;
  ASSERT_FALSE(checkpoint.optimizer_state.empty());
  checkpoint.optimizer_state.push_back(checkpoint.optimizer_state.front());  // a name twice: its save throws
  EXPECT_THROW(write_checkpoint(run, checkpoint, 0), Error);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(run / kCheckpointsDirName)) left.push_back(entry.path().filename());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"epoch-0001", "latest"}));
  EXPECT_EQ(latest_checkpoint(run).filename(), "epoch-0001");
}

TEST(Checkpoint, ResumingFailsCleanlyWithoutACheckpointToResume) {
  const fs::path out = test::temp_dir("checkpoint-none");
  EXPECT_THAT([&] { plan_resume(out / "no-such-run", {}, {}); },
              ThrowsMessage<Error>(HasSubstr((out / "no-such-run").string() + " does not exist")));
  fs::create_directories(out / "empty-run");
  EXPECT_THAT([&] { plan_resume(out / "empty-run", {}, {}); }, ThrowsMessage<Error>(HasSubstr("no checkpoint")));
  std::ofstream(out / "a-file.toml") << "seed = 1\n";  // a config given to --resume by mistake
  EXPECT_THAT([&] { plan_resume(out / "a-file.toml", {}, {}); },
              ThrowsMessage<Error>(HasSubstr((out / "a-file.toml").string() + " is not a directory")));

  const fs::path run = train_until_killed(tiny_config(out, "run", {"train.epochs=2"}), 2);
  EXPECT_THAT([&] { plan_resume(run, {}, {}); },
              ThrowsMessage<Error>(HasSubstr("--set train.epochs=N with N > 2")));
  EXPECT_THAT([&] { plan_resume(run, {}, {"train.epochs=1"}); }, ThrowsMessage<Error>(HasSubstr("fewer than")));
}

// Two processes resuming one run (a requeued job beside the one still running) used to both succeed, one's
// metrics rows silently replacing the other's. The second now fails before it rewrites anything.
TEST(Checkpoint, ARunDirectoryInUseIsNotResumedTwice) {
  const fs::path out = test::temp_dir("checkpoint-in-use");
  const fs::path run = train_until_killed(tiny_config(out, "run"), 2);
  const std::string rows = read_file(run / "metrics.jsonl");
  {
    const RunDirectoryLock other_process(run);  // a separate open file description: flock sees another holder
    EXPECT_THAT([&] { resume(run); },
                ThrowsMessage<Error>(AllOf(HasSubstr(run.string()),
                                           HasSubstr("in use by another sprintnet process (a training, a resume or a sweep"))));
    EXPECT_THAT([&] { RunDirectoryLock again(run); }, ThrowsMessage<Error>(HasSubstr("in use")));
  }
  EXPECT_EQ(read_file(run / "metrics.jsonl"), rows);  // the refused resume changed nothing
  EXPECT_EQ(resume(run).epochs.size(), static_cast<std::size_t>(kEpochs - 2));  // released: it resumes
  const RunDirectoryLock after_the_run(run);  // and the resume let go of it when fit returned

  // A run in its first epoch has no checkpoint yet: it is named as in use, not as a run without one.
  const fs::path young = out / "young";
  fs::create_directories(young);
  {
    const RunDirectoryLock training(young);
    EXPECT_THAT([&] { plan_resume(young, {}, {}); }, ThrowsMessage<Error>(HasSubstr("in use by another sprintnet")));
  }
  EXPECT_THAT([&] { plan_resume(young, {}, {}); }, ThrowsMessage<Error>(HasSubstr("has no checkpoint to resume")));
}

// Stopped between a checkpoint folder's rename and `latest`'s write (or `latest` deleted): the whole folders are
// named, with how to take one, instead of "no checkpoint"; and with the name written, it resumes.
TEST(Checkpoint, FoldersThatLatestNeverNamedAreNamedWhenItIsMissing) {
  const fs::path out = test::temp_dir("checkpoint-unnamed");
  const fs::path run = train_until_killed(tiny_config(out, "run"), 2);
  const std::string newest = list_checkpoints(run).back().filename().string();
  EXPECT_EQ(latest_checkpoint_name(run), newest);  // (what an out-of-memory write names as left to resume from)
  fs::remove(run / "checkpoints" / "latest");
  EXPECT_EQ(latest_checkpoint_name(run), "");
  EXPECT_THAT([&] { plan_resume(run, {}, {}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("has no checkpoint that latest names"), HasSubstr(newest),
                                         HasSubstr(fmt::format("echo {} >", newest)))));
  write_text_file_atomically(run / "checkpoints" / "latest", newest + "\n");
  EXPECT_NO_THROW(plan_resume(run, {}, {}));
}

// `rm -rf runs/` while a run trains: the run used to end "successfully" in a folder the checkpoint writer made
// anew, without its metrics or config (written into the deleted inodes). It now stops, naming the folder.
TEST(Checkpoint, ARunWhoseDirectoryWasDeletedStopsNamingIt) {
  const fs::path out = test::temp_dir("checkpoint-deleted");
  Trainer trainer(tiny_config(out, "run"));
  trainer.on_epoch_end([&](const EpochRecord& record) {
    if (record.epoch == 2) fs::remove_all(out / "run");
  });
  EXPECT_THAT([&] { trainer.fit(); },
              ThrowsMessage<Error>(AllOf(HasSubstr((out / "run").string()),
                                         HasSubstr("was deleted or moved while the run trained (found after epoch 3)"))));
}

// A Trainer whose fit() threw, still alive, does not hold its run: the program resumes it in the same process.
TEST(Checkpoint, ARunWhoseFitThrewIsResumedInTheSameProcess) {
  const fs::path out = test::temp_dir("checkpoint-in-process");
  Trainer killed(tiny_config(out, "run"));
  killed.on_epoch_end([](const EpochRecord& record) {
    if (record.epoch == 2) throw SimulatedKill{};
  });
  EXPECT_THROW(killed.fit(), SimulatedKill);
  EXPECT_EQ(resume(out / "run").epochs.size(), static_cast<std::size_t>(kEpochs - 2));
}

// data.dir = "data" is relative: a run resumed from another working directory, or after its data moved, needs
// --set data.dir, which used to be refused as a change of what the run computes.
TEST(Checkpoint, TheDataPathsMayChangeOnResume) {
  const fs::path out = test::temp_dir("checkpoint-data-moved");
  const fs::path run = train_until_killed(tiny_config(out, "run"), 2);
  const fs::path moved = out / "moved-data";
  fs::create_directory_symlink(fs::absolute(test::data_dir()), moved);
  const TrainSummary resumed = resume(run, {fmt::format("data.dir=\"{}\"", moved.string())});
  EXPECT_EQ(resumed.epochs.size(), static_cast<std::size_t>(kEpochs - 2));
  EXPECT_THAT([&] { plan_resume(run, {}, {"data.train_limit=1000"}); },
              ThrowsMessage<Error>(HasSubstr("data.train_limit (2000 in the checkpoint, 1000 now)")));
  // Other files of the same size (here MNIST's test images and labels as training data): refused, by the
  // checkpoint's fingerprint of the data, not trained on.
  const fs::path mnist = fs::absolute(test::data_dir()) / "mnist", other = out / "other-data" / "mnist";
  fs::create_directories(other);
  const auto copy = [&](const std::string& source, const std::string& name) {  // raw, or gzipped as get-data may
    const bool raw = fs::exists(mnist / source);
    fs::copy_file(mnist / (raw ? source : source + ".gz"), other / (raw ? name : name + ".gz"));
  };
  copy("t10k-images-idx3-ubyte", "train-images-idx3-ubyte");
  copy("t10k-labels-idx1-ubyte", "train-labels-idx1-ubyte");
  copy("t10k-images-idx3-ubyte", "t10k-images-idx3-ubyte");
  copy("t10k-labels-idx1-ubyte", "t10k-labels-idx1-ubyte");
  const fs::path resumable = train_until_killed(tiny_config(out, "again"), 2);
  EXPECT_THAT(test::error_message([&] {
                resume(resumable, {fmt::format("data.dir=\"{}\"", (out / "other-data").string())});
              }),
              AllOf(HasSubstr("the run trained on other data (2000 samples, labels crc32"),
                    HasSubstr("the data paths may change on resume to find the same files")));
}

// output.csv says which files the run writes, not what it computes: a resume with another value was refused as a
// change of what the run computes. Turned off, metrics.csv gets no new rows; turned on again, it gets every row,
// those of the epochs it was off made from metrics.jsonl's.
TEST(Checkpoint, OutputCsvMayChangeOnResume) {
  const fs::path out = test::temp_dir("checkpoint-csv-toggled");
  const fs::path run = train_until_killed(tiny_config(out, "run"), 2);
  ASSERT_EQ(read_lines(run / "metrics.csv").size(), 3u);
  EXPECT_EQ(resume(run, {"train.epochs=3", "output.csv=false"}).epochs.size(), 1u);
  EXPECT_EQ(read_lines(run / "metrics.jsonl").size(), 3u);
  EXPECT_EQ(read_lines(run / "metrics.csv").size(), 3u);  // header and epochs 1 and 2
  EXPECT_EQ(resume(run, {"train.epochs=4", "output.csv=true"}).epochs.size(), 1u);
  const std::vector<std::string> jsonl = read_lines(run / "metrics.jsonl"), csv = read_lines(run / "metrics.csv");
  ASSERT_EQ(jsonl.size(), 4u);
  ASSERT_EQ(csv.size(), 5u);
  for (std::size_t i = 0; i < jsonl.size(); ++i) {
    const nlohmann::json row = nlohmann::json::parse(jsonl[i]);
    const auto optional = [&](const char* column) {
      return row[column].is_null() ? std::string() : fmt::format("{}", row[column].get<double>());
    };
    EXPECT_EQ(csv[i + 1], fmt::format("{},{},{},{},{},{},{},{}", row["step"].get<std::int64_t>(),
                                      row["epoch"].get<std::int64_t>(), row["train_loss"].get<double>(),
                                      optional("test_loss"), optional("test_accuracy"),
                                      row["epoch_time_s"].get<double>(), row["samples_per_s"].get<double>(),
                                      row["lr"].get<double>()))
        << "epoch " << i + 1;
  }
}

TEST(Checkpoint, ConfigsThatChangeWhatTheRunComputesAreRefusedNamingTheKey) {
  const fs::path out = test::temp_dir("checkpoint-config");
  const fs::path run = train_until_killed(tiny_config(out, "run"), 2);
  EXPECT_THAT([&] { plan_resume(run, {}, {"optim.lr=0.1"}); },
              ThrowsMessage<Error>(HasSubstr("optim.lr (0.05 in the checkpoint, 0.1 now)")));
  // A config file whose model differs from the checkpoint's.
  std::string toml = read_file(run / "config.toml");
  const auto hidden = toml.find("hidden = [32]");
  ASSERT_NE(hidden, std::string::npos);
  toml.replace(hidden, std::string("hidden = [32]").size(), "hidden = [16]");
  const fs::path config_file = out / "other-model.toml";
  std::ofstream(config_file) << toml;
  EXPECT_THAT([&] { plan_resume(run, config_file, {}); },
              ThrowsMessage<Error>(HasSubstr("model.hidden ([32] in the checkpoint, [16] now)")));
  // The config.toml of the checkpoint itself edited: it no longer matches the state it came with.
  const fs::path checkpoint_config = latest_checkpoint(run) / kCheckpointConfigFileName;
  std::ofstream(checkpoint_config) << toml;
  EXPECT_THAT([&] { plan_resume(run, {}, {}); }, ThrowsMessage<Error>(HasSubstr(checkpoint_config.string())));
}

TEST(Checkpoint, WeightsOrStateOfAnotherModelOrOptimizerAreRejectedNamingTheFile) {
  const fs::path out = test::temp_dir("checkpoint-foreign");
  const fs::path run = train_until_killed(tiny_config(out, "run"), 2);
  const ResumePlan plan = plan_resume(run, {}, {});
  const fs::path dir = plan.checkpoint.dir;

  ResumePlan other_weights = plan;
  Generator gen(test::test_seed());
  other_weights.checkpoint.weights[0].second = test::random_uniform({16, 784}, DType::kF32, gen);
  EXPECT_THAT([&] { Trainer trainer(other_weights); },
              ThrowsMessage<Error>(AllOf(HasSubstr((dir / kCheckpointModelFileName).string()), HasSubstr("0.weight"),
                                         HasSubstr("[16, 784]"))));
  // Right shape, a NaN inside: named with the tensor and where, not trained on (ReLU would hide it).
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    ResumePlan non_finite = plan;
    Tensor& weight = non_finite.checkpoint.weights[1].second;
    weight = weight.clone();
    weight.span<float>()[3] = bad;
    EXPECT_THAT([&] { Trainer trainer(non_finite); },
                ThrowsMessage<Error>(AllOf(HasSubstr((dir / kCheckpointModelFileName).string()),
                                           HasSubstr(non_finite.checkpoint.weights[1].first),
                                           HasSubstr("non-finite"), HasSubstr("element 3"))));
  }

  // The state of an AdamW over the same model, offered to the run's SGD.
  nn::MlpSpec spec;
  spec.inputs = 784;
  spec.hidden = {32};
  spec.outputs = 10;
  auto model = nn::make_mlp(spec, gen, Device::cpu(), DType::kF32);
  optim::AdamW adamw(model->parameters(), optim::AdamOptions{});
  ResumePlan other_optimizer = plan;
  other_optimizer.checkpoint.optimizer_state = adamw.state();
  other_optimizer.checkpoint.optimizer_counters = adamw.counters();
  other_optimizer.checkpoint.optimizer_counters["steps"] = plan.checkpoint.step;
  const std::string state_file = (dir / kCheckpointStateFileName).string();
  EXPECT_THAT([&] { Trainer trainer(other_optimizer); },
              ThrowsMessage<Error>(AllOf(HasSubstr(state_file), HasSubstr("momentum_buffer"))));
  other_optimizer.checkpoint.optimizer_type = "adamw";
  EXPECT_THAT([&] { Trainer trainer(other_optimizer); },
              ThrowsMessage<Error>(AllOf(HasSubstr(state_file), HasSubstr("'adamw'"))));
  EXPECT_NO_THROW(Trainer trainer(plan));
}

// Optimizer state no training writes: a NaN momentum, a negative second moment, Adam counters that differ
// (every parameter is updated at every step). Resumed, they gave a run NaN weights (ReLU hid them from the loss)
// or a message naming neither the file nor the counter that was off.
TEST(Checkpoint, OptimizerStateNoTrainingWritesIsRejectedNamingTheFile) {
  const fs::path out = test::temp_dir("checkpoint-bad-state");
  const fs::path sgd_run = train_until_killed(tiny_config(out, "sgd"), 2);
  const ResumePlan sgd = plan_resume(sgd_run, {}, {});
  const std::string sgd_state = (sgd.checkpoint.dir / kCheckpointStateFileName).string();
  ResumePlan nan_momentum = sgd;
  Tensor& momentum = nan_momentum.checkpoint.optimizer_state[0].second;
  momentum = momentum.clone();
  momentum.span<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT([&] { Trainer trainer(nan_momentum); },
              ThrowsMessage<Error>(AllOf(HasSubstr(sgd_state), HasSubstr("nan at element 5"),
                                         HasSubstr(nan_momentum.checkpoint.optimizer_state[0].first))));

  const fs::path adam_run = train_until_killed(tiny_config(out, "adam", {"optim.type=\"adam\"", "optim.lr=0.001"}), 2);
  const ResumePlan adam = plan_resume(adam_run, {}, {});
  const std::string adam_state = (adam.checkpoint.dir / kCheckpointStateFileName).string();
  ResumePlan negative = adam;
  for (auto& [name, tensor] : negative.checkpoint.optimizer_state) {
    if (name != "1.exp_avg_sq") continue;
    tensor = tensor.clone();
    tensor.span<float>()[0] = -1.0f;
  }
  EXPECT_THAT([&] { Trainer trainer(negative); },
              ThrowsMessage<Error>(AllOf(HasSubstr(adam_state), HasSubstr("'1.exp_avg_sq' holds -1 at element 0"))));
  ResumePlan counters = adam;
  counters.checkpoint.optimizer_counters["0.step"] = 7;
  EXPECT_THAT([&] { Trainer trainer(counters); },
              ThrowsMessage<Error>(AllOf(HasSubstr(adam_state), HasSubstr("'0.step'"), HasSubstr("7"))));
  EXPECT_NO_THROW(Trainer trainer(adam));
}

// Every parameter is updated at every step of an fp32 or bf16 run: its SGD flags are 1 and its Adam step counts
// the run's. Edited otherwise, a checkpoint resumed with exit 0 and trained differently (epoch 3's loss 0.3932
// where the uninterrupted run gives 0.3846: the momentum buffer thrown away; AdamW's bias correction restarted).
// Both edits pass the range checks, and the AdamW one the check that the counts agree with each other.
TEST(Checkpoint, OptimizerCountersBehindTheStepCountAreRefusedNamingTheKey) {
  const fs::path out = test::temp_dir("checkpoint-counters");
  const fs::path sgd_run = train_until_killed(tiny_config(out, "sgd"), 2);
  const fs::path state = latest_checkpoint(sgd_run) / kCheckpointStateFileName;
  const std::string bytes = read_file(state);
  SafetensorsFile edited = load_safetensors(state);
  ASSERT_EQ(edited.metadata.at("optimizer.0.momentum_started"), "1");
  edited.metadata["optimizer.0.momentum_started"] = "0";  // the review's edit, in the file
  save_safetensors(state, edited.tensors, edited.metadata);
  EXPECT_THAT([&] { Trainer trainer(plan_resume(sgd_run, {}, {})); },
              ThrowsMessage<Error>(AllOf(HasSubstr(state.string()), HasSubstr("'0.momentum_started' is 0, expected 1"),
                                         HasSubstr("took 30 steps"))));
  std::ofstream(state, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_NO_THROW(Trainer trainer(plan_resume(sgd_run, {}, {})));  // the refusal was about the edit

  const fs::path adamw_run =
      train_until_killed(tiny_config(out, "adamw", {"optim.type=\"adamw\"", "optim.lr=0.001"}), 2);
  const ResumePlan adamw = plan_resume(adamw_run, {}, {});
  ResumePlan restarted = adamw;
  for (auto& [name, value] : restarted.checkpoint.optimizer_counters) {
    if (name.ends_with(".step")) value = 0;
  }
  EXPECT_THAT([&] { Trainer trainer(restarted); },
              ThrowsMessage<Error>(AllOf(HasSubstr((adamw.checkpoint.dir / kCheckpointStateFileName).string()),
                                         HasSubstr("'0.step' is 0, expected 30"))));
  EXPECT_NO_THROW(Trainer trainer(adamw));
}

// An fp16 run's dynamic loss scaling (torch.amp.GradScaler's scale and growth tracker) is part of its state: a
// checkpoint without it resumed from the initial scale and skipped or took updates the uninterrupted run did not
// (on the GPU: CompiledStep.AnFp16RunResumesBitForBitWithItsLossScaling). It reads back as written; values no run
// writes are refused naming the file and the key. (The CPU trains no fp16: the checkpoint is an fp32 run's, relabelled.)
TEST(Checkpoint, AnFp16RunsLossScalingReadsBackAndValuesNoRunWritesAreRefused) {
  const fs::path out = test::temp_dir("checkpoint-loss-scale");
  Checkpoint fp16 = read_checkpoint(latest_checkpoint(train_until_killed(tiny_config(out, "run"), 2)));
  ASSERT_EQ(fp16.loss_scaling, std::nullopt);  // fp32 keeps none
  fp16.config.device.precision = "fp16";
  fp16.loss_scaling = LossScaling{8192.0f, 17};
  const fs::path dir = write_checkpoint(out / "fp16", fp16, 0);
  EXPECT_EQ(read_checkpoint(dir).loss_scaling, fp16.loss_scaling);
  Checkpoint older = fp16;  // an fp16 checkpoint written before the scaling was kept: it starts from the initial one
  older.loss_scaling.reset();
  EXPECT_EQ(read_checkpoint(write_checkpoint(out / "older", older, 0)).loss_scaling, std::nullopt);

  const fs::path state = dir / kCheckpointStateFileName;
  const SafetensorsFile written = load_safetensors(state);
  ASSERT_EQ(written.metadata.at("loss_scale"), "8192");
  ASSERT_EQ(written.metadata.at("loss_scale.good_steps"), "17");
  const auto refused = [&](const std::string& key, const std::optional<std::string>& value, const std::string& message) {
    SafetensorsFile edited = written;
    if (value) {
      edited.metadata[key] = *value;
    } else {
      edited.metadata.erase(key);
    }
    save_safetensors(state, edited.tensors, edited.metadata);
    EXPECT_THAT([&] { read_checkpoint(dir); }, ThrowsMessage<Error>(AllOf(HasSubstr(state.string()), HasSubstr(message))))
        << key << " = " << value.value_or("(none)");
  };
  refused("loss_scale", "3", "loss scale 3 is not a positive, finite power of two");
  refused("loss_scale", "inf", "loss scale inf is not a positive");
  refused("loss_scale", "0", "loss scale 0 is not a positive");
  refused("loss_scale", "-65536", "loss scale -65536 is not a positive");
  refused("loss_scale", "2x", "'loss_scale' is \"2x\", expected a number");
  refused("loss_scale.good_steps", "2000", "2000 finite steps since the loss scale changed is outside [0, 2000)");
  refused("loss_scale.good_steps", "-1", "'loss_scale.good_steps' is \"-1\", expected a non-negative integer");
  refused("loss_scale.good_steps", std::nullopt, "no 'loss_scale.good_steps'");
  refused("loss_scale", std::nullopt, "no 'loss_scale'");
  refused("loss_scale.good_steps", "31", "counts 31 steps, more than the run's 30");
  save_safetensors(state, written.tensors, written.metadata);
  EXPECT_EQ(read_checkpoint(dir).loss_scaling, fp16.loss_scaling);  // the refusals were about the edits

  Checkpoint bf16 = fp16;  // no run of another precision keeps it
  bf16.config.device.precision = "bf16";
  EXPECT_THAT([&] { read_checkpoint(write_checkpoint(out / "bf16", bf16, 0)); },
              ThrowsMessage<Error>(HasSubstr("metadata 'loss_scale' is fp16's loss scaling, but the checkpoint's "
                                             "config has device.precision = \"bf16\"")));
}

// A NaN weight whose loss stays finite (the compiled steps' ReLU maps a NaN pre-activation to 0) used to end the
// run with exit 0 and a final model and checkpoint that eval, predict and resume refuse. The trainer checks each
// snapshot it writes with first_non_finite, the loader's own check.
TEST(Checkpoint, ANonFiniteWeightIsNamedWithWhereItIs) {
  const Tensor finite = Tensor::from_vector<float>({1, 2, 3}, {3});
  EXPECT_EQ(first_non_finite({{"0.weight", finite}, {"0.bias", finite}}), std::nullopt);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    const Tensor poisoned = Tensor::from_vector<float>({1, 2, bad}, {3});
    EXPECT_THAT(first_non_finite({{"0.weight", finite}, {"0.bias", poisoned}}).value_or(""),
                HasSubstr(fmt::format("tensor '0.bias' holds a non-finite value ({} at element 2)", bad)));
  }
}

// A 6-4-3 model, fp32 on the CPU: enough tensors for the load checks below.
std::unique_ptr<nn::Sequential> tiny_model(Generator& gen) {
  return nn::make_mlp({.inputs = 6, .hidden = {4}, .outputs = 3}, gen, Device::cpu(), DType::kF32);
}

// Weights are checked as the optimizer's state is: all before any is copied, so a file whose last tensor is
// wrong leaves the model as it was (the first ones had been overwritten).
TEST(Checkpoint, ModelWeightsLoadChecksEveryTensorBeforeChangingAnything) {
  Generator gen(test::test_seed());
  auto model = tiny_model(gen);
  const TensorList before = host_copy(model_weights(*model));
  TensorList offered;
  for (const auto& [name, tensor] : before) offered.emplace_back(name, test::random_uniform(tensor.shape(), DType::kF32, gen));
  offered.back().second = Tensor::zeros({7}, DType::kF32);  // the last tensor of the wrong shape
  EXPECT_THAT([&] { load_model_weights(*model, offered, "w.safetensors"); },
              ThrowsMessage<Error>(HasSubstr("has shape [7]")));
  const TensorList after = model_weights(*model);
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after[i].second.to_vector<float>(), before[i].second.to_vector<float>()) << before[i].first;
  }
  // And evaluation refuses a loss it does not know rather than computing cross-entropy for it.
  Dataset data;
  data.images = Tensor::zeros({2, 6}, DType::kU8);
  data.labels = Tensor::zeros({2}, DType::kI32);
  BatchLoader loader(data, Normalization{1.0, 0.0}, LoaderOptions{2, false, false, 0}, Device::cpu());
  EXPECT_THAT([&] { evaluate(*model, loader, "MSE"); }, ThrowsMessage<Error>(HasSubstr("unknown loss 'MSE'")));
}

TEST(Checkpoint, OptimizerStateLoadChecksNamesShapesAndCountersBeforeChangingAnything) {
  Generator gen(test::test_seed());
  auto model = tiny_model(gen);
  optim::SGD sgd(model->parameters(), optim::SgdOptions{0.1, 0.9, 0.0, 0.0, false});
  optim::NamedTensors saved;
  for (const auto& [name, tensor] : sgd.state()) {
    saved.emplace_back(name, test::random_uniform(tensor.shape(), tensor.dtype(), gen));
  }
  optim::Counters counters = sgd.counters();
  counters["steps"] = 7;
  for (auto& [name, value] : counters) {
    if (name.ends_with("momentum_started")) value = 1;
  }

  optim::Counters bad_flag = counters;
  bad_flag["1.momentum_started"] = 2;
  EXPECT_THAT([&] { sgd.load_state(saved, bad_flag, "test.safetensors"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("test.safetensors"), HasSubstr("1.momentum_started"))));
  optim::NamedTensors wrong_shape = saved;
  wrong_shape[2].second = test::random_uniform({5}, DType::kF32, gen);
  EXPECT_THAT([&] { sgd.load_state(wrong_shape, counters, "test.safetensors"); },
              ThrowsMessage<Error>(HasSubstr(wrong_shape[2].first)));
  EXPECT_EQ(sgd.steps_taken(), 0) << "a rejected state must leave the optimizer as it was";
  EXPECT_TRUE(test::all_zero(sgd.state()[0].second));

  sgd.load_state(saved, counters, "test.safetensors");
  EXPECT_EQ(sgd.steps_taken(), 7);
  EXPECT_EQ(sgd.counters(), counters);
  expect_same_tensors(sgd.state(), saved, "loaded SGD state");
}

TEST(Checkpoint, ResumedMetricsKeepEarlierRowsByteForByte) {
  const fs::path dir = test::temp_dir("metrics-resume");
  Generator gen(test::test_seed());
  {
    MetricsWriter writer(dir, true);
    for (std::int64_t epoch = 1; epoch <= 4; ++epoch) {
      MetricsRow row;
      row.epoch = epoch;
      row.step = 10 * epoch;
      row.train_loss = gen.uniform(0.0, 3.0);
      writer.write(row);
    }
  }
  std::ofstream(dir / "metrics.jsonl", std::ios::app) << "{\"step\":5";  // cut off mid-row
  const auto jsonl = read_lines(dir / "metrics.jsonl");
  const auto csv = read_lines(dir / "metrics.csv");
  {
    MetricsWriter writer = MetricsWriter::resume(dir, true, 2, 939);
    MetricsRow row;
    row.epoch = 3;
    row.step = 30;
    writer.write(row);
  }
  const auto jsonl_after = read_lines(dir / "metrics.jsonl");
  const auto csv_after = read_lines(dir / "metrics.csv");
  ASSERT_EQ(jsonl_after.size(), 3u);
  EXPECT_EQ(jsonl_after[0], jsonl[0]);
  EXPECT_EQ(jsonl_after[1], jsonl[1]);
  EXPECT_EQ(nlohmann::json::parse(jsonl_after[2])["epoch"], 3);
  ASSERT_EQ(csv_after.size(), 4u);  // header and three rows
  EXPECT_EQ(std::vector<std::string>(csv_after.begin(), csv_after.begin() + 3),
            std::vector<std::string>(csv.begin(), csv.begin() + 3));

  std::ofstream(dir / "metrics.csv", std::ios::trunc) << "epoch,loss\n1,2\n";
  EXPECT_THAT([&] { MetricsWriter::resume(dir, true, 2, 939); },
              ThrowsMessage<Error>(AllOf(HasSubstr((dir / "metrics.csv").string()), HasSubstr("header"))));
}

// A complete row that does not parse (a hand edit, a stray line) is named, and neither file changes:
// keeping the rows before it and dropping the rest would lose the run's history without a word.
TEST(Checkpoint, AResumeMeetingAnUnreadableMetricsRowNamesItAndChangesNothing) {
  const fs::path dir = test::temp_dir("metrics-resume-bad-row");
  {
    MetricsWriter writer(dir, true);
    for (std::int64_t epoch = 1; epoch <= 3; ++epoch) {
      MetricsRow row;
      row.epoch = epoch;
      row.step = 10 * epoch;
      row.train_loss = 1.0 / static_cast<double>(epoch);
      writer.write(row);
    }
  }
  for (const std::string file : {"metrics.jsonl", "metrics.csv"}) {
    const fs::path bad = test::temp_dir("metrics-resume-bad-row-" + file);
    fs::copy(dir, bad, fs::copy_options::recursive);
    auto lines = read_lines(bad / file);
    const std::size_t first_row = file == "metrics.csv" ? 1 : 0;
    lines[first_row] = "not a row";  // the first row: what a silent cut would lose most of
    {
      std::ofstream out(bad / file, std::ios::trunc);
      for (const auto& line : lines) out << line << '\n';
    }
    const auto jsonl = read_lines(bad / "metrics.jsonl"), csv = read_lines(bad / "metrics.csv");
    EXPECT_THAT([&] { MetricsWriter::resume(bad, true, 2, 939); },
                ThrowsMessage<Error>(AllOf(HasSubstr((bad / file).string()),
                                           HasSubstr(fmt::format("line {}", first_row + 1)))));
    EXPECT_EQ(read_lines(bad / "metrics.jsonl"), jsonl) << file;
    EXPECT_EQ(read_lines(bad / "metrics.csv"), csv) << file;
  }
}

// The same refusal through the Trainer: config.toml (which a resume with a higher train.epochs rewrites) was
// rewritten before the metrics were read, so a refused resume still changed the run.
TEST(Checkpoint, ARefusedResumeLeavesTheRunsConfigAsItWas) {
  const fs::path out = test::temp_dir("resume-refused-config");
  const fs::path run = train_until_killed(tiny_config(out, "refused"), 1);
  std::ofstream(run / "metrics.jsonl", std::ios::app) << "not a row\n";
  const std::string config_before = read_file(run / "config.toml");
  const std::string more = fmt::format("train.epochs={}", kEpochs + 2);
  EXPECT_THAT([&] { resume(run, {more}); },
              ThrowsMessage<Error>(HasSubstr((run / "metrics.jsonl").string())));
  EXPECT_EQ(read_file(run / "config.toml"), config_before);
}

// Runs the sprintnet binary with `arguments`, its output going to `log`; returns its exit code.
int run_cli(const std::string& arguments, const fs::path& log) {
  const std::string command = fmt::format("'{}' {} > '{}' 2>&1", SPRINTNET_CLI_PATH, arguments, log.string());
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Checkpoint, CommandLineTrainsThenResumes) {
  const fs::path out = test::temp_dir("checkpoint-cli");
  // The same settings as a TOML file of top-level dotted keys, trained for 2 epochs.
  const fs::path config = out / "tiny.toml";
  {
    std::ofstream file(config);
    for (const std::string& setting : tiny_overrides(out, "cli")) {
      if (!setting.starts_with("train.epochs")) file << setting << "\n";
    }
    file << "train.epochs = 2\n";
  }
  const fs::path log = out / "log.txt";
  const fs::path run = out / "cli";
  ASSERT_EQ(run_cli(fmt::format("train '{}' -q", config.string()), log), 0) << read_file(log);
  EXPECT_EQ(read_lines(run / "metrics.jsonl").size(), 2u);

  ASSERT_EQ(run_cli(fmt::format("train --resume '{}' --set train.epochs=3 -q", run.string()), log), 0)
      << read_file(log);
  EXPECT_EQ(read_lines(run / "metrics.jsonl").size(), 3u);
  EXPECT_EQ(latest_checkpoint(run).filename(), "epoch-0003");

  EXPECT_EQ(run_cli(fmt::format("train --resume '{}'", run.string()), log), 1);
  EXPECT_THAT(read_file(log), HasSubstr("already trained its 3 epochs"));
  EXPECT_EQ(run_cli(fmt::format("train --resume '{}'", (out / "missing").string()), log), 1);
  EXPECT_THAT(read_file(log), HasSubstr("does not exist"));
  EXPECT_EQ(run_cli(fmt::format("train --resume '{}' --set optim.lr=1", run.string()), log), 1);
  EXPECT_THAT(read_file(log), HasSubstr("optim.lr"));
}

}  // namespace
}  // namespace sprintnet::train
