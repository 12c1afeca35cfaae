#include "sprintnet/plot/python_job.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "sprintnet/core/stop_request.h"

extern char** environ;

namespace sprintnet::plot {
namespace {

constexpr const char* kPythons[] = {"python3", "/usr/bin/python3"};
// Exits 0 when matplotlib can be imported (without importing it: fast).
constexpr const char* kHasMatplotlib = "import importlib.util, sys; sys.exit(importlib.util.find_spec('matplotlib') is None)";
// PYTHON -c kLauncher CHECK PYTHON... -- ARGS: runs ARGS with the first PYTHON for which CHECK succeeds. Any python
// can launch: the one that draws is chosen in the background, where a slow pyenv shim keeps nobody waiting.
constexpr const char* kLauncher = R"PY(
import os, subprocess, sys
check, end = sys.argv[1], sys.argv.index("--")
for python in sys.argv[2:end]:
    try:
        if subprocess.run([python, "-c", check]).returncode == 0:
            os.execvp(python, [python] + sys.argv[end + 1:])
    except OSError:  # not installed: the next
        pass
sys.exit(1)
)PY";
// Kept of a failed python's stderr: a traceback's last lines say why.
constexpr int kErrorTailLines = 6;
constexpr std::size_t kKeptErrorBytes = 16384;

// kPythons that are installed, as absolute paths (PATH searched as posix_spawnp does): a forked child execs them
// with execve, since execvp may allocate.
std::vector<std::string> installed_pythons() {
  std::vector<std::string> found;
  for (const std::string_view python : kPythons) {
    if (python.find('/') != std::string_view::npos) {
      if (access(std::string(python).c_str(), X_OK) == 0) found.emplace_back(python);
      continue;
    }
    const char* path = std::getenv("PATH");
    std::string_view dirs = path != nullptr ? path : "/bin:/usr/bin";  // (glibc's search path when PATH is unset)
    while (true) {
      const std::string_view dir = dirs.substr(0, dirs.find(':'));
      const std::string candidate = fmt::format("{}/{}", dir.empty() ? "." : dir, python);
      if (access(candidate.c_str(), X_OK) == 0) {
        found.push_back(candidate);
        break;
      }
      if (dir.size() == dirs.size()) break;
      dirs.remove_prefix(dir.size() + 1);
    }
  }
  return found;
}

// The last `lines` lines of `text`, without the blank ones after them.
std::string last_lines(std::string text, int lines) {
  text.erase(text.find_last_not_of(" \t\r\n") + 1);
  std::size_t start = text.size();
  for (int i = 0; i < lines && start != std::string::npos; ++i) {
    start = start == 0 ? std::string::npos : text.rfind('\n', start - 1);
  }
  return start == std::string::npos ? text : text.substr(start + 1);
}

}  // namespace

int run_quietly(const std::vector<std::string>& args, std::string* error_tail) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int pipe_fds[2] = {-1, -1};  // stderr, read here when error_tail is asked for
  if (error_tail != nullptr && pipe2(pipe_fds, O_CLOEXEC) != 0) error_tail = nullptr;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, error_tail != nullptr ? pipe_fds[1] : 1, 2);
  // The child gets the signal mask this process started with: it blocks SIGINT, SIGTERM and SIGHUP (core/stop_request.h).
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  const sigset_t mask = signal_mask_for_children();
  posix_spawnattr_setsigmask(&attributes, &mask);
  const sigset_t defaults = signals_to_default_in_children();  // (and SIGPIPE and SIGXFSZ ignored)
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error_tail != nullptr) {
    close(pipe_fds[1]);  // (so the read below ends when the child's stderr closes)
    std::string text;
    char buffer[4096];
    while (spawned == 0) {
      const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      text.append(buffer, static_cast<std::size_t>(n));
      if (text.size() > 2 * kKeptErrorBytes) text.erase(0, text.size() - kKeptErrorBytes);  // only the tail is kept
    }
    close(pipe_fds[0]);
    *error_tail = last_lines(std::move(text), kErrorTailLines);
  }
  if (spawned != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 128;  // (ECHILD: started with SIGCHLD ignored, the child reaped itself)
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string find_python_with_matplotlib() {
  for (const char* python : kPythons) {
    if (run_quietly({python, "-c", kHasMatplotlib}) == 0) return python;
  }
  return {};
}

std::string start_matplotlib_in_background(const std::vector<std::string>& python_args) {
  const std::vector<std::string> launchers = installed_pythons();
  if (launchers.empty()) {
    const char* path = std::getenv("PATH");
    return fmt::format("no python3 on PATH ({}) nor at /usr/bin/python3 (Debian: apt install python3-matplotlib)",
                       path != nullptr ? path : "unset");
  }
  // Every argv is built before fork: the child of a multithreaded process (the signal thread, CUDA's) may only make
  // async-signal-safe calls until exec, as in dist/launcher.cpp.
  std::vector<std::string> tail = {"-c", kLauncher, kHasMatplotlib};
  tail.insert(tail.end(), std::begin(kPythons), std::end(kPythons));
  tail.emplace_back("--");
  tail.insert(tail.end(), python_args.begin(), python_args.end());
  std::vector<std::vector<char*>> argvs;
  for (const std::string& launcher : launchers) {
    std::vector<char*>& argv = argvs.emplace_back();
    argv.push_back(const_cast<char*>(launcher.c_str()));
    for (const std::string& a : tail) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
  }
  const sigset_t mask = signal_mask_for_children();
  const sigset_t defaults = signals_to_default_in_children();
  const pid_t child = fork();
  if (child < 0) return fmt::format("cannot start a process: {}", std::strerror(errno));
  if (child == 0) {
    // As sh starts `cmd &`: Ctrl-C and Ctrl-\ ignored (a stop of ours is no reason to lose the picture), output
    // and input /dev/null, never ours.
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGQUIT, SIG_IGN);
    for (int signal = 1; signal < NSIG; ++signal) {
      if (sigismember(&defaults, signal) == 1) std::signal(signal, SIG_DFL);
    }
    pthread_sigmask(SIG_SETMASK, &mask, nullptr);
    const int null = open("/dev/null", O_RDWR);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0) _exit(127);
    // This child exits at once: its own child, the job, is orphaned and init reaps it; nobody here waits for it.
    if (fork() != 0) _exit(0);
    for (const std::vector<char*>& argv : argvs) execve(argv[0], argv.data(), environ);
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return {};
}

}  // namespace sprintnet::plot
