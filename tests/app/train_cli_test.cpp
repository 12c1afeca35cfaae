// `sprintnet train` (and `sweep` on a signal) run as a user runs it, for what only the process shows: how it ends on
// Ctrl-C, SIGTERM and SIGHUP (after the epoch in progress and its checkpoint, then by the signal; a second signal at
// once; an ignored one stays ignored), its summary line, --gpus without a GPU, usage errors, and closed, full or
// limited output. Runs on a 784-32-10 model and a 2000-sample MNIST slice, one CPU thread.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <fstream>
#include <optional>
#include <thread>

#include "sprintnet/io/config.h"
#include "sprintnet/io/read_file.h"
#include "sprintnet/ops/backend.h"
#include "sprintnet/plot/run_curves.h"
#include "sprintnet/train/checkpoint.h"
#include "support/scoped_env.h"
#include "support/test_util.h"
#include "support/tiny_run.h"

namespace sprintnet::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// A config file of the tiny run, `epochs` long, into <dir>/run.
fs::path write_tiny_config(const fs::path& dir, std::int64_t epochs, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> overrides = {fmt::format("train.epochs={}", epochs)};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  const Config config = parse_config(config_to_toml(test::tiny_run_config(dir, 500)), "tiny", overrides);
  const fs::path file = dir / "tiny.toml";
  std::ofstream(file) << config_to_toml(config);
  return file;
}

// `sprintnet ARGS`, its stdout and stderr into `log`, started and left running. `in_child` runs in the child just
// before exec (async-signal-safe calls only): closing or redirecting streams, limits.
pid_t start_cli(const std::vector<std::string>& args, const fs::path& log, void (*in_child)() = nullptr) {
  std::vector<std::string> words = {SPRINTNET_CLI_PATH};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {  // (only async-signal-safe calls until exec)
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (in_child != nullptr) in_child();
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

// The process's wait status, or nothing when it still ran after 60 s (then it is killed: a hang must fail, not hang).
std::optional<int> wait_at_most_a_minute(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      wait_for(pid);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

// Waits until the run has written `rows` metrics rows (false if the process ended first, or after 120 s).
bool wait_for_rows(pid_t pid, const fs::path& metrics, std::size_t rows) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(metrics);
    std::size_t lines = 0;
    for (std::string line; std::getline(in, line);) lines += line.ends_with('}') ? 1 : 0;
    if (lines >= rows) return true;
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

std::size_t metrics_rows(const fs::path& run) {
  std::ifstream in(run / "metrics.jsonl");
  std::size_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

struct SignalCase {
  int signal;
  const char* name;
};

class TrainStopsOnSignal : public ::testing::TestWithParam<SignalCase> {};

// The run ends after the epoch the signal fell in, with that epoch's checkpoint (none is due: checkpoints only at the
// end), says where and how to continue, and ends by the signal (a shell's loop stops too; its $? is 128 + it);
// --resume then finishes it.
TEST_P(TrainStopsOnSignal, AfterTheEpochWithItsCheckpointThenResumes) {
  const auto [signal, name] = GetParam();
  const fs::path dir = test::temp_dir(fmt::format("train-cli-{}", name));
  const fs::path config = write_tiny_config(dir, 1000, {"checkpoint.every_epochs=0"});
  const fs::path log = dir / "log.txt";
  const fs::path run = dir / "run";
  const pid_t pid = start_cli({"train", config.string()}, log);
  ASSERT_TRUE(wait_for_rows(pid, run / "metrics.jsonl", 2)) << read_file(log);
  ASSERT_EQ(::kill(pid, signal), 0);
  const int status = wait_for(pid);
  const std::string out = read_file(log);
  ASSERT_TRUE(WIFSIGNALED(status)) << out;
  EXPECT_EQ(WTERMSIG(status), signal) << out;
  const std::size_t epochs = metrics_rows(run);
  EXPECT_LT(epochs, 1000u);
  const fs::path checkpoint = latest_checkpoint(run);
  EXPECT_EQ(checkpoint.filename(), fmt::format("epoch-{:04}", epochs));
  EXPECT_EQ(read_checkpoint(checkpoint).epoch, static_cast<std::int64_t>(epochs));
  EXPECT_THAT(out, HasSubstr(fmt::format("sprintnet: {}: stopping after the epoch in progress", name)));
  EXPECT_THAT(out, HasSubstr(fmt::format("sprintnet: stopped by {} after epoch {} of 1000, checkpoint {}; continue "
                                         "with: sprintnet train --resume {}", name, epochs, checkpoint.string(),
                                         run.string())));
  EXPECT_FALSE(fs::exists(run / "model.safetensors"));

  const pid_t resumed = start_cli({"train", "--resume", run.string(), "--set", fmt::format("train.epochs={}", epochs + 1),
                                   "-q"}, log);
  const int resumed_status = wait_for(resumed);
  ASSERT_TRUE(WIFEXITED(resumed_status) && WEXITSTATUS(resumed_status) == 0) << read_file(log);
  EXPECT_EQ(metrics_rows(run), epochs + 1);
  EXPECT_TRUE(fs::exists(run / "model.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(TrainCli, TrainStopsOnSignal,
                         ::testing::Values(SignalCase{SIGINT, "SIGINT"}, SignalCase{SIGTERM, "SIGTERM"},
                                           SignalCase{SIGHUP, "SIGHUP"}),
                         [](const ::testing::TestParamInfo<SignalCase>& param_info) { return std::string(param_info.param.name); });

// Starts `train` on epochs of 60000 samples and a 512-wide layer (~2-4 s each), `epochs` of them into <dir>/run, and
// sends SIGINT inside epoch 2: 200 ms after epoch 1's checkpoint is named in `latest`, when epoch 1's own stop check
// is long past. (Waiting for the row alone was not enough on a loaded machine: the signal could fall between the
// checkpoint folder's rename and `latest`.) The process, or nothing when it ended before.
std::optional<pid_t> start_and_interrupt_epoch_two(const fs::path& dir, std::int64_t epochs, const fs::path& log) {
  const fs::path config = write_tiny_config(dir, epochs, {"data.train_limit=60000", "model.hidden=[512]"});
  const fs::path run = dir / "run";
  const pid_t pid = start_cli({"train", config.string()}, log);
  if (!wait_for_rows(pid, run / "metrics.jsonl", 1)) return std::nullopt;
  for (int i = 0; i < 60000 && !fs::exists(run / "checkpoints" / "latest"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  if (!fs::exists(run / "checkpoints" / "latest") || ::kill(pid, SIGINT) != 0) return std::nullopt;
  return pid;
}

// A second Ctrl-C does not wait for the epoch: the process ends by the signal, and the checkpoint before stays valid.
// (Both signals fall inside epoch 2: the second as soon as the first is taken.)
TEST(TrainCli, ASecondSignalEndsTheRunAtOnce) {
  const fs::path dir = test::temp_dir("train-cli-twice");
  const fs::path log = dir / "log.txt";
  const fs::path run = dir / "run";
  const std::optional<pid_t> pid = start_and_interrupt_epoch_two(dir, 1000, log);
  ASSERT_TRUE(pid.has_value()) << read_file(log);
  // The second as soon as the first is taken (two pending SIGINTs would be one).
  for (int i = 0; i < 2000 && read_file(log).find("stopping after the epoch") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(::kill(*pid, SIGINT), 0);
  const int status = wait_for(*pid);
  const std::string out = read_file(log);
  ASSERT_TRUE(WIFSIGNALED(status)) << out;
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_THAT(out, Not(HasSubstr("stopped by")));
  const std::int64_t epoch = read_checkpoint(latest_checkpoint(run)).epoch;
  EXPECT_GE(epoch, 1);
  EXPECT_LE(epoch, static_cast<std::int64_t>(metrics_rows(run)));
}

// A signal in the last epoch lets the run finish (final weights, last checkpoint, summary line), then ends the
// process by it like any other: it exited 0, and a script's loop over runs went on to its next run after Ctrl-C.
TEST(TrainCli, ASignalInTheLastEpochLetsTheRunFinishThenEndsByIt) {
  const fs::path dir = test::temp_dir("train-cli-last-epoch");
  const fs::path log = dir / "log.txt";
  const fs::path run = dir / "run";
  const std::optional<pid_t> pid = start_and_interrupt_epoch_two(dir, 2, log);
  ASSERT_TRUE(pid.has_value()) << read_file(log);
  const int status = wait_for(*pid);
  const std::string out = read_file(log);
  ASSERT_TRUE(WIFSIGNALED(status)) << out;
  EXPECT_EQ(WTERMSIG(status), SIGINT) << out;
  EXPECT_THAT(out, HasSubstr("sprintnet: 2 epochs in"));
  EXPECT_THAT(out, HasSubstr("sprintnet: SIGINT came in the last epoch or after it: the run finished (nothing to resume)"));
  EXPECT_THAT(out, Not(HasSubstr("stopped by")));
  EXPECT_EQ(metrics_rows(run), 2u);
  EXPECT_TRUE(fs::exists(run / "model.safetensors"));
  EXPECT_EQ(latest_checkpoint(run).filename(), "epoch-0002");
}

TEST(TrainCli, TheSummaryLineCountsEpochsInWords) {
  const fs::path dir = test::temp_dir("train-cli-summary");
  const fs::path log = dir / "log.txt";
  for (const auto& [epochs, words] : {std::pair{1, "1 epoch in"}, std::pair{2, "2 epochs in"}}) {
    const fs::path config = write_tiny_config(dir, epochs, {fmt::format("output.name=\"run{}\"", epochs)});
    const int status = wait_for(start_cli({"train", config.string(), "-q"}, log));
    const std::string out = read_file(log);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    EXPECT_THAT(out, HasSubstr(fmt::format("sprintnet: {}", words))) << out;
    EXPECT_THAT(out, Not(HasSubstr("epoch 1/"))) << "-q prints no epoch lines";
  }
}

// Waits until `picture` is a whole PNG (drawn in the background after the process ended; renamed into place whole),
// at most a minute.
bool png_appears(const fs::path& picture) {
  for (int i = 0; i < 600 && !fs::exists(picture); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return read_file(picture).starts_with(std::string("\x89PNG\r\n\x1a\n", 8));
}

// A run stopped by Ctrl-C, or ended by a divergence, draws its curves too: they were drawn only at a run's end, so a
// stopped run had none, and a resumed one kept the earlier end's picture, without the epochs since.
TEST(TrainCli, AStoppedOrDivergedRunDrawsItsCurves) {
  if (!plot::plotter_available()) GTEST_SKIP() << "python3 with matplotlib is not installed";
  const fs::path dir = test::temp_dir("train-cli-curves");
  const fs::path log = dir / "log.txt";
  const fs::path stopped = dir / "run";
  const pid_t pid = start_cli({"train", write_tiny_config(dir, 1000).string()}, log);
  ASSERT_TRUE(wait_for_rows(pid, stopped / "metrics.jsonl", 1)) << read_file(log);
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  const int status = wait_for(pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << read_file(log);
  EXPECT_THAT(read_file(log), HasSubstr(fmt::format("curves: {}", (stopped / "curves.png").string())));
  EXPECT_TRUE(png_appears(stopped / "curves.png")) << read_file(log);

  // SGD at a rate of 1e8: the loss is NaN after the first epoch (the run fails naming the divergence).
  const fs::path diverged = dir / "diverged";
  const fs::path config = write_tiny_config(dir, 2, {"optim.type=\"sgd\"", "optim.lr=1e8", "output.name=\"diverged\""});
  const int diverged_status = wait_for(start_cli({"train", config.string()}, log));
  const std::string out = read_file(log);
  ASSERT_TRUE(WIFEXITED(diverged_status) && WEXITSTATUS(diverged_status) == 1) << out;
  ASSERT_THAT(out, HasSubstr("training diverged"));
  EXPECT_THAT(out, HasSubstr(fmt::format("curves: {}", (diverged / "curves.png").string())));
  EXPECT_TRUE(png_appears(diverged / "curves.png")) << out;
}

// A signal ignored when the process started stays ignored: `nohup sprintnet train ... &` survives the session's
// SIGHUP, a script's `sprintnet train ... &` the Ctrl-C meant for the script.
TEST(TrainCli, SignalsIgnoredAtStartStayIgnored) {
  const fs::path dir = test::temp_dir("train-cli-nohup");
  const fs::path config = write_tiny_config(dir, 30);
  const fs::path log = dir / "log.txt";
  const pid_t pid = start_cli({"train", config.string(), "-q"}, log, [] {
    std::signal(SIGHUP, SIG_IGN);
    std::signal(SIGINT, SIG_IGN);
  });
  ASSERT_TRUE(wait_for_rows(pid, dir / "run" / "metrics.jsonl", 2)) << read_file(log);
  ::kill(pid, SIGHUP);
  ::kill(pid, SIGINT);
  const int status = wait_for(pid);
  ASSERT_TRUE(WIFEXITED(status)) << read_file(log);
  EXPECT_EQ(WEXITSTATUS(status), 0) << read_file(log);
  EXPECT_EQ(metrics_rows(dir / "run"), 30u);
}

// --gpus 1 asks for a GPU: without one it is an error naming why, not a run on the CPU.
TEST(TrainCli, GpusOneWithoutAGpuIsRefused) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  const fs::path dir = test::temp_dir("train-cli-gpus");
  const fs::path config = write_tiny_config(dir, 1);
  const fs::path log = dir / "log.txt";
  const int status = wait_for(start_cli({"train", config.string(), "--gpus", "1"}, log));
  const std::string out = read_file(log);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_THAT(out, HasSubstr("--gpus 1: this machine has 0 GPU(s)"));
  EXPECT_FALSE(fs::exists(dir / "run"));
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

bool every_line_is_json(const fs::path& metrics) {
  std::ifstream in(metrics);
  std::size_t lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    if (!line.starts_with("{\"step\":")) return false;
  }
  return lines > 0;
}

// Started with stdout and stderr closed (a daemon's way), the run's first files took fds 1 and 2 and its progress
// lines went into metrics.jsonl. /dev/null now holds those numbers.
TEST(TrainCli, ClosedStandardStreamsDoNotBecomeTheRunsFiles) {
  const fs::path dir = test::temp_dir("train-cli-closed");
  const fs::path config = write_tiny_config(dir, 2, {"output.progress=\"plain\""});
  const int status = wait_for(start_cli({"train", config.string()}, dir / "log.txt", [] {
    ::close(0);
    ::close(1);
    ::close(2);
  }));
  EXPECT_EQ(exit_code(status), 0);
  EXPECT_TRUE(every_line_is_json(dir / "run" / "metrics.jsonl")) << read_file(dir / "run" / "metrics.jsonl");
  EXPECT_TRUE(read_file(dir / "run" / "metrics.csv").starts_with("step,epoch,")) << read_file(dir / "run" / "metrics.csv");
}

// Output into a pipe whose reader is gone (`sprintnet train | head -3`): SIGPIPE used to kill the run before its
// first checkpoint. The run now trains to its end; the lost output makes the exit non-zero.
TEST(TrainCli, AClosedPipeLosesTheOutputNotTheRun) {
  const fs::path dir = test::temp_dir("train-cli-pipe");
  const fs::path config = write_tiny_config(dir, 2);
  const int status = wait_for(start_cli({"train", config.string()}, dir / "log.txt", [] {
    int ends[2];
    if (::pipe(ends) != 0) ::_exit(126);
    ::close(ends[0]);  // no reader
    ::dup2(ends[1], 1);
    ::dup2(ends[1], 2);
  }));
  EXPECT_EQ(exit_code(status), 1);
  EXPECT_EQ(metrics_rows(dir / "run"), 2u);
  EXPECT_TRUE(fs::exists(dir / "run" / "model.safetensors"));
  EXPECT_EQ(latest_checkpoint(dir / "run").filename(), "epoch-0002");
}

// A full disk under stdout: the output is lost, so not exit 0 (predict --json > out.json would leave half a file).
TEST(TrainCli, OutputToAFullDeviceIsAnError) {
  const fs::path dir = test::temp_dir("train-cli-full");
  const fs::path log = dir / "log.txt";
  const int status = wait_for(start_cli({"config", "--reference"}, log, [] {
    const int full = ::open("/dev/full", O_WRONLY);
    if (full >= 0) ::dup2(full, 1);
  }));
  EXPECT_EQ(exit_code(status), 1);
  EXPECT_THAT(read_file(log), HasSubstr("sprintnet: error: writing the output to stdout failed"));
}

// A file size limit (`ulimit -f`): SIGXFSZ used to kill the run in its first checkpoint. Now the write fails and
// the error names the file.
TEST(TrainCli, AFileSizeLimitIsANamedError) {
  const fs::path dir = test::temp_dir("train-cli-fsize");
  const fs::path log = dir / "log.txt";
  const fs::path config = write_tiny_config(dir, 2);
  const int status = wait_for(start_cli({"train", config.string(), "-q"}, log, [] {
    const rlimit limit{64 * 1024, 64 * 1024};  // above the log and metrics, below the weights (100 KB)
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }));
  EXPECT_EQ(exit_code(status), 1) << read_file(log);
  EXPECT_THAT(read_file(log), HasSubstr("File too large"));
}

// OpenBLAS (the fp64 products) is opened on first use, not linked: its initialiser, run before main(), retried
// for ever where the address space was capped below what its buffers and CUDA's libraries need together, so
// `sprintnet --help` hung under `ulimit -v 500000` (ops/cpu/openblas_library.h). A training run never opens it:
// the loader's own log of the libraries it initialises (LD_DEBUG=libs) has no OpenBLAS in it.
TEST(TrainCli, TrainingNeverOpensOpenBlas) {
  const fs::path dir = test::temp_dir("train-cli-no-openblas");
  const fs::path log = dir / "log.txt";
  const fs::path config = write_tiny_config(dir, 1);
  const test::ScopedEnv loader_log("LD_DEBUG", "libs");
  const int status = wait_for(start_cli({"train", config.string(), "-q"}, log));
  const std::string said = read_file(log);
  EXPECT_EQ(exit_code(status), 0) << said;
  EXPECT_THAT(said, HasSubstr("calling init:")) << "the loader's log is missing: the test cannot see what loads";
  EXPECT_THAT(said, Not(HasSubstr("libopenblas")));
}

// NNODES=01 is one node: the run trains in this process. `train` read it as text ("several nodes") and started a
// job of one rank, which started another, without end. (A rank dies with its launcher, PR_SET_PDEATHSIG: killing
// the first on the deadline ends the chain if it comes back.)
TEST(TrainCli, NnodesWrittenOtherwiseThanOneIsOneNode) {
  const fs::path dir = test::temp_dir("train-cli-nnodes");
  const fs::path log = dir / "log.txt";
  const fs::path config = write_tiny_config(dir, 1);
  const test::ScopedEnv nodes("NNODES", "01");
  const std::optional<int> status = wait_at_most_a_minute(start_cli({"train", config.string(), "-q"}, log));
  const std::string said = read_file(log);
  ASSERT_TRUE(status) << "`NNODES=01 sprintnet train` still ran after 60 s:\n" << said;
  EXPECT_EQ(exit_code(*status), 0) << said;
  EXPECT_THAT(said, AllOf(HasSubstr("sprintnet: 1 epoch in"), Not(HasSubstr("data-parallel"))));
}

// `sprintnet train` of a tiny config, with the variables the test set, refused before it trains: exit 1, saying
// `message`, no run folder.
void expect_train_refused(const std::string& name, const std::string& message) {
  const fs::path dir = test::temp_dir(name);
  const fs::path log = dir / "log.txt";
  const fs::path config = write_tiny_config(dir, 1);
  const std::optional<int> status = wait_at_most_a_minute(start_cli({"train", config.string(), "-q"}, log));
  const std::string said = read_file(log);
  ASSERT_TRUE(status) << said;
  EXPECT_EQ(exit_code(*status), 1) << said;
  EXPECT_THAT(said, AllOf(HasSubstr(message), Not(HasSubstr("1 epoch in"))));
  EXPECT_FALSE(fs::exists(dir / "run"));
}

// NODE_RANK=1 without NNODES trained a job of its own on this machine, silently: refused, naming both variables.
TEST(TrainCli, NodeRankWithoutNnodesIsRefused) {
  const test::ScopedEnv node("NODE_RANK", "1");
  expect_train_refused("train-cli-node-rank", "NODE_RANK=1 without NNODES");
}

// NNODES=0 trained as one node, silently (only NNODES above 1 reached the launcher, which refuses it): refused, naming
// NNODES and its value, NODE_RANK or not.
TEST(TrainCli, NnodesZeroIsRefused) {
  const test::ScopedEnv nodes("NNODES", "0");
  expect_train_refused("train-cli-nnodes-zero", "NNODES=0: a job runs on one machine or more");
  const test::ScopedEnv node("NODE_RANK", "1");
  expect_train_refused("train-cli-nnodes-zero-node-rank", "NNODES=0: a job runs on one machine or more");
}

// NODE_RANK=1 with NNODES=1 was refused as "NODE_RANK=1 without NNODES", which NNODES was not: the message says the
// NNODES it was given.
TEST(TrainCli, NodeRankWithNnodesOneNamesItsNnodes) {
  const test::ScopedEnv nodes("NNODES", "1");
  const test::ScopedEnv node("NODE_RANK", "1");
  expect_train_refused("train-cli-node-rank-one-node", "NODE_RANK=1 with NNODES=1");
}

// The hang itself, under the limit it hung at: the help ends, at once.
TEST(TrainCli, AnAddressSpaceLimitDoesNotHangTheStart) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space for its shadow: no limit leaves it room";
#endif
  const fs::path dir = test::temp_dir("train-cli-as-limit");
  const fs::path log = dir / "log.txt";
  const std::optional<int> status = wait_at_most_a_minute(start_cli({"--help"}, log, [] {
    const rlimit limit{500'000'000, 500'000'000};
    ::setrlimit(RLIMIT_AS, &limit);
  }));
  ASSERT_TRUE(status) << "`sprintnet --help` under a 500 MB address-space limit still ran after 60 s:\n" << read_file(log);
  EXPECT_EQ(exit_code(*status), 0) << read_file(log);
}

// `sprintnet sweep` on Ctrl-C: the runs in flight stop after their epoch with its checkpoint, the sweep says how
// to continue and ends by the signal. (The resume continuing them: sweep_test.)
TEST(SweepCli, StopsOnASignalWithTheRunsInFlightCheckpointed) {
  const fs::path dir = test::temp_dir("sweep-cli-stop");
  const fs::path config = write_tiny_config(dir, 5000);
  const fs::path log = dir / "log.txt";
  const fs::path out = dir / "sweep";
  const pid_t pid =
      start_cli({"sweep", config.string(), "--grid", "optim.lr=0.1,0.05", "--parallel", "2", "--out", out.string()}, log);
  ASSERT_TRUE(wait_for_rows(pid, out / "optim.lr=0.1" / "metrics.jsonl", 2)) << read_file(log);
  ASSERT_TRUE(wait_for_rows(pid, out / "optim.lr=0.05" / "metrics.jsonl", 2)) << read_file(log);
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  const int status = wait_for(pid);
  const std::string said = read_file(log);
  ASSERT_TRUE(WIFSIGNALED(status)) << said;
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_THAT(said, HasSubstr(fmt::format("sprintnet sweep: stopped by SIGINT with 0 runs finished (0 failed); "
                                          "continue with: sprintnet sweep --resume {}", out.string())));
  // The plan as the runs start, not with the first run's result (this sweep has none: it never showed).
  EXPECT_THAT(said, HasSubstr(fmt::format("sweep: 2 runs into {}\nsweep: 2 runs at a time on the CPU", out.string())));
  for (const char* run : {"optim.lr=0.1", "optim.lr=0.05"}) {
    EXPECT_EQ(read_checkpoint(latest_checkpoint(out / run)).epoch, static_cast<std::int64_t>(metrics_rows(out / run)))
        << run;
  }
}

// A command line that does not parse exits 2 (as argparse), not CLI11's 105-109; a misspelt command is named.
TEST(TrainCli, UsageErrorsExitTwoNamingTheMistake) {
  const fs::path dir = test::temp_dir("train-cli-usage");
  const fs::path log = dir / "log.txt";
  const auto run = [&](const std::vector<std::string>& args) {
    const int status = wait_for(start_cli(args, log));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run({"trian", "config.toml"}), 2);
  EXPECT_THAT(read_file(log), HasSubstr("unknown command 'trian'; the commands: train, eval, predict, config, sweep"));
  EXPECT_EQ(run({"train", "--bogus"}), 2);
  EXPECT_THAT(read_file(log), HasSubstr("--bogus"));
  EXPECT_EQ(run({"train", "--gpus", "0"}), 2);
  // The reference lists defaults: a config or --set beside it was ignored without a word.
  EXPECT_EQ(run({"config", "--reference", "x.toml"}), 2);
  EXPECT_THAT(read_file(log), HasSubstr("config excludes --reference"));
  EXPECT_EQ(run({"config", "--reference", "--set", "seed=1"}), 2);
  EXPECT_EQ(run({"config", "--reference"}), 0);
  EXPECT_EQ(run({"--help"}), 0);
  EXPECT_THAT(read_file(log), HasSubstr("train"));
  EXPECT_EQ(run({"--version"}), 0);
}

}  // namespace
}  // namespace sprintnet::train
