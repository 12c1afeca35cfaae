#include "sprintnet/dist/launcher.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "sprintnet/core/error.h"
#include "sprintnet/core/stop_request.h"
#include "sprintnet/dist/rank_info.h"

extern char** environ;

namespace sprintnet::dist {

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  SN_CHECK(fd >= 0, "cannot open a socket to find a free port: {}", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  SN_CHECK(ok, "cannot find a free port: {}", std::strerror(errno));
  return ntohs(addr.sin_port);
}

void launch_local_ranks(int gpus, const std::string& program, const std::vector<std::string>& args) {
  SN_CHECK(gpus >= 1, "--gpus {}: at least one", gpus);
  // Several machines: NNODES and NODE_RANK (as torchrun's --nnodes/--node_rank) place this machine's
  // ranks, and MASTER_ADDR/MASTER_PORT name node 0, where global rank 0 hosts NCCL's bootstrap.
  const Environment env = process_environment();
  const int nnodes = node_count(env);  // strictly: "abc" is not node 0
  const int node = node_rank(env);
  SN_CHECK(nnodes >= 1 && node < nnodes, "NNODES={} NODE_RANK={}: NODE_RANK must be below NNODES", nnodes, node);
  SN_CHECK(static_cast<std::int64_t>(nnodes) * gpus < kMaxRanks, "NNODES={} x --gpus {}: more than the {} ranks a job "
           "may have", nnodes, gpus, kMaxRanks - 1);
  std::string master = "127.0.0.1", port;
  if (nnodes > 1) {
    const char* addr = std::getenv("MASTER_ADDR");
    const char* p = std::getenv("MASTER_PORT");
    SN_CHECK(addr != nullptr && p != nullptr, "NNODES={}: MASTER_ADDR and MASTER_PORT must name node 0 and a free port",
             nnodes);
    master = addr;
    port = p;
  } else {
    port = std::to_string(free_port());
  }
  const int world = nnodes * gpus;
  // Started with SIGCHLD ignored (which exec keeps), the ranks would reap themselves and their exit codes be lost:
  // waiting for all of them, the launcher saw none fail.
  std::signal(SIGCHLD, SIG_DFL);
  const pid_t launcher = getpid();
  std::vector<pid_t> pids;
  // This process blocks SIGINT, SIGTERM and SIGHUP and ignores SIGPIPE and SIGXFSZ (core/stop_request.h): a rank
  // starts as a process started from the shell would.
  const sigset_t child_mask = signal_mask_for_children();
  const sigset_t child_defaults = signals_to_default_in_children();
  // Each rank's argv and environment are built before fork: the child of a multithreaded process (the signal
  // thread, CUDA's) may only make async-signal-safe calls until exec, and setenv and malloc are not.
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> replaced = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  std::vector<std::string> inherited;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const bool replaced_here = std::ranges::any_of(replaced, [&](const std::string& name) {
      return entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=';
    });
    if (!replaced_here) inherited.emplace_back(entry);
  }
  for (int rank = 0; rank < gpus; ++rank) {
    const std::string cannot_run = fmt::format("sprintnet: rank {}: cannot run {}\n", rank, program);
    std::vector<std::string> environment = inherited;
    environment.push_back(fmt::format("RANK={}", node * gpus + rank));
    environment.push_back(fmt::format("LOCAL_RANK={}", rank));
    environment.push_back(fmt::format("WORLD_SIZE={}", world));
    environment.push_back("MASTER_ADDR=" + master);
    environment.push_back("MASTER_PORT=" + port);
    std::vector<char*> envp;
    for (std::string& e : environment) envp.push_back(e.data());
    envp.push_back(nullptr);
    const pid_t pid = fork();
    SN_CHECK(pid >= 0, "cannot start rank {}: {}", rank, std::strerror(errno));
    if (pid == 0) {
      pthread_sigmask(SIG_SETMASK, &child_mask, nullptr);
      for (int signal = 1; signal < NSIG; ++signal) {
        if (sigismember(&child_defaults, signal) == 1) std::signal(signal, SIG_DFL);
      }
      // A rank ends with its launcher: killed alone (a supervisor signals only its main process), the launcher
      // would leave its ranks training on, holding their GPUs. (The check covers a launcher gone before prctl.)
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != launcher) _exit(143);
      execve(program.c_str(), argv.data(), envp.data());
      [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, cannot_run.data(), cannot_run.size());
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::string failure;
  // After a failure: SIGTERM to the others now, SIGKILL to those still unreaped 10 s later. Only unreaped ranks are
  // signalled (a reaped rank's PID may already be another process's).
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  bool killed = false;
  const auto signal_unreaped = [&pids](int signal) {
    for (const pid_t other : pids) {
      if (other > 0) kill(other, signal);
    }
  };
  // Each rank is waited for by its PID, polled: waitpid(-1) also reaped children this process had before it became
  // the launcher (`sh -c 'sleep 1 & exec sprintnet train ...'`), counted them as ranks, and returned success with a
  // rank still running, which PR_SET_PDEATHSIG then killed.
  while (std::ranges::any_of(pids, [](pid_t pid) { return pid > 0; })) {
    bool reaped = false;
    for (std::size_t rank = 0; rank < pids.size(); ++rank) {
      if (pids[rank] <= 0) continue;
      int status = 0;
      const pid_t pid = waitpid(pids[rank], &status, WNOHANG);
      if (pid == 0 || (pid < 0 && errno == EINTR)) continue;
      pids[rank] = -1;
      reaped = true;
      const bool ok = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (ok || !failure.empty()) continue;
      const int global = node * gpus + static_cast<int>(rank);
      if (pid < 0) {
        failure = fmt::format("rank {} ended, its exit status lost ({})", global, std::strerror(errno));
      } else if (WIFEXITED(status)) {
        failure = fmt::format("rank {} exited with code {}", global, WEXITSTATUS(status));
      } else {
        failure = fmt::format("rank {} was killed by signal {}", global, WTERMSIG(status));
      }
      signal_unreaped(SIGTERM);
      kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    }
    if (kill_at && !killed && std::chrono::steady_clock::now() >= *kill_at) {
      signal_unreaped(SIGKILL);
      killed = true;
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  SN_CHECK(failure.empty(), "data-parallel job of {} GPUs failed: {}; this machine's other ranks were stopped", world,
           failure);
}

}  // namespace sprintnet::dist
