#include "sprintnet/plot/python_job.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>

#include <fmt/format.h>

#include "sprintnet/core/stop_request.h"

extern char** environ;

namespace sprintnet::plot {
namespace {

constexpr const char* kPythons = "python3 /usr/bin/python3";
// Exits 0 when matplotlib can be imported (without importing it: fast).
constexpr const char* kHasMatplotlib = "import importlib.util, sys; sys.exit(importlib.util.find_spec('matplotlib') is None)";

}  // namespace

int run_quietly(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
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
  if (spawned != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 128;  // (ECHILD: started with SIGCHLD ignored, the child reaped itself)
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string find_python_with_matplotlib() {
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    if (run_quietly({python, "-c", kHasMatplotlib}) == 0) return python;
  }
  return {};
}

bool start_matplotlib_in_background(const std::vector<std::string>& python_args) {
  // sh starts a subshell that tries each python and exits at once; the subshell, orphaned, is
  // reaped by init.
  const std::string job = fmt::format(
      "(for py in {}; do if \"$py\" -c \"{}\"; then exec \"$py\" \"$@\"; fi; done) >/dev/null 2>&1 </dev/null &",
      kPythons, kHasMatplotlib);
  std::vector<std::string> args = {"sh", "-c", job, "sprintnet-plot"};  // the last is sh's $0
  args.insert(args.end(), python_args.begin(), python_args.end());
  return run_quietly(args) == 0;
}

}  // namespace sprintnet::plot
