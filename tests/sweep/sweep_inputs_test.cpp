// What a sweep refuses of what it is given, before anything trains, and where the error says it was given: a grid
// of more runs than a sweep may have (counted before one is listed), --set keys the runs would not take, the
// [sweep] table's floats kept floats, its config file checked as `train` checks one, and the seeds named by the
// option that gave them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sprintnet/io/read_file.h"
#include "sprintnet/sweep/grid.h"
#include "sprintnet/sweep/summary.h"
#include "sprintnet/sweep/sweep_spec.h"
#include "sprintnet/sweep/sweep_runner.h"
#include "support/error_message.h"
#include "support/test_util.h"
#include "tiny_sweep.h"

namespace sprintnet::sweep {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// `count` distinct values of one axis: "1", "2", ...
GridAxis axis_of(const std::string& key, std::size_t count) {
  GridAxis axis{key, {}};
  for (std::size_t i = 1; i <= count; ++i) axis.values.push_back(std::to_string(i));
  return axis;
}

// Five axes of 40 values (102 400 000 runs) filled the host's memory, listing the runs before counting them. The
// count comes first now, named with each axis's: past kMaxSweepRuns (here 160 000, which the old code listed
// without a word), and past 2^64, where the product overflows; exactly the limit is a sweep.
TEST(SweepInputs, AGridOfMoreRunsThanTheLimitIsRefusedBeforeItsRunsAreListed) {
  SweepSpec spec;
  spec.axes = {axis_of("train.epochs", 400), axis_of("train.batch_size", 400)};
  EXPECT_THAT(test::error_message([&] { expand(spec); }),
              AllOf(HasSubstr("the grid makes 160000 runs (train.epochs (400 values, --grid) x train.batch_size (400 "
                              "values, --grid)), more than the 100000 a sweep may have")));
  spec.axes = {axis_of("train.epochs", 40), axis_of("train.batch_size", 40), axis_of("train.eval_every", 40),
               axis_of("train.log_every", 40), axis_of("train.eval_batch_size", 40)};
  spec.seeds = {0, 1};
  spec.seeds_origin = "--seeds";
  EXPECT_THAT(test::error_message([&] { expand(spec); }),
              AllOf(HasSubstr("the grid makes 204800000 runs"), HasSubstr("seeds (2, --seeds)")));
  spec.seeds.clear();
  spec.axes.clear();
  for (int i = 0; i < 65; ++i) spec.axes.push_back(axis_of(fmt::format("key.number_{:02}", i), 2));  // 2^65 runs
  EXPECT_THAT(test::error_message([&] { expand(spec); }), HasSubstr("the grid makes over 2^64 runs"));
  spec.axes = {axis_of("train.epochs", 100), axis_of("train.batch_size", 1000)};
  EXPECT_EQ(expand(spec).size(), kMaxSweepRuns);
}

// --set optim.lr=0.9 beside --grid optim.lr=0.1,0.05 trained 0.1 and 0.05; --set seed=7 beside --seeds trained
// the seeds; --set output.dir, output.name and output.progress were ignored (the sweep sets them for every run),
// all without a word. Each is refused, naming the key and why, before the sweep's folder exists.
TEST(SweepInputs, ASetOfAKeyTheRunsWouldNotTakeIsRefused) {
  const std::filesystem::path dir = test::temp_dir("sweep-inputs-set");
  SweepOptions o = new_sweep(dir, "[sweep]\ngrid = { \"optim.lr\" = [0.1, 0.05] }\n");
  o.overrides = {"optim.lr=0.9"};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }),
              AllOf(HasSubstr("--set 'optim.lr=0.9': optim.lr is swept (" + o.config_path.string() + ": sweep.grid)"),
                    HasSubstr("each run takes its grid value")));
  o.overrides = {"seed=7"};
  o.spec.seeds = {0, 1};
  o.spec.seeds_origin = "--seeds";
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }),
              HasSubstr("--set 'seed=7': the seeds (--seeds) give every run its seed"));
  o.spec.seeds.clear();
  o.overrides = {"output.dir=\"elsewhere\""};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }),
              AllOf(HasSubstr("--set 'output.dir=\"elsewhere\"'"), HasSubstr("give the sweep's folder with --out")));
  o.overrides = {"output.name=\"mine\""};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }), HasSubstr("--set 'output.name=\"mine\"': the sweep names"));
  o.overrides = {"output.progress=\"bar\""};
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }), HasSubstr("--set 'output.progress=\"bar\"': a sweep's runs"));
  // The same checks when the sweep's file is read (the command line does that first): not the config's "unknown
  // key" for a key of the [sweep] table.
  EXPECT_THAT(test::error_message([&] { read_sweep_table(o.config_path, {"output.name=\"mine\""}); }),
              HasSubstr("the sweep names"));
  EXPECT_FALSE(std::filesystem::exists(o.out_dir));
  o.overrides = {"optim.momentum=0.5", "output.csv=false"};  // keys the runs do take
  EXPECT_EQ(run_sweep(o).size(), 2u);
}

// A sweep started before such --set were refused could save one in its spec, and --resume takes no --set to take it
// back: the resume refused it with advice it could not follow. It drops the --set (no run ever took it) with a word.
TEST(SweepInputs, AResumeDropsASavedSetTheRunsNeverTook) {
  const std::filesystem::path dir = test::temp_dir("sweep-inputs-old-set");
  SweepOptions o = new_sweep(dir, "[sweep]\ngrid = { \"optim.lr\" = [0.1, 0.05] }\n");
  o.parallel = 1;
  std::filesystem::create_directories(o.out_dir);
  o.overrides = {"optim.lr=0.9", "output.name=\"mine\"", "optim.momentum=0.5"};
  write_sweep_spec(o);  // as the older sweep wrote it
  write_state(o.out_dir, {});
  testing::internal::CaptureStderr();
  const std::vector<RunResult> results = resume_sweep(o.out_dir, 1);
  const std::string said = testing::internal::GetCapturedStderr();
  ASSERT_EQ(results.size(), 2u);
  for (const RunResult& r : results) EXPECT_EQ(r.status, "done") << r.error;
  EXPECT_THAT(said, AllOf(HasSubstr("sprintnet: warning: --set 'optim.lr=0.9': optim.lr is swept"),
                          HasSubstr("--set 'output.name=\"mine\"': the sweep names"),
                          HasSubstr("ignored, as it was when this sweep started")));
  EXPECT_THAT(read_file(o.out_dir / "optim.lr=0.05" / "config.toml"), HasSubstr("momentum = 0.5"));  // still taken
}

// A grid value holding an inline table whose key has 150 000 dotted parts: the grid's own reading of its values
// (for folder names and duplicates) went to the TOML reader unscanned, whose recursion overflows the stack there
// (io/toml_key_depth.h). It is taken as plain text now, and refused as an error (here for the folder name it makes).
TEST(SweepInputs, AGridValueWithADeepKeyIsRefusedNotACrash) {
  const std::filesystem::path dir = test::temp_dir("sweep-inputs-deep");
  SweepOptions o = new_sweep(dir, "");
  std::string deep = "{";
  for (int i = 0; i < 150000; ++i) deep += "a.";
  deep += "b = 1}";
  o.spec.axes.push_back({"optim.lr", {deep, "0.1"}, "--grid"});
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }), HasSubstr("longer than the 255 a folder name may have"));
  EXPECT_FALSE(std::filesystem::exists(o.out_dir));
}

// `[sweep] grid = { "train.epochs" = [1.0, 2.0] }` trained 1 and 2 epochs (its floats written as "1" and "2"),
// where the file, --grid and --set refuse a float for an integer key; [1, 1.0] was "listed twice (1 and 1)". A
// value keeps its TOML form, so the key's type check applies and errors show the value as written.
TEST(SweepInputs, TheTablesFloatsStayFloats) {
  const std::filesystem::path dir = test::temp_dir("sweep-inputs-floats");
  SweepOptions o = new_sweep(dir, "[sweep]\ngrid = { \"train.epochs\" = [1.0, 2.0], \"optim.lr\" = [1.0, 2e-1] }\n");
  ASSERT_EQ(o.spec.axes.size(), 2u);
  ASSERT_EQ(o.spec.axes[0].key, "optim.lr");  // (a TOML table's keys in their order)
  EXPECT_THAT(o.spec.axes[0].values, ElementsAre("1.0", "0.2"));
  EXPECT_THAT(o.spec.axes[1].values, ElementsAre("1.0", "2.0"));
  EXPECT_THAT(test::error_message([&] { run_sweep(o); }),
              AllOf(HasSubstr("sweep.grid 'train.epochs=1.0'"), HasSubstr("expected an integer, got a float (1.0)")));
  EXPECT_FALSE(std::filesystem::exists(o.out_dir));
  const SweepSpec twice = read_sweep_table(write_config(dir, "[sweep]\ngrid = { \"train.epochs\" = [1, 1.0] }\n"));
  EXPECT_THAT(test::error_message([&] { expand(twice); }), HasSubstr("train.epochs lists one value twice (1 and 1.0)"));
  // Nested in an array too.
  const SweepSpec hidden = read_sweep_table(write_config(dir, "[sweep]\ngrid = { \"model.hidden\" = [[16.0]] }\n"));
  EXPECT_THAT(hidden.axes[0].values, ElementsAre("[ 16.0 ]"));
}

// A missing config file or a device said "TOML syntax error: File could not be opened for reading" (the [sweep]
// table was read before load_config checked the file), and a syntax error had no line or column. They are
// load_config's errors now, as `sprintnet train` gives them.
TEST(SweepInputs, TheConfigFileIsCheckedAsTrainChecksIt) {
  const std::filesystem::path dir = test::temp_dir("sweep-inputs-file");
  const std::filesystem::path missing = dir / "missing.toml";
  EXPECT_THAT(test::error_message([&] { read_sweep_table(missing); }),
              AllOf(HasSubstr("config file '" + missing.string() + "' does not exist"), Not(HasSubstr("TOML"))));
  EXPECT_THAT(test::error_message([&] { read_sweep_table(dir); }), HasSubstr("is a directory"));
  EXPECT_THAT(test::error_message([&] { read_sweep_table("/dev/null"); }),
              HasSubstr("config file '/dev/null' is not a regular file"));
  const std::filesystem::path bad = dir / "bad.toml";
  std::ofstream(bad) << "[train]\nepochs = 2\n[sweep]\nseeds = [0, 1\n";
  EXPECT_THAT(test::error_message([&] { read_sweep_table(bad); }), HasSubstr(bad.string() + ":4:"));
  EXPECT_THAT(test::error_message([&] { read_sweep_table(bad); }), HasSubstr("TOML syntax error"));
}

// With seeds in the file's [sweep] table, `--seeds 5 --grid seed=1,2` blamed the file's seeds (the command line
// replaced the seeds but not where they came from).
TEST(SweepInputs, SeedsFromTheCommandLineAreNamedSo) {
  const std::filesystem::path dir = test::temp_dir("sweep-inputs-seeds");
  SweepSpec spec = read_sweep_table(write_config(dir, "[sweep]\nseeds = [0, 1]\n"));
  EXPECT_THAT(spec.seeds_origin, HasSubstr("sweep.seeds"));
  SweepSpec given = spec;
  apply_command_line(given, {"seed=1,2"}, "5");
  EXPECT_THAT(given.seeds, ElementsAre(5));
  EXPECT_THAT(test::error_message([&] { expand(given); }),
              AllOf(HasSubstr("--grid: seed and --seeds both give the seeds"), Not(HasSubstr("sweep.seeds"))));
  apply_command_line(spec, {"seed=1,2"}, std::nullopt);  // the file's seeds stay, and are named
  EXPECT_THAT(test::error_message([&] { expand(spec); }), HasSubstr("--grid: seed and " + dir.string()));
  EXPECT_THAT(test::error_message([&] { apply_command_line(spec, {"optim.lr=0.1", "optim.lr=0.2"}, std::nullopt); }),
              HasSubstr("--grid optim.lr is given twice"));
}

}  // namespace
}  // namespace sprintnet::sweep
