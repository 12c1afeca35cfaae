#include "sprintnet/plot/run_curves.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>
#include <chrono>

#include "sprintnet/core/error.h"
#include "sprintnet/io/metrics_writer.h"
#include "sprintnet/plot/python_job.h"
#include "scoped_path.h"
#include "support/error_message.h"
#include "support/scoped_env.h"
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
  for (const auto& entry : std::filesystem::directory_iterator(a)) {  // written to a temporary, then renamed
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

// The loss axis is logarithmic: its ticks are math text ("$\\mathdefault{10^{-1}}$"), which turning math text off (to
// keep a "$" in a run's name as text) printed as those characters. The names are escaped instead. An SVG whose text
// stays text (svg.fonttype none, from a matplotlibrc) shows both: the tick drawn as "10" with "-1" raised, the name
// as written.
TEST(RunCurves, LogTicksAreDrawnAsNumbersAndADollarInANameAsText) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed (apt install python3-matplotlib)";
  const std::filesystem::path run = fake_run("plot-r$x$", 1.0);
  const std::filesystem::path rc = test::temp_dir("plot-rc") / "matplotlibrc";
  std::ofstream(rc) << "svg.fonttype: none\n";
  const test::ScopedEnv matplotlibrc("MATPLOTLIBRC", rc.string());
  const std::filesystem::path output = run / "curves.svg";
  ASSERT_TRUE(draw_curves({run}, output).drawn);
  const std::string svg = test::file_bytes(output);
  EXPECT_NE(svg.find(">10</tspan>"), std::string::npos) << "no log tick drawn as math text";
  EXPECT_EQ(svg.find(">$\\mathdefault"), std::string::npos) << "a log tick drawn as its source text";
  EXPECT_NE(svg.find(">" + run.filename().string() + " train<"), std::string::npos) << "the run's name, as written";
}

// The format is the output's extension (matplotlib's, for .png, .pdf and .svg); another is refused before python
// starts. Every picture used to be PNG bytes, whatever its name.
TEST(RunCurves, TheFormatIsTheExtensions) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed (apt install python3-matplotlib)";
  const std::filesystem::path run = fake_run("plot-formats", 1.0);
  ASSERT_TRUE(draw_curves({run}, run / "c.pdf").drawn);
  EXPECT_EQ(test::file_bytes(run / "c.pdf").substr(0, 5), "%PDF-");
  ASSERT_TRUE(draw_curves({run}, run / "c.SVG").drawn);
  EXPECT_NE(test::file_bytes(run / "c.SVG").find("<svg"), std::string::npos);
  EXPECT_NE(test::error_message([&] { draw_curves({run}, run / "c.jpg"); }).find("one of .png, .pdf, .svg"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(run / "c.jpg"));
}

// A symbolic link is followed (the file it names is replaced, the link stays), as the project's other writes do; a
// FIFO is written into, not replaced by a file.
TEST(RunCurves, ALinkIsFollowedAndAPipeWrittenInto) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed (apt install python3-matplotlib)";
  const std::filesystem::path run = fake_run("plot-links", 1.0);
  std::filesystem::create_symlink("target.png", run / "link.png");
  ASSERT_TRUE(draw_curves({run}, run / "link.png").drawn);
  EXPECT_TRUE(std::filesystem::is_symlink(run / "link.png"));
  EXPECT_EQ(test::file_bytes(run / "target.png").substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));

  const std::filesystem::path pipe = run / "pipe.png";
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] {
    const int fd = ::open(pipe.c_str(), O_RDONLY);
    char buffer[4096];
    for (ssize_t n; fd >= 0 && (n = ::read(fd, buffer, sizeof buffer)) > 0;) received.append(buffer, static_cast<std::size_t>(n));
    if (fd >= 0) ::close(fd);
  });
  std::string failure;
  try {
    const PlotOutcome outcome = draw_curves({run}, pipe);
    EXPECT_TRUE(outcome.drawn) << outcome.message;
  } catch (const Error& e) {
    failure = e.what();
    const int unblock = ::open(pipe.c_str(), O_WRONLY | O_NONBLOCK);  // a reader still waiting for a writer
    if (unblock >= 0) ::close(unblock);
  }
  reader.join();
  EXPECT_EQ(failure, "");
  EXPECT_TRUE(std::filesystem::is_fifo(pipe));
  EXPECT_EQ(received.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

// A run that diverged in its only epoch: both losses null (NaN), the accuracy a number. The script draws it
// (accuracy points are chosen by the accuracy, not the test loss, which hid them) with no legend to fill.
TEST(RunCurves, DrawsARunThatDivergedInItsFirstEpoch) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed (apt install python3-matplotlib)";
  const std::filesystem::path dir = test::temp_dir("plot-diverged");
  std::ofstream(dir / "metrics.jsonl") << "{\"step\":7,\"epoch\":1,\"train_loss\":null,\"test_loss\":null,"
                                          "\"test_accuracy\":0.085,\"epoch_time_s\":0.1,\"samples_per_s\":1000,\"lr\":1e6}\n";
  const PlotOutcome outcome = draw_curves({dir}, dir / "curves.png");
  EXPECT_TRUE(outcome.drawn) << outcome.message;
  EXPECT_GT(test::file_bytes(dir / "curves.png").size(), 1000u);
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

// An output whose folder is missing or is a file is named with the reason before matplotlib starts (whose
// own reason would name its temporary file).
TEST(RunCurves, AnOutputFolderThatCannotHoldThePictureIsNamedWithTheReason) {
  const std::filesystem::path run = fake_run("plot-broken", 1.0);
  std::ofstream(run / "a-file") << "x";
  for (const auto& [folder, reason] : std::vector<std::pair<std::string, std::string>>{
           {"absent", "does not exist"}, {"a-file", "is not a directory"}}) {
    const std::filesystem::path output = run / folder / "c.png";
    try {
      draw_curves({run}, output);
      FAIL() << "expected an error for " << folder;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot write '" + output.string() + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(run / "absent"));
}

// A run killed before its first epoch ended has an empty metrics.jsonl: an error, not an empty picture.
TEST(RunCurves, ARunWithoutAnEpochIsRefused) {
  const std::filesystem::path run = test::temp_dir("plot-no-epoch");
  std::ofstream(run / "metrics.jsonl") << "";
  try {
    draw_curves({run}, run / "c.png");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds no epoch yet"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(run / "c.png"));
}

// Rows matplotlib would choke on are named with their file and line before it starts (its own failure
// names nothing); a cut-off last line, a killed run's unfinished write, is not a row.
TEST(RunCurves, AnUnreadableMetricsRowIsNamedWithItsLine) {
  const std::filesystem::path run = fake_run("plot-bad-row", 1.0);
  std::ofstream(run / "metrics.jsonl", std::ios::app) << "{\"step\":40,\"epo";
  EXPECT_NO_THROW(check_metrics_jsonl(run / "metrics.jsonl"));
  const std::string good = test::file_bytes(run / "metrics.jsonl");
  const std::string row = good.substr(0, good.find('\n') + 1);
  for (const auto& [bad, what] : std::vector<std::pair<std::string, std::string>>{
           {"garbage\n", "not a JSON object"},
           {"{\"step\":40,\"epoch\":4}\n", "no 'train_loss'"},
           {"{\"step\":40,\"epoch\":\"4\"}\n", "no integer epoch"},
           {row.substr(0, row.find("\"lr\"")) + "\"lr\":\"fast\"}\n", "'lr' is not a number"},
           {"\xEF\xBB\xBF" + row, "starts with a byte order mark"}}) {  // (python's json refuses it: a traceback)
    std::ofstream(run / "metrics.jsonl", std::ios::trunc) << row << bad << row;
    try {
      draw_curves({run}, run / "c.png");
      FAIL() << "expected an error for " << bad;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find((run / "metrics.jsonl").string() + "' line 2"), std::string::npos) << message;
      EXPECT_NE(message.find(what), std::string::npos) << message;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(run / "c.png"));
}

// The reader's other rules are the C++ reader's too (read_metrics_jsonl): a whole last row without its newline (a hand
// edit) is drawn, where the script took it for a killed run's unfinished write; a byte order mark before the first
// line (an editor's) is skipped, where python's json failed with a traceback that named no file. The SVG keeps each
// curve's id and points ("M x y L x y ...").
TEST(RunCurves, ALastRowWithoutItsNewlineIsDrawnAndAByteOrderMarkSkipped) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed (apt install python3-matplotlib)";
  const std::filesystem::path run = fake_run("plot-no-newline", 1.0);
  const std::string rows = test::file_bytes(run / "metrics.jsonl");
  std::ofstream(run / "metrics.jsonl", std::ios::trunc) << "\xEF\xBB\xBF" << rows.substr(0, rows.size() - 1);
  const std::filesystem::path output = run / "c.svg";
  ASSERT_TRUE(draw_curves({run}, output).drawn);
  const std::string svg = test::file_bytes(output);
  const std::size_t curve = svg.find("id=\"train-loss-0\"");
  ASSERT_NE(curve, std::string::npos);
  const std::string path = svg.substr(curve, svg.find("/>", curve) - curve);
  EXPECT_EQ(std::count(path.begin(), path.end(), 'L'), 2) << "three epochs, three points: " << path;
}

// matplotlib leaves out of a legend every label that starts with "_": a run named "_base" was drawn without its entry.
TEST(RunCurves, ARunWhoseNameStartsWithAnUnderscoreIsInTheLegend) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed (apt install python3-matplotlib)";
  const std::filesystem::path parent = test::temp_dir("plot-underscore");
  const std::filesystem::path run = parent / "_base";
  std::filesystem::rename(fake_run("plot-underscore-run", 1.0), run);
  const std::filesystem::path rc = parent / "matplotlibrc";
  std::ofstream(rc) << "svg.fonttype: none\n";  // the legend's text stays text
  const test::ScopedEnv matplotlibrc("MATPLOTLIBRC", rc.string());
  ASSERT_TRUE(draw_curves({run}, parent / "c.svg").drawn);
  const std::string svg = test::file_bytes(parent / "c.svg");
  EXPECT_NE(svg.find("_base train<"), std::string::npos) << "no legend entry for the run's train loss";
  EXPECT_NE(svg.find("_base test<"), std::string::npos) << "no legend entry for the run's test loss";
}

// Every run its own colour: C{i % 10} drew the 11th run in the first one's. The colour of each run's learning-rate
// curve, read from the SVG by the curve's id.
TEST(RunCurves, ElevenRunsHaveElevenColours) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed (apt install python3-matplotlib)";
  std::vector<std::filesystem::path> runs;
  for (int i = 0; i < 11; ++i) runs.push_back(fake_run(fmt::format("plot-eleven-{}", i), 1.0 + i));
  const std::filesystem::path output = runs[0] / "c.svg";
  ASSERT_TRUE(draw_curves(runs, output).drawn);
  const std::string svg = test::file_bytes(output);
  std::set<std::string> colours;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::size_t curve = svg.find(fmt::format("id=\"lr-{}\"", i));
    ASSERT_NE(curve, std::string::npos) << "run " << i;
    const std::size_t stroke = svg.find("stroke: #", curve);
    ASSERT_NE(stroke, std::string::npos) << "run " << i;
    colours.insert(svg.substr(stroke + 8, 7));
  }
  EXPECT_EQ(colours.size(), runs.size()) << ::testing::PrintToString(colours);
}

// A picture for stdout (-o /dev/stdout), another descriptor of this process or a pipe is written by this process:
// python, whose stdout is /dev/null, resolved /dev/stdout to that, and a shell's `> file` got an error ("wrote no
// /dev/stdout"), `| cat` no picture at all.
TEST(RunCurves, APictureForADescriptorOfThisProcessIsWrittenIntoIt) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed (apt install python3-matplotlib)";
  const std::filesystem::path run = fake_run("plot-descriptor", 1.0);
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  std::string received;
  std::thread reader([&] {
    char buffer[4096];
    for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) {
      received.append(buffer, static_cast<std::size_t>(n));
    }
  });
  std::string failure;
  try {
    const PlotOutcome outcome = draw_curves({run}, fmt::format("/dev/fd/{}", pipe_fds[1]));
    EXPECT_TRUE(outcome.drawn) << outcome.message;
  } catch (const Error& e) {
    failure = e.what();
  }
  ::close(pipe_fds[1]);
  reader.join();
  ::close(pipe_fds[0]);
  EXPECT_EQ(failure, "");
  EXPECT_EQ(received.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_TRUE(received.ends_with(std::string("IEND\xae\x42\x60\x82", 8))) << "the whole picture";

  // A file opened for appending: the picture follows what it held.
  const std::filesystem::path file = run / "appended.bin";
  std::ofstream(file) << "before";
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(draw_curves({run}, fmt::format("/proc/self/fd/{}", fd)).drawn);
  ::close(fd);
  EXPECT_EQ(test::file_bytes(file).substr(0, 14), "before" + std::string("\x89PNG\r\n\x1a\n", 8));
}

// A run or an output behind a loop of links is named with the system's reason ("internal error: filesystem error:
// status: Too many levels of symbolic links" before).
TEST(RunCurves, ALoopOfLinksIsNamedWithTheReason) {
  const std::filesystem::path run = fake_run("plot-loop", 1.0);
  std::filesystem::create_symlink("loop", run / "loop");
  const std::string reason = std::make_error_code(std::errc::too_many_symbolic_link_levels).message();
  EXPECT_THAT([&] { draw_curves({run}, run / "loop" / "x.png"); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  fmt::format("plot: cannot write '{}': {}", (run / "loop" / "x.png").string(), reason))));
  EXPECT_THAT([&] { draw_curves({run / "loop"}, run / "x.png"); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  fmt::format("{}: cannot read metrics.jsonl: {}", (run / "loop").string(), reason))));
}

TEST(RunCurves, AnOutputThatIsADirectoryIsRefusedLeavingNothing) {
  const std::filesystem::path run = fake_run("plot-into-dir", 1.0);
  const std::filesystem::path output = test::temp_dir("plot-output-dir");
  try {
    draw_curves({run}, output);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  for (const auto& entry : std::filesystem::directory_iterator(output.parent_path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

// A python3 put first on PATH: `body` is a sh script's, run for the matplotlib check (two arguments, -c CHECK)
// and for the drawing alike.
std::filesystem::path fake_python(const std::string& name, const std::string& body) {
  const std::filesystem::path dir = test::temp_dir(name);
  std::ofstream(dir / "python3") << "#!/bin/sh\n" << body;
  std::filesystem::permissions(dir / "python3", std::filesystem::perms::owner_all);
  return dir;
}

// Python's own reason for failing reaches the error (its stderr's last lines), not only "could not draw".
TEST(RunCurves, AFailedDrawingIsAnErrorWithPythonsReason) {
  const std::filesystem::path bin = fake_python("plot-fake-failing", R"(
[ $# -le 2 ] && exit 0
echo 'Traceback (most recent call last):' >&2
echo '  File "<string>", line 48, in <module>' >&2
echo "OSError: [Errno 30] Read-only file system: 'c.png.tmp.png'" >&2
exit 1
)");
  const test::ScopedPath path(bin.string() + ":" + test::ScopedPath::current());
  const std::filesystem::path run = fake_run("plot-failing", 1.0);
  try {
    draw_curves({run}, run / "c.png");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("could not draw " + (run / "c.png").string()), std::string::npos) << message;
    EXPECT_NE(message.find("exited with status 1"), std::string::npos) << message;
    EXPECT_NE(message.find("OSError: [Errno 30] Read-only file system"), std::string::npos) << message;
  }
  EXPECT_FALSE(std::filesystem::exists(run / "c.png"));
}

// A python that exits 0 without writing the picture (a wrapper, a site hook) is an error: the command never reports
// a picture that is not there, nor one left from an earlier drawing.
TEST(RunCurves, APythonThatWritesNoPictureIsAnError) {
  const std::filesystem::path bin = fake_python("plot-fake-silent", "exit 0\n");
  const test::ScopedPath path(bin.string() + ":" + test::ScopedPath::current());
  const std::filesystem::path run = fake_run("plot-silent", 1.0);
  for (const bool stale : {false, true}) {
    if (stale) std::ofstream(run / "c.png") << "an earlier picture";
    try {
      const PlotOutcome outcome = draw_curves({run}, run / "c.png");
      FAIL() << "expected an error" << (stale ? " with a picture from before" : "") << "; got: " << outcome.message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("wrote no " + (run / "c.png").string()), std::string::npos) << e.what();
    }
  }
}

// Without sh on PATH (nor python3), /usr/bin/python3 draws in the background all the same; the job is no child of
// ours when the call returns (orphaned at once: no zombie to reap, nothing to wait for).
TEST(RunCurves, DrawsInTheBackgroundWithoutShOrPythonOnPath) {
  const test::ScopedPath path("/nonexistent");
  if (find_python_with_matplotlib() != "/usr/bin/python3") GTEST_SKIP() << "/usr/bin/python3 has no matplotlib";
  const std::filesystem::path run = fake_run("plot-background-no-sh", 1.0);
  const PlotOutcome outcome = draw_run_curves_in_background(run);
  ASSERT_TRUE(outcome.drawn) << outcome.message;
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  for (int i = 0; i < 600 && !std::filesystem::exists(run / kCurvesFileName); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(test::file_bytes(run / kCurvesFileName).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

// The picture comes back through a pipe (python's descriptor 3) and this process writes it where it goes: there is no
// folder in $TMPDIR to draw into (TMPDIR=/nonexistent failed for a FIFO or /dev/stdout: "internal error: filesystem
// error: temp_directory_path"), nor one to leave behind when plot is killed. A picture and a reason larger than a pipe
// holds are read together (read one after the other, a child blocked writing the first never closes the second).
TEST(RunCurves, APictureComesBackThroughAPipeWithoutATemporaryFolder) {
  const std::filesystem::path bin = fake_python("plot-fake-descriptor", R"(
[ $# -le 2 ] && exit 0
[ "$3" = --to-descriptor ] || exit 3
printf %s "$4" >&3
head -c 300000 /dev/zero | tr '\0' p >&3
head -c 100000 /dev/zero | tr '\0' e >&2
)");
  const std::filesystem::path run = fake_run("plot-through-a-pipe", 1.0);
  const test::ScopedPath path(bin.string() + ":" + test::ScopedPath::current());
  const test::ScopedEnv tmpdir("TMPDIR", "/nonexistent");  // (after the test's own folders are made)
  const std::string pixels(300000, 'p');

  ASSERT_TRUE(draw_curves({run}, run / "c.svg").drawn);  // a file, replaced whole
  EXPECT_EQ(test::file_bytes(run / "c.svg"), "svg" + pixels);

  const std::filesystem::path fifo = run / "pipe.pdf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = test::file_bytes(fifo); });  // opening blocks until the writer opens
  std::string failure;
  try {
    EXPECT_TRUE(draw_curves({run}, fifo).drawn);
  } catch (const std::exception& e) {
    failure = e.what();
    const int unblock = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // the reader still waiting for a writer
    if (unblock >= 0) ::close(unblock);
  }
  reader.join();
  EXPECT_EQ(failure, "");
  EXPECT_EQ(received, "pdf" + pixels);

  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  received.clear();
  std::thread descriptor_reader([&] {
    char buffer[4096];
    for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) {
      received.append(buffer, static_cast<std::size_t>(n));
    }
  });
  try {
    EXPECT_TRUE(draw_curves({run}, fmt::format("/dev/fd/{}", pipe_fds[1])).drawn);  // no extension: PNG
  } catch (const std::exception& e) {
    failure = e.what();
  }
  ::close(pipe_fds[1]);
  descriptor_reader.join();
  ::close(pipe_fds[0]);
  EXPECT_EQ(failure, "");
  EXPECT_EQ(received, "png" + pixels);
}

// A terminal gets no picture (its bytes are noise there, and the terminal's newline translation corrupts them): the
// output naming one (-o /dev/stdout on a terminal) is refused with a way out, before python starts. The picture was
// written into it, and plot exited 0.
TEST(RunCurves, ATerminalIsRefusedBeforeAnythingIsDrawn) {
  const std::filesystem::path started = test::temp_dir("plot-terminal-marker") / "python-drew";
  const std::filesystem::path bin =
      fake_python("plot-fake-terminal", fmt::format("[ $# -le 2 ] && exit 0\ntouch '{}'\n", started.string()));
  const test::ScopedPath path(bin.string() + ":" + test::ScopedPath::current());
  const std::filesystem::path run = fake_run("plot-terminal", 1.0);
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) GTEST_SKIP() << "no pseudo-terminal here: " << std::strerror(errno);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  // (Non-blocking: a picture written into it, without the refusal, fails instead of waiting for a reader.)
  const int terminal = ::open(::ptsname(master), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(terminal, 0);
  const std::string output = fmt::format("/dev/fd/{}", terminal);
  EXPECT_THAT([&] { draw_curves({run}, output); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(
                  ::testing::HasSubstr(fmt::format("plot: not writing a picture to a terminal ('{}'", output)),
                  ::testing::HasSubstr("redirect it"))));
  EXPECT_FALSE(std::filesystem::exists(started)) << "python was started";
  ASSERT_EQ(::fcntl(master, F_SETFL, O_NONBLOCK), 0);
  char byte = 0;
  EXPECT_EQ(::read(master, &byte, 1), -1) << "the terminal got bytes";
  ::close(terminal);
  ::close(master);
}

}  // namespace
}  // namespace sprintnet::plot
