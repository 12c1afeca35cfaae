// The sweep's pictures (plot_sweep.py) from a summary.csv and sweep.json that sprintnet's own writers made, with
// grid values that hold what a value may: ';' (summary.csv's overrides separator), ',', '"', a newline, '$'.
#include "sprintnet/sweep/sweep_plot.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sprintnet/core/random.h"
#include "sprintnet/io/shell_word.h"
#include "sprintnet/plot/python_job.h"
#include "sprintnet/plot/run_curves.h"
#include "sprintnet/sweep/summary.h"
#include "scoped_path.h"
#include "support/test_util.h"

namespace sprintnet::sweep {
namespace {

const std::string kPngSignature("\x89PNG\r\n\x1a\n", 8);

// TOML value texts as `--grid` and a [sweep] table give them. A bare string (a string key takes text that is not a
// TOML value as it is) with ';'; a TOML string holding ";seed=1", which no split of the overrides column can tell
// from an override; ',' and '"' (a quoted CSV field); a newline (a multi-line string); "$...$", which matplotlib
// would read as a formula and fail on.
const std::vector<std::string> kDirs = {"/tmp/a;b", "\"/tmp/c;seed=1\"", "\"x,\\\"y\\\"\"", "\"\"\"one\ntwo\"\"\"",
                                        "'/data/$\\bad$'"};
const std::vector<std::string> kHidden = {"[16, 16]", "[32]"};

// A finished sweep over data.dir x model.hidden x 2 seeds, written by summary.cpp as a sweep writes it, with random
// accuracies and each run's metrics.jsonl (the best runs' loss curves read them).
std::filesystem::path fake_sweep(const std::string& name) {
  const std::filesystem::path dir = test::temp_dir(name);
  Generator gen(test::test_seed());
  std::vector<RunResult> results;
  for (const std::string& data_dir : kDirs) {
    for (const std::string& hidden : kHidden) {
      for (const int seed : {0, 1}) {
        RunResult r;
        r.name = fmt::format("run{}", results.size());
        r.point = fmt::format("point{}", results.size() / 2);
        r.overrides = {"data.dir=" + data_dir, "model.hidden=" + hidden, fmt::format("seed={}", seed)};
        r.status = "done";
        r.final_accuracy = r.best_accuracy = gen.uniform(0.8, 0.99);
        r.final_loss = gen.uniform(0.05, 0.5);
        r.epochs = 2;
        std::filesystem::create_directories(dir / r.name);
        std::ofstream(dir / r.name / "metrics.jsonl")
            << fmt::format("{{\"epoch\":1,\"train_loss\":{}}}\n{{\"epoch\":2,\"train_loss\":{}}}\n", 2 * r.final_loss,
                           r.final_loss);
        results.push_back(r);
      }
    }
  }
  write_state(dir, results);
  write_summary(dir, results);
  return dir;
}

void expect_pictures(const std::filesystem::path& dir) {
  for (const char* picture : {"accuracy_vs_data.dir.png", "accuracy_vs_model.hidden.png", "best_loss_curves.png"}) {
    EXPECT_EQ(test::file_bytes(dir / picture).substr(0, 8), kPngSignature) << picture;
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_FALSE(entry.path().string().ends_with(".tmp.png")) << entry.path();  // drawn aside, then renamed
  }
}

TEST(SweepPlot, DrawsGridValuesHoldingSemicolonsQuotesNewlinesAndDollars) {
  const std::string python = plot::find_python_with_matplotlib();
  if (python.empty()) GTEST_SKIP() << "python3 with matplotlib is not installed (apt install python3-matplotlib)";
  const std::filesystem::path dir = fake_sweep("sweep-plot-values");
  const std::filesystem::path script = write_plot_script(dir);
  std::string errors;
  ASSERT_EQ(plot::run_quietly({python, script.string(), dir.string()}, &errors), 0) << errors;
  expect_pictures(dir);
  // Without sweep.json (its overrides kept apart), the overrides column is split before each "key=": a value
  // holding ";seed=1" gets a wrong label, but every picture is still drawn.
  std::filesystem::remove(dir / "sweep.json");
  for (const char* picture : {"accuracy_vs_data.dir.png", "accuracy_vs_model.hidden.png", "best_loss_curves.png"}) {
    std::filesystem::remove(dir / picture);
  }
  ASSERT_EQ(plot::run_quietly({python, script.string(), dir.string()}, &errors), 0) << errors;
  expect_pictures(dir);
}

// Without sh on PATH (nor python3), /usr/bin/python3 draws the pictures in the background all the same.
TEST(SweepPlot, DrawsInTheBackgroundWithoutShOrPythonOnPath) {
  const test::ScopedPath path("/nonexistent");
  if (plot::find_python_with_matplotlib() != "/usr/bin/python3") GTEST_SKIP() << "/usr/bin/python3 has no matplotlib";
  const std::filesystem::path dir = fake_sweep("sweep-plot-no-sh");
  const std::string message = plot_sweep_in_background(dir);
  ASSERT_TRUE(message.starts_with("pictures: ")) << message;
  for (int i = 0; i < 600 && !std::filesystem::exists(dir / "best_loss_curves.png"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  expect_pictures(dir);
}

// The command to draw the pictures again is pasted into a shell: a folder with a space or a quote is quoted.
TEST(SweepPlot, TheRedrawCommandIsShellQuoted) {
  const std::filesystem::path dir = test::temp_dir("sweep plot it's");
  const std::string message = plot_sweep_in_background(dir);
  EXPECT_NE(message.find(fmt::format("then run python3 {} {}", shell_quoted((dir / "plot_sweep.py").string()),
                                     shell_quoted(dir.string()))),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace sprintnet::sweep
