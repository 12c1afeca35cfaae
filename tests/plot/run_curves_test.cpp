#include "sprintnet/plot/run_curves.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <chrono>

#include "sprintnet/core/error.h"
#include "support/test_util.h"

namespace sprintnet::plot {
namespace {

// A run directory with three epochs of metrics; the last row has no test numbers (as with test_every > 1).
std::filesystem::path fake_run(const std::string& name, double scale) {
  const std::filesystem::path dir = test::temp_dir(name);
  std::ofstream out(dir / "metrics.jsonl");
  out << "{\"step\":10,\"epoch\":1,\"train_loss\":" << 1.0 * scale
      << ",\"test_loss\":0.9,\"test_accuracy\":0.8,\"epoch_time_s\":0.1,\"samples_per_s\":1000,\"lr\":0.1}\n"
      << "{\"step\":20,\"epoch\":2,\"train_loss\":" << 0.5 * scale
      << ",\"test_loss\":0.6,\"test_accuracy\":0.9,\"epoch_time_s\":0.1,\"samples_per_s\":1000,\"lr\":0.05}\n"
      << "{\"step\":30,\"epoch\":3,\"train_loss\":" << 0.3 * scale
      << ",\"test_loss\":null,\"test_accuracy\":null,\"epoch_time_s\":0.1,\"samples_per_s\":1000,\"lr\":0.01}\n";
  return dir;
}

TEST(RunCurves, DrawsSeveralRunsIntoOnePng) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed (apt install python3-matplotlib)";
  const std::filesystem::path a = fake_run("plot-a", 1.0);
  const std::filesystem::path b = fake_run("plot-b", 2.0);
  const std::filesystem::path output = a / "overlay.png";
  const PlotOutcome outcome = draw_curves({a, b}, output);
  EXPECT_TRUE(outcome.drawn);
  EXPECT_NE(outcome.message.find(output.string()), std::string::npos) << outcome.message;
  const std::string png = test::file_bytes(output);
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_FALSE(std::filesystem::exists(a / "overlay.png.tmp.png"));  // written to a temporary, then renamed
}

TEST(RunCurves, DrawsARunsCurvesInTheBackground) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed (apt install python3-matplotlib)";
  const std::filesystem::path run = fake_run("plot-background", 1.0);
  const PlotOutcome outcome = draw_run_curves_in_background(run);
  EXPECT_TRUE(outcome.drawn);
  EXPECT_NE(outcome.message.find((run / kCurvesFileName).string()), std::string::npos) << outcome.message;
  // Returned before matplotlib finished; the picture appears (renamed into place whole) soon after.
  for (int i = 0; i < 600 && !std::filesystem::exists(run / kCurvesFileName); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(test::file_bytes(run / kCurvesFileName).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST(RunCurves, NamesTheDirectoryWithoutMetrics) {
  const std::filesystem::path empty = test::temp_dir("plot-empty");
  try {
    draw_curves({empty}, empty / "x.png");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(empty.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(empty / "x.png"));
}

TEST(RunCurves, AMatplotlibFailureIsAnErrorNamingTheOutput) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed";
  const std::filesystem::path run = test::temp_dir("plot-broken");
  std::ofstream(run / "metrics.jsonl") << "{\"epoch\": 1}\n";  // no train_loss: the script fails
  try {
    draw_curves({run}, run / "c.png");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.png"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(run / "c.png"));
}

}  // namespace
}  // namespace sprintnet::plot
