#include "sprintnet/plot/python_job.h"

#include <fcntl.h>
#include <poll.h>
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

#include "sprintnet/core/error.h"
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

// A pipe to a child, both ends close-on-exec and above the descriptors a child's file actions write (0 to
// kOutputDescriptor): a dup2 onto 2 never overwrites the end meant for 3 first. Closes what it holds at the end.
struct Pipe {
  int read_end = -1;
  int write_end = -1;

  bool open() {
    int made[2];
    if (pipe2(made, O_CLOEXEC) != 0) return false;
    read_end = fcntl(made[0], F_DUPFD_CLOEXEC, kOutputDescriptor + 1);
    write_end = fcntl(made[1], F_DUPFD_CLOEXEC, kOutputDescriptor + 1);
    const int saved = errno;
    close(made[0]);
    close(made[1]);
    errno = saved;
    return read_end >= 0 && write_end >= 0;
  }
  void close_write_end() {
    if (write_end >= 0) close(write_end);
    write_end = -1;
  }
  ~Pipe() {
    close_write_end();
    if (read_end >= 0) close(read_end);
  }
};

// Reads both pipes (-1: none) until the child closes them, together: a child blocked writing a picture larger than
// a pipe holds would never close its stderr. Of the errors only the tail is kept.
void read_until_closed(int errors_fd, std::string* errors, int output_fd, std::string* output) {
  pollfd fds[2] = {{errors_fd, POLLIN, 0}, {output_fd, POLLIN, 0}};  // (poll skips a negative descriptor)
  std::string* into[2] = {errors, output};
  char buffer[65536];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        fds[i].fd = -1;  // (closed by the Pipe that owns it)
        continue;
      }
      into[i]->append(buffer, static_cast<std::size_t>(n));
      if (i == 0 && errors->size() > 2 * kKeptErrorBytes) errors->erase(0, errors->size() - kKeptErrorBytes);
    }
  }
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

int run_quietly(const std::vector<std::string>& args, std::string* error_tail, std::string* output) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  Pipe errors, picture;  // the child's stderr, read here when error_tail is asked for; its kOutputDescriptor
  if (error_tail != nullptr && !errors.open()) error_tail = nullptr;
  SN_CHECK(output == nullptr || picture.open(), "cannot make a pipe to read {}'s output from: {}", args.front(),
           std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, error_tail != nullptr ? errors.write_end : 1, 2);
  if (output != nullptr) posix_spawn_file_actions_adddup2(&actions, picture.write_end, kOutputDescriptor);
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
  // Closed here, so that the reads below end when the child's ends close (and the child's writes fail once this
  // process is gone: no other process holds a read end).
  errors.close_write_end();
  picture.close_write_end();
  std::string error_text;
  if (spawned == 0) read_until_closed(errors.read_end, &error_text, picture.read_end, output);
  if (error_tail != nullptr) *error_tail = last_lines(std::move(error_text), kErrorTailLines);
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
