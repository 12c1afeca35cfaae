// `sprintnet plot` run as a user runs it, for what only the process shows: a picture sent to stdout
// (-o /dev/stdout) through a shell's redirection or pipe is the picture alone, the line saying where it went on
// stderr; no temporary folder is needed, and a plot killed leaves nothing behind. The run is a metrics.jsonl of three
// epochs written here (nothing is trained).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli_run.h"
#include "sprintnet/io/read_file.h"
#include "sprintnet/plot/python_job.h"
#include "sprintnet/plot/run_curves.h"
#include "support/test_util.h"

extern char** environ;

namespace sprintnet::plot {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kPngSignature("\x89PNG\r\n\x1a\n", 8);
const std::string kPngEnd("IEND\xae\x42\x60\x82", 8);  // the last chunk, with its CRC: the picture is whole

fs::path three_epochs(const fs::path& dir) {
  const fs::path run = dir / "run";
  fs::create_directory(run);
  std::ofstream out(run / "metrics.jsonl");
  for (int epoch = 1; epoch <= 3; ++epoch) {
    out << fmt::format("{{\"step\":{},\"epoch\":{},\"train_loss\":{},\"test_loss\":{},\"test_accuracy\":{},"
                       "\"epoch_time_s\":0.1,\"samples_per_s\":1000,\"lr\":0.05}}\n",
                       10 * epoch, epoch, 1.0 / epoch, 1.1 / epoch, 0.8 + 0.05 * epoch);
  }
  return run;
}

// Python drew into its own stdout, /dev/null: redirected to a file, `plot` failed ("wrote no /dev/stdout"); piped, it
// exited 0 having written only "curves in /dev/stdout" into the pipe.
TEST(PlotCli, APictureOnStdoutIsThePictureAlone) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed";
  const fs::path dir = test::temp_dir("plot-cli-stdout");
  const fs::path run = three_epochs(dir);
  const test::CliResult redirected = test::run_cli(fmt::format("plot '{}' -o /dev/stdout", run.string()), dir);
  ASSERT_EQ(redirected.exit_code, 0) << redirected.err;
  EXPECT_TRUE(redirected.out.starts_with(kPngSignature));
  EXPECT_TRUE(redirected.out.ends_with(kPngEnd)) << "anything after the picture?";
  EXPECT_THAT(redirected.err, HasSubstr("curves in /dev/stdout"));

  const fs::path piped = dir / "piped.png", err = dir / "err.txt";
  const std::string command = fmt::format("'{}' plot '{}' -o /dev/stdout 2> '{}' | cat > '{}'", SPRINTNET_CLI_PATH,
                                          run.string(), err.string(), piped.string());
  ASSERT_EQ(std::system(command.c_str()), 0) << read_file(err);
  EXPECT_EQ(read_file(piped), redirected.out);  // the same drawing, byte for byte
}

// No folder in $TMPDIR is needed to draw a picture that plot writes itself (stdout, a FIFO): TMPDIR=/nonexistent was
// "internal error: filesystem error: temp_directory_path", a FIFO drawn into before that.
TEST(PlotCli, APictureOnStdoutOrAFifoNeedsNoTemporaryFolder) {
  if (!plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed";
  const fs::path dir = test::temp_dir("plot-cli-no-tmpdir");
  const fs::path run = three_epochs(dir);
  const fs::path out = dir / "out.png", fifo = dir / "fifo.png", received = dir / "received.png", err = dir / "err.txt";
  const std::string on_stdout = fmt::format("TMPDIR=/nonexistent '{}' plot '{}' -o /dev/stdout > '{}' 2> '{}'",
                                            SPRINTNET_CLI_PATH, run.string(), out.string(), err.string());
  EXPECT_EQ(std::system(on_stdout.c_str()), 0) << read_file(err);
  EXPECT_TRUE(read_file(out).starts_with(kPngSignature));
  EXPECT_TRUE(read_file(out).ends_with(kPngEnd));
  // (A plot that failed before it opened the FIFO: `: <> FIFO` opens it, so that cat waits no more.)
  const std::string into_fifo = fmt::format(
      "mkfifo '{0}' && {{ cat '{0}' > '{1}' & }} && "
      "TMPDIR=/nonexistent '{2}' plot '{3}' -o '{0}' > /dev/null 2> '{4}'; "
      "status=$?; [ $status = 0 ] || : <> '{0}'; wait; exit $status",
      fifo.string(), received.string(), SPRINTNET_CLI_PATH, run.string(), err.string());
  ASSERT_EQ(std::system(into_fifo.c_str()), 0) << read_file(err);
  EXPECT_EQ(read_file(received), read_file(out));
}

// Whether process `pid` has ended: gone, or a zombie its new parent has not reaped yet.
bool ended(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t name_end = stat.rfind(')');  // "pid (name) state ...": the name may hold anything
  return name_end == std::string::npos || stat.size() < name_end + 3 || stat[name_end + 2] == 'Z' ||
         stat[name_end + 2] == 'X';
}

// Waits up to a minute for `done`; false on a timeout.
template <typename Done>
bool wait_for(Done done) {
  for (int i = 0; i < 3000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// plot killed while python draws (SIGTERM to plot alone, as a scheduler's; Ctrl-C to both) leaves nothing: no folder
// in $TMPDIR (one stayed there, the picture in it, or empty after a Ctrl-C) and no picture written after plot ended
// (python went on drawing and wrote it). Python, put on PATH behind a wrapper that tells its pid, is waited for.
TEST(PlotCli, AKilledPlotLeavesNothingBehind) {
  const std::string python = find_python_with_matplotlib();
  if (python.empty()) GTEST_SKIP() << "python3 with matplotlib is not installed";
  const fs::path dir = test::temp_dir("plot-cli-killed");
  const fs::path run = three_epochs(dir);
  const fs::path bin = dir / "bin", tmp = dir / "tmp", pid_file = dir / "python.pid";
  fs::create_directories(bin);
  const char* path = std::getenv("PATH");
  std::ofstream(bin / "python3") << fmt::format(
      "#!/bin/sh\n[ $# -le 2 ] || {{ echo $$ > '{0}.new' && mv '{0}.new' '{0}'; }}\nPATH='{1}' exec '{2}' \"$@\"\n",
      pid_file.string(), path != nullptr ? path : "/usr/bin:/bin", python);
  fs::permissions(bin / "python3", fs::perms::owner_all);
  std::vector<std::string> environment = {"PATH=" + bin.string() + ":" + (path != nullptr ? path : "/usr/bin:/bin"),
                                          "TMPDIR=" + tmp.string(), "MPLCONFIGDIR=" + (dir / "mpl").string()};
  for (char** variable = environ; *variable != nullptr; ++variable) {
    const std::string_view entry = *variable;
    if (!entry.starts_with("PATH=") && !entry.starts_with("TMPDIR=") && !entry.starts_with("MPLCONFIGDIR=")) {
      environment.emplace_back(entry);
    }
  }
  std::vector<char*> envp;
  for (std::string& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);

  struct Case {
    int signal;
    bool to_the_group;  // a terminal's Ctrl-C reaches plot and python alike
    std::string output;
  };
  for (const Case& c : {Case{SIGTERM, false, (dir / "c.png").string()}, Case{SIGTERM, false, "/dev/stdout"},
                        Case{SIGINT, true, "/dev/stdout"}}) {
    SCOPED_TRACE(fmt::format("{} to {}, -o {}", strsignal(c.signal), c.to_the_group ? "the group" : "plot",
                             c.output));
    for (const fs::path& leftover : {pid_file, dir / "c.png", tmp}) fs::remove_all(leftover);  // (each case alone)
    fs::create_directory(tmp);
    std::string cli = SPRINTNET_CLI_PATH, command = "plot", run_dir = run.string(), option = "-o",
                output = c.output;
    char* argv[] = {cli.data(), command.data(), run_dir.data(), option.data(), output.data(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, (dir / "out.bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, (dir / "err.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setpgroup(&attributes, 0);  // a group of its own: the Ctrl-C reaches it, not this test
    sigset_t none, stops;
    sigemptyset(&none);
    sigemptyset(&stops);
    for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, signal);  // (were they ignored here)
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &stops);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t plot = 0;
    const int spawned = posix_spawn(&plot, argv[0], &actions, &attributes, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    ASSERT_EQ(spawned, 0) << std::strerror(spawned);

    int status = 0;
    pid_t exited = 0;
    const bool drawing = wait_for([&] {
      exited = waitpid(plot, &status, WNOHANG);
      return exited != 0 || fs::exists(pid_file);
    });
    if (!drawing || exited != 0) {
      if (exited == 0) {
        kill(plot, SIGKILL);
        waitpid(plot, &status, 0);
      }
      FAIL() << "python never started: " << read_file(dir / "err.txt");
    }
    const pid_t drawer = std::stoi(read_file(pid_file));
    ASSERT_EQ(kill(c.to_the_group ? -plot : plot, c.signal), 0);
    ASSERT_EQ(waitpid(plot, &status, 0), plot);
    // (After a Ctrl-C python may die first, and plot then ends with its error before its signal thread ends it.)
    EXPECT_TRUE((WIFSIGNALED(status) && WTERMSIG(status) == c.signal) ||
                (c.to_the_group && WIFEXITED(status) && WEXITSTATUS(status) == 1))
        << "status " << status << ": " << read_file(dir / "err.txt");
    ASSERT_TRUE(wait_for([&] { return ended(drawer); })) << "python is still running";

    std::vector<std::string> left;
    for (const auto& entry : fs::directory_iterator(tmp)) left.push_back(entry.path().filename().string());
    EXPECT_THAT(left, ::testing::IsEmpty()) << "left in $TMPDIR";
    EXPECT_FALSE(fs::exists(dir / "c.png")) << "a picture written after plot was killed";
    EXPECT_EQ(read_file(dir / "out.bin"), "") << "a picture written after plot was killed";
  }
}

}  // namespace
}  // namespace sprintnet::plot
