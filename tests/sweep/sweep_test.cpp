// sprintnet sweep on the CPU with tiny runs: the grid and its folder names, the statistics of the
// summary, a failing run recorded while the sweep goes on, a killed sweep resumed, bad keys
// rejected before anything trains, runs side by side equal to runs one after another.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include "sprintnet/io/read_file.h"
#include "sprintnet/sweep/grid.h"
#include "sprintnet/sweep/summary.h"
#include "sprintnet/sweep/sweep_runner.h"
#include "sprintnet/train/checkpoint.h"
#include "sprintnet/train/run_directory.h"
#include "same_runs.h"
#include "tiny_sweep.h"
#include "support/error_message.h"
#include "support/stop_request_cleared.h"
#include "support/test_util.h"

namespace sprintnet::sweep {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(SweepGrid, OptionsSplitOnTopLevelCommasOnly) {
  const GridAxis lr = parse_grid_option("optim.lr=0.1, 0.05");
  EXPECT_EQ(lr.key, "optim.lr");
  EXPECT_THAT(lr.values, ElementsAre("0.1", "0.05"));
  EXPECT_THAT(parse_grid_option("model.hidden=[256, 256],[512]").values, ElementsAre("[256, 256]", "[512]"));
  EXPECT_THAT(parse_grid_option("model.activation=\"relu\",\"a,b\"").values, ElementsAre("\"relu\"", "\"a,b\""));
  EXPECT_THAT(parse_seeds("0,1, 2"), ElementsAre(0, 1, 2));
  EXPECT_THAT(test::error_message([] { parse_grid_option("optim.lr"); }), HasSubstr("expected KEY=V1,V2"));
  EXPECT_THAT(test::error_message([] { parse_seeds("0,x"); }), HasSubstr("'x' is not an integer"));
  EXPECT_THAT(test::error_message([] { parse_seeds("0,-1"); }), HasSubstr("--seeds '0,-1': seed -1 is negative"));
  // An open quote or bracket took every value after it into one, silently (three values made two runs).
  EXPECT_THAT(test::error_message([] { parse_grid_option("data.dir=a,x\"y,b"); }),
              HasSubstr("--grid 'data.dir=a,x\"y,b': a '\"' is never closed"));
  EXPECT_THAT(test::error_message([] { parse_grid_option("model.hidden=[16,[32]"); }),
              HasSubstr("--grid 'model.hidden=[16,[32]': its '[' and ']' do not pair up"));
  EXPECT_THAT(test::error_message([] { parse_grid_option("model.hidden=16],[32"); }), HasSubstr("do not pair up"));
}

TEST(SweepGrid, ExpansionNamesEveryCombinationAndSeed) {
  SweepSpec spec;
  spec.axes = {{"optim.lr", {"0.1", "0.05"}}, {"model.hidden", {"[32]", "[64, 32]"}}};
  spec.seeds = {0, 1};
  const auto runs = expand(spec);
  ASSERT_EQ(runs.size(), 8u);
  EXPECT_EQ(runs[0].name, "optim.lr=0.1,model.hidden=32,seed=0");
  EXPECT_EQ(runs[0].point, "optim.lr=0.1,model.hidden=32");
  EXPECT_THAT(runs[0].overrides, ElementsAre("optim.lr=0.1", "model.hidden=[32]", "seed=0"));
  EXPECT_EQ(runs[7].name, "optim.lr=0.05,model.hidden=64,32,seed=1");
  spec.seeds.clear();
  EXPECT_EQ(expand(spec).size(), 4u);
}

TEST(SweepSummary, PointsAreMeanAndSampleDeviationOverFinishedRunsBestFirst) {
  std::vector<RunResult> results(5);
  const auto set = [&](int i, const std::string& point, const std::string& status, double acc) {
    results[static_cast<std::size_t>(i)].point = point;
    results[static_cast<std::size_t>(i)].status = status;
    results[static_cast<std::size_t>(i)].final_accuracy = acc;
  };
  set(0, "a", "done", 0.90);
  set(1, "a", "done", 0.92);
  set(2, "b", "done", 0.95);
  set(3, "b", "failed", 0.0);
  set(4, "c", "failed", 0.0);
  const auto stats = point_statistics(results);
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[0].point, "b");  // best mean first; its failed run is counted, not averaged
  EXPECT_DOUBLE_EQ(stats[0].mean_accuracy, 0.95);
  EXPECT_TRUE(std::isnan(stats[0].std_accuracy));  // one finished run: no sample deviation (numpy ddof=1: NaN)
  EXPECT_EQ(stats[0].failed, 1);
  EXPECT_EQ(stats[1].point, "a");
  EXPECT_NEAR(stats[1].mean_accuracy, 0.91, 1e-12);
  EXPECT_NEAR(stats[1].std_accuracy, 0.0141421356, 1e-9);  // sqrt(((0.01)^2 * 2) / (2 - 1))
  EXPECT_EQ(stats[2].point, "c");  // every run failed: last
}

// A failed run's error may hold a bare carriage return (a grid value "/tmp/x\ry" names a file that is not there):
// unquoted, it ended summary.csv's row for every CSV reader (Python's csv module among them), and summary.md's.
TEST(SweepSummary, ACarriageReturnStaysInsideItsField) {
  const std::filesystem::path dir = test::temp_dir("sweep-summary-cr");
  RunResult failed{.name = "data.dir=x", .point = "data.dir=x", .overrides = {"data.dir=x"}, .status = "failed",
                   .error = "no file /tmp/x\ry", .epochs = 0};
  write_summary(dir, {failed});
  EXPECT_THAT(read_file(dir / "summary.csv"), ::testing::HasSubstr("\"no file /tmp/x\ry\""));
  EXPECT_THAT(read_file(dir / "summary.md"), ::testing::AllOf(::testing::HasSubstr("no file /tmp/x y"),
                                                              ::testing::Not(::testing::HasSubstr("\r"))));
}

// A run whose weights stayed finite but whose test loss overflowed to NaN (lr = 1000) is written with a null loss
// (JSON has no NaN); reading it back threw "type must be number, but is null", so such a sweep could never
// resume. The state file reads back what it wrote, NaN included.
TEST(SweepState, ReadsBackTheNaNsItWrote) {
  const std::filesystem::path dir = test::temp_dir("sweep-state-nan");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  RunResult diverged{.name = "optim.lr=1000", .point = "optim.lr=1000", .overrides = {"optim.lr=1000"},
                     .status = "done", .error = "", .final_accuracy = 0.098, .best_accuracy = 0.1, .final_loss = nan,
                     .train_s = 1.5, .wall_s = 2.0, .epochs = 1};
  write_state(dir, {diverged});
  EXPECT_THAT(read_file(dir / "sweep.json"), ::testing::HasSubstr("\"final_test_loss\": null"));
  const std::vector<RunResult> read = read_state(dir);
  ASSERT_EQ(read.size(), 1u);
  EXPECT_TRUE(std::isnan(read[0].final_loss));
  EXPECT_EQ(read[0].final_accuracy, 0.098);
  EXPECT_EQ(read[0].epochs, 1);
  EXPECT_EQ(read[0].status, "done");
}

TEST(SweepRunner, AFailingRunIsRecordedAndTheKilledSweepResumesSkippingFinishedRuns) {
  const std::filesystem::path dir = test::temp_dir("sweep");
  SweepOptions o;
  o.config_path = write_config(dir, "[sweep]\ngrid = { \"optim.lr\" = [0.1, 1e30] }\nseeds = [0, 1]\n");
  o.spec = read_sweep_table(o.config_path);
  o.out_dir = dir / "out";
  ASSERT_EQ(o.spec.axes.size(), 1u);
  ASSERT_EQ(expand(o.spec).size(), 4u);
  // Kill the sweep after its second run (a callback that throws stands in for the kill).
  struct Killed {};
  EXPECT_THROW(run_sweep(o, [](const RunResult&, const SweepProgress& progress) {
                 if (progress.finished == 2) throw Killed{};
               }),
               Killed);
  EXPECT_EQ(read_state(o.out_dir).size(), 2u);
  std::vector<std::string> trained;
  const auto results = resume_sweep(o.out_dir, 0, [&](const RunResult& r, const SweepProgress&) {
    trained.push_back(r.name);
  });
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].status, "done");
  EXPECT_GT(results[0].final_accuracy, 0.3);
  EXPECT_EQ(results[2].status, "failed");  // lr = 1e30 diverges
  EXPECT_THAT(results[2].error, HasSubstr("diverged"));
  EXPECT_EQ(results[2].epochs, 1);  // the epoch it diverged in (its metrics row), not 0
  EXPECT_TRUE(std::filesystem::exists(o.out_dir / results[0].name / "model.safetensors"));
  const std::string summary = read_file(o.out_dir / "summary.md");
  EXPECT_THAT(summary, HasSubstr("| optim.lr=0.1 | 2 | 0 |"));
  EXPECT_THAT(summary, HasSubstr("failed: training diverged"));
  // A new sweep into a folder that holds one is refused.
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }), HasSubstr("holds a sweep already"));
}

constexpr const char* kLrGrid = "[sweep]\ngrid = { \"optim.lr\" = [0.1, 0.2] }\n";

// A sweep over two learning rates in `dir`, killed after its first run (a callback that throws
// stands in for the kill), to be resumed.
SweepOptions sweep_killed_after_one_run(const std::filesystem::path& dir) {
  SweepOptions o = new_sweep(dir, kLrGrid);
  o.parallel = 1;  // one run at a time: the kill after the first leaves exactly one finished
  struct Killed {};
  EXPECT_THROW(run_sweep(o, [](const RunResult&, const SweepProgress&) { throw Killed{}; }), Killed);
  return o;
}

// A stop request (Ctrl-C in the CLI) ends a sweep resumably: no run starts after it, a run in flight stops after its
// epoch with that epoch's checkpoint, unrecorded, and the resume continues it from there (its earlier rows kept byte
// for byte). Here the 1-epoch run finishing asks for the stop while the 200-epoch one trains beside it.
TEST(SweepRunner, AStopRequestEndsTheSweepAndItsResumeContinuesTheStoppedRun) {
  const std::filesystem::path dir = test::temp_dir("sweep-stop");
  SweepOptions o = new_sweep(dir, "[sweep]\ngrid = { \"train.epochs\" = [1, 200] }\n");
  o.parallel = 2;
  std::vector<RunResult> stopped;
  {
    const test::StopRequestCleared cleared;
    stopped = run_sweep(o, [](const RunResult&, const SweepProgress&) { request_stop(); });
  }
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0].name, "train.epochs=1");
  EXPECT_EQ(stopped[0].status, "done");
  EXPECT_EQ(read_state(o.out_dir).size(), 1u);
  const std::filesystem::path long_run = o.out_dir / "train.epochs=200";
  const std::string rows_at_stop = read_file(long_run / "metrics.jsonl");
  const std::int64_t epoch_at_stop = train::read_checkpoint(train::latest_checkpoint(long_run)).epoch;
  ASSERT_GE(epoch_at_stop, 1);
  ASSERT_LT(epoch_at_stop, 200) << "the long run finished before the stop: the test proves nothing";

  const std::vector<RunResult> resumed = resume_sweep(o.out_dir);
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[1].status, "done");
  EXPECT_EQ(resumed[1].epochs, 200) << "the epochs of both attempts";
  EXPECT_TRUE(read_file(long_run / "metrics.jsonl").starts_with(rows_at_stop)) << "continued, not started over";
}

// The plan ("one run at a time on the CPU", the sweep's second line) was printed with the first run's result, so
// nothing showed between the banner and the end of the first run (or ever, for a sweep stopped in its first runs).
// The start is reported as the runs start: once, before any ends, with what an earlier attempt finished.
TEST(SweepRunner, TheStartIsReportedBeforeAnyRunEnds) {
  const std::filesystem::path dir = test::temp_dir("sweep-start");
  SweepOptions o = new_sweep(dir, kLrGrid);
  o.parallel = 1;
  std::vector<std::string> events;
  const RunCallback ended = [&](const RunResult& r, const SweepProgress&) { events.push_back("ended " + r.name); };
  const StartCallback started = [&](const SweepProgress& p) {
    events.push_back(fmt::format("start: {}; {} running, {} finished, {} earlier, of {}", p.workers, p.running,
                                 p.finished, p.finished_earlier, p.total));
  };
  struct Killed {};
  EXPECT_THROW(run_sweep(o, [&](const RunResult& r, const SweepProgress& p) {
                 ended(r, p);
                 throw Killed{};
               }, started), Killed);
  EXPECT_THAT(events, ElementsAre("start: one run at a time on the CPU; 0 running, 0 finished, 0 earlier, of 2",
                                  "ended optim.lr=0.1"));
  events.clear();
  EXPECT_EQ(resume_sweep(o.out_dir, 1, ended, started).size(), 2u);
  EXPECT_THAT(events, ElementsAre("start: one run at a time on the CPU; 0 running, 1 finished, 1 earlier, of 2",
                                  "ended optim.lr=0.2"));
  events.clear();
  EXPECT_EQ(resume_sweep(o.out_dir, 1, ended, started).size(), 2u);
  EXPECT_TRUE(events.empty()) << "nothing left to start: " << events.front();
}

// A sweep resumed after its config file was edited would put runs of two models under one grid.
// The file is compared as a config: what the edit changed is named, key by key, with both values.
TEST(SweepRunner, AResumeRefusesAConfigChangedSinceTheSweepBeganNamingEachKey) {
  const std::filesystem::path dir = test::temp_dir("sweep-edited");
  const SweepOptions o = sweep_killed_after_one_run(dir);
  std::ofstream(o.config_path, std::ios::app) << "[optim]\nmomentum = 0.5\nnesterov = true\n";
  EXPECT_THAT(test::error_message([&] { resume_sweep(o.out_dir, 0); }),
              AllOf(HasSubstr(o.config_path.string()), HasSubstr("optim.momentum (0.9 when the sweep began, 0.5 now)"),
                    HasSubstr("optim.nesterov (false when the sweep began, true now)"), Not(HasSubstr("optim.lr"))));
  std::filesystem::remove(o.config_path);
  EXPECT_THAT(test::error_message([&] { resume_sweep(o.out_dir, 0); }),
              AllOf(HasSubstr(o.config_path.string()), HasSubstr("does not exist")));
  EXPECT_EQ(read_state(o.out_dir).size(), 1u);  // nothing trained
  write_config(dir, kLrGrid);                   // restored: the sweep finishes
  EXPECT_EQ(resume_sweep(o.out_dir, 0).size(), 2u);
}

// What does not change the runs does not stop a resume: comments, layout, key order, a value
// written another way, a default written out, the swept key's own value and the [sweep] table
// (the grid is the one the sweep began with).
TEST(SweepRunner, AResumeAcceptsAConfigEditedWithoutChangingWhatTheRunsTrain) {
  const std::filesystem::path dir = test::temp_dir("sweep-reformatted");
  const SweepOptions o = sweep_killed_after_one_run(dir);
  std::ofstream(o.config_path) << fmt::format(
      "# the same sweep, written again\n[train]\nbatch_size = 1_00  # 100\nepochs = 1\n\n"
      "[device]\nname = 'cpu'\n[data]\ntest_limit = 0xC8\ntrain_limit = 600\ndir = \"{}\"\n"
      "[model]\nhidden = [ 16, ]\n[optim]\nlr = 0.5\nmomentum = 0.9\n[sweep]\nseeds = [7]\n",
      test::data_dir().string());
  EXPECT_EQ(resume_sweep(o.out_dir, 0).size(), 2u);
}

TEST(SweepRunner, RunsSideBySideGiveWhatTheyGiveOneAfterAnother) {
  const std::filesystem::path dir = test::temp_dir("sweep-parallel");
  SweepOptions o;
  o.config_path = write_config(dir, "[sweep]\ngrid = { \"optim.lr\" = [0.05, 0.1] }\nseeds = [0, 1]\n");
  o.spec = read_sweep_table(o.config_path);
  o.overrides = {"device.threads=1"};  // the same thread count either way, so the same sums
  ASSERT_EQ(expand(o.spec).size(), 4u);
  expect_side_by_side_equals_alone(o, dir, 3, "3 runs at a time on the CPU");
}

TEST(SweepRunner, ABadKeyOrValueIsRejectedBeforeAnythingTrains) {
  const std::filesystem::path dir = test::temp_dir("sweep-bad");
  SweepOptions o;
  o.config_path = write_config(dir, "");
  o.out_dir = dir / "out";
  o.spec.axes = {{"optim.learning_rate", {"0.1"}}};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }), HasSubstr("optim.learning_rate"));
  o.spec.axes = {{"optim.lr", {"0.1", "-1"}}};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }), HasSubstr("optim.lr"));
  EXPECT_FALSE(std::filesystem::exists(o.out_dir / "sweep.json"));
  EXPECT_THAT(test::error_message([&] { read_sweep_table(write_config(dir, "[sweep]\ngrids = {}\n")); }),
              HasSubstr("unknown key 'sweep.grids'"));
}

// The error names where the bad value was given: --grid, --seeds or the file's [sweep] table, not --set.
TEST(SweepRunner, ABadValueIsNamedWhereItWasGiven) {
  const std::filesystem::path dir = test::temp_dir("sweep-origin");
  SweepOptions o;
  o.config_path = write_config(dir, "");
  o.out_dir = dir / "out";
  o.spec.axes = {parse_grid_option("optim.lrr=0.1")};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }), HasSubstr("--grid 'optim.lrr=0.1': unknown key"));
  o.spec.axes = {};
  o.spec.seeds = {-1};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }), HasSubstr("--seeds 'seed=-1'"));
  const std::filesystem::path file = write_config(dir, "[sweep]\ngrid = { \"optim.lr\" = [0.1, -1.0] }\n");
  o.config_path = file;
  o.spec = read_sweep_table(file);
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }),
              AllOf(HasSubstr(file.string() + ": sweep.grid 'optim.lr=-1.0'"), HasSubstr("> 0")));  // (as written)
  o.overrides = {"optim.momentum=-1"};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }), HasSubstr("--set 'optim.momentum=-1'"));
  // A value that another key makes impossible: the grid's value is named, not only the config file.
  o.overrides = {"optim.momentum=0"};
  o.spec = {};
  o.spec.axes = {parse_grid_option("optim.nesterov=false,true")};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }),
              HasSubstr(file.string() + " with --grid 'optim.nesterov=true' and --set overrides: optim.nesterov = "
                                        "true requires optim.momentum > 0"));
  // The file's own [sweep] table: named without the file again, and the seed (in no such check) left out.
  o.config_path = write_config(dir, "[sweep]\ngrid = { \"optim.nesterov\" = [true] }\nseeds = [0]\n");
  o.spec = read_sweep_table(o.config_path);
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }),
              HasSubstr(o.config_path.string() + " with sweep.grid 'optim.nesterov=true' and --set overrides: "));
  EXPECT_FALSE(std::filesystem::exists(o.out_dir / "sweep.json"));
}

// Two runs of one name would train into one folder, the second overwriting the first: refused.
TEST(SweepGrid, AValueOrSeedListedTwiceIsRefused) {
  SweepSpec spec;
  spec.axes = {{"optim.lr", {"0.1", "0.1"}}};
  EXPECT_THAT(test::error_message([&] { expand(spec); }), HasSubstr("optim.lr lists one value twice (0.1 and 0.1)"));
  spec.axes = {{"optim.lr", {"0.1", "0.2"}}};
  spec.seeds = {0, 0};
  EXPECT_THAT(test::error_message([&] { expand(spec); }), HasSubstr("two runs would be named 'optim.lr=0.1,seed=0'"));
  spec.seeds = {0, 1};
  EXPECT_EQ(expand(spec).size(), 4u);
  EXPECT_THAT(test::error_message([] { parse_seeds(""); }), HasSubstr("no seeds"));
  // One value written two ways trained twice under two names; two values that name one folder were "listed twice".
  spec.axes = {{"optim.lr", {"0.1", "1e-1"}}};
  EXPECT_THAT(test::error_message([&] { expand(spec); }),
              HasSubstr("--grid: optim.lr lists one value twice (0.1 and 1e-1)"));
  spec.axes = {{"data.dir", {"\"a/b\"", "\"a_b\""}}};
  EXPECT_THAT(test::error_message([&] { expand(spec); }), HasSubstr("would name one run folder ('data.dir=a_b')"));
  spec.axes = {{"model.hidden", {"[128, 64]", "[128,64]"}}};
  EXPECT_THAT(test::error_message([&] { expand(spec); }), HasSubstr("lists one value twice"));
}

// Grids that could not do what they say: seeds from the grid that --seeds would override (two runs of one
// seed under two names), a key the sweep sets for every run, a name no folder may have.
TEST(SweepGrid, AGridTheRunsWouldNotFollowIsRefusedNamingTheOptions) {
  SweepSpec spec;
  spec.axes = {{"seed", {"1", "2"}}};
  spec.seeds = {0, 1};
  EXPECT_THAT(test::error_message([&] { expand(spec); }), HasSubstr("--grid: seed and --seeds both give the seeds"));
  spec.seeds = {};
  EXPECT_EQ(expand(spec).size(), 2u);  // the grid alone gives them
  spec.axes = {{"output.dir", {"\"a\"", "\"b\""}}};
  EXPECT_THAT(test::error_message([&] { expand(spec); }), HasSubstr("output.dir cannot be swept"));
  spec.axes = {};
  for (int i = 0; i < 12; ++i) spec.axes.push_back({fmt::format("key.number_{:02}", i), {"0.000123456789"}});
  EXPECT_THAT(test::error_message([&] { expand(spec); }), HasSubstr("longer than the 255 a folder name may have"));
}

// --grid "model.activation='relu','gelu'" (TOML literal strings) named its folders model.activation='relu': a folder
// is named by the parsed value, whichever quotes it was written with, and what no folder name should hold is
// replaced; the run still gets the value as written.
TEST(SweepGrid, FolderNamesComeFromTheParsedValueWithoutQuotes) {
  SweepSpec spec;
  spec.axes = {parse_grid_option("model.activation='relu','gelu'")};
  const std::vector<SweepRun> runs = expand(spec);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].name, "model.activation=relu");
  EXPECT_EQ(runs[1].point, "model.activation=gelu");
  EXPECT_THAT(runs[0].overrides, ElementsAre("model.activation='relu'"));
  // Single quotes keep their commas as double quotes do; escapes are read; '/' and a tab are not kept.
  EXPECT_THAT(parse_grid_option("data.dir='a,b','c'").values, ElementsAre("'a,b'", "'c'"));
  EXPECT_THAT(test::error_message([] { parse_grid_option("data.dir='a,b"); }), HasSubstr("a ''' is never closed"));
  spec.axes = {{"data.dir", {"'x/y'", "\"it's\"", "\"a\\tb\""}}};
  const std::vector<SweepRun> dirs = expand(spec);
  EXPECT_EQ(dirs[0].name, "data.dir=x_y");
  EXPECT_EQ(dirs[1].name, "data.dir=it's");
  EXPECT_EQ(dirs[2].name, "data.dir=a_b");
  // Unique still: one value in two quotes is listed twice, two that name one folder are refused.
  spec.axes = {{"model.activation", {"'relu'", "\"relu\""}}};
  EXPECT_THAT(test::error_message([&] { expand(spec); }), HasSubstr("lists one value twice"));
  spec.axes = {{"data.dir", {"'a/b'", "\"a_b\""}}};
  EXPECT_THAT(test::error_message([&] { expand(spec); }), HasSubstr("would name one run folder ('data.dir=a_b')"));
}

// --set sweep.seeds=[0,1] was refused as an unknown key with the hint 'seed' (which would give every run one seed):
// the [sweep] table is what the sweep varies, given on the command line by --seeds and --grid, and the error says
// so. A grid over it is refused too (the runs would never see it).
TEST(SweepRunner, SetOrGridOnTheSweepTableIsRefusedNamingWhatToUseInstead) {
  const std::filesystem::path dir = test::temp_dir("sweep-set-table");
  SweepOptions o = new_sweep(dir, kLrGrid);
  o.overrides = {"sweep.seeds=[0, 1]"};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }),
              AllOf(HasSubstr("--set 'sweep.seeds=[0, 1]': sweep.seeds is a key of the config file's [sweep] table"),
                    HasSubstr("--seeds 0,1,2"), Not(HasSubstr("did you mean"))));
  o.overrides = {"sweep.grid.optim.lr=[0.3]"};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }), HasSubstr("--grid KEY=V1,V2"));
  EXPECT_FALSE(std::filesystem::exists(o.out_dir));  // refused before the folder
  o.overrides = {};
  o.spec.axes = {parse_grid_option("sweep.seeds=0,1")};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }),
              HasSubstr("--grid: sweep.seeds cannot be swept: it is a key of the [sweep] table"));
}

// A second process on a sweep's folder (a resume while the sweep runs, another sweep given the same --out)
// deleted the runs the first was writing: refused at once now, naming the folder.
TEST(SweepRunner, ASecondProcessOnASweepsFolderIsRefused) {
  const std::filesystem::path dir = test::temp_dir("sweep-locked");
  const SweepOptions o = sweep_killed_after_one_run(dir);
  {
    const train::RunDirectoryLock other_process(o.out_dir);  // a separate open file description: another holder
    EXPECT_THAT(test::error_message([&] { resume_sweep(o.out_dir, 0); }),
                AllOf(HasSubstr(o.out_dir.string()), HasSubstr("in use by another sprintnet process (a training, a resume or a sweep")));
    SweepOptions another = o;
    EXPECT_THAT(test::error_message([&] { run_sweep(another); }), HasSubstr("in use by another sprintnet process"));
  }
  EXPECT_EQ(read_state(o.out_dir).size(), 1u);  // untouched by the refused ones
  EXPECT_EQ(resume_sweep(o.out_dir, 0).size(), 2u);
}

// --out at a folder that holds something else: its files would be overwritten, a folder of a run's name deleted.
TEST(SweepRunner, ANewSweepNeedsANewOrEmptyFolder) {
  const std::filesystem::path dir = test::temp_dir("sweep-not-empty");
  SweepOptions o = new_sweep(dir, kLrGrid, "mine");
  std::filesystem::create_directories(o.out_dir / "optim.lr=0.1");
  std::ofstream(o.out_dir / "optim.lr=0.1" / "precious.txt") << "keep me\n";
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }), HasSubstr("holds other files and no sweep"));
  EXPECT_TRUE(std::filesystem::exists(o.out_dir / "optim.lr=0.1" / "precious.txt"));
  std::filesystem::remove_all(o.out_dir);
  std::filesystem::create_directory(o.out_dir);  // empty: fine
  EXPECT_EQ(run_sweep(o).size(), 2u);
}

// A folder with a quote or a backslash in its name: the runs went to another folder (the path was pasted into
// TOML text), while the summary said they were done.
TEST(SweepRunner, RunsGoIntoTheSweepsFolderWhateverItsName) {
  const std::filesystem::path dir = test::temp_dir("sweep-odd-name");
  const SweepOptions o = new_sweep(dir, "[sweep]\nseeds = [0]\n", "a \"quoted\" \\b folder");
  const std::vector<RunResult> results = run_sweep(o);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, "done") << results[0].error;
  EXPECT_TRUE(std::filesystem::exists(o.out_dir / "seed=0" / "model.safetensors"));
}

// A resume rewrites the summary from every finished run (a kill between sweep.json and summary.csv left it
// short for good), and trains again a done run whose folder was deleted, counting the others as earlier.
TEST(SweepRunner, AResumeRepairsTheSummaryAndRetrainsADeletedRun) {
  const std::filesystem::path dir = test::temp_dir("sweep-repair");
  SweepOptions o = new_sweep(dir, kLrGrid);
  o.parallel = 1;
  ASSERT_EQ(run_sweep(o).size(), 2u);
  std::filesystem::remove(o.out_dir / "summary.csv");
  std::filesystem::remove_all(o.out_dir / "optim.lr=0.2");
  std::vector<std::string> trained;
  std::size_t earlier = 0;
  EXPECT_EQ(resume_sweep(o.out_dir, 1, [&](const RunResult& r, const SweepProgress& p) {
              trained.push_back(r.name);
              earlier = p.finished_earlier;
            }).size(), 2u);
  EXPECT_EQ(trained, std::vector<std::string>{"optim.lr=0.2"});
  EXPECT_EQ(earlier, 1u);
  EXPECT_TRUE(std::filesystem::exists(o.out_dir / "optim.lr=0.2" / "model.safetensors"));
  EXPECT_THAT(read_file(o.out_dir / "summary.csv"), AllOf(HasSubstr("optim.lr=0.1"), HasSubstr("optim.lr=0.2")));
  std::filesystem::remove(o.out_dir / "summary.md");  // nothing left to train: still rewritten
  std::ofstream(o.out_dir / ".sweep.json.tmp.12414.15") << "{";  // a write a SIGKILL cut short
  EXPECT_EQ(resume_sweep(o.out_dir, 1).size(), 2u);
  EXPECT_TRUE(std::filesystem::exists(o.out_dir / "summary.md"));
  EXPECT_FALSE(std::filesystem::exists(o.out_dir / ".sweep.json.tmp.12414.15"));
}

// data.dir = "data" is read from the working directory: resumed from another one, the runs left would read
// other files than the finished ones did.
TEST(SweepRunner, AResumeFromAnotherWorkingDirectoryWithRelativeDataIsRefused) {
  const std::filesystem::path dir = std::filesystem::absolute(test::temp_dir("sweep-cwd"));
  std::filesystem::create_directory_symlink(std::filesystem::absolute(test::data_dir()), dir / "data");
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  SweepOptions o = new_sweep(dir, kLrGrid);
  o.overrides = {"data.dir=\"data\""};
  o.parallel = 1;
  struct Killed {};
  EXPECT_THROW(run_sweep(o, [](const RunResult&, const SweepProgress&) { throw Killed{}; }), Killed);
  std::filesystem::current_path(before);
  EXPECT_THAT(test::error_message([&] { resume_sweep(o.out_dir, 0); }),
              AllOf(HasSubstr("the sweep began in " + dir.string()), HasSubstr("data.dir = \"data\" is relative")));
  std::filesystem::current_path(dir);
  const std::size_t runs = resume_sweep(o.out_dir, 0).size();
  std::filesystem::current_path(before);
  EXPECT_EQ(runs, 2u);
}

}  // namespace
}  // namespace sprintnet::sweep
