#include "sprintnet/core/stop_request.h"

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <thread>

#include "sprintnet/core/error.h"

namespace sprintnet {
namespace {

constexpr int kNone = -1;
std::atomic<int> requested{kNone};
std::atomic<bool> stopping_on_signals{false};
std::atomic<bool> signals_taken{false};
sigset_t mask_at_start;
// Signals whose default action ends the process on a failed write (ignore_write_signals).
constexpr int kWriteSignals[] = {SIGPIPE, SIGXFSZ};
sigset_t taken;  // the stop signals this process did not start with ignored: blocked everywhere, waited for

// SIGINT, SIGTERM and SIGHUP, less those ignored at start: `nohup` ignores SIGHUP and a script's `cmd &` SIGINT, and
// Linux still queues a blocked signal that is ignored, so waiting for it would take what the caller shielded us from.
sigset_t stop_signals_not_ignored() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction action = {};
    if (sigaction(signal, nullptr, &action) == 0 && action.sa_handler == SIG_IGN) continue;
    sigaddset(&set, signal);
  }
  return set;
}

void wait_for_signals() {
  const sigset_t set = taken;
  for (;;) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0) continue;
    if (stopping_on_signals.load() && stop_requested()) {
      // The second signal: a progress bar may hold the line, so the shell's prompt gets one of its own.
      std::fprintf(stderr, "\nsprintnet: %s again: stopping now\n", stop_cause_name(signal));
      std::fflush(stderr);
    }
    if (!stopping_on_signals.load() || stop_requested()) end_by_signal(signal);
    request_stop(signal);
    std::fprintf(stderr, "\nsprintnet: %s: stopping after the epoch in progress%s\n", stop_cause_name(signal),
                 signal == SIGINT ? " (Ctrl-C again stops at once)" : "");
    std::fflush(stderr);
  }
}

}  // namespace

void take_signals_in_their_own_thread() {
  if (signals_taken.exchange(true)) return;
  taken = stop_signals_not_ignored();
  pthread_sigmask(SIG_BLOCK, &taken, &mask_at_start);
  std::thread(wait_for_signals).detach();
}

void end_by_signal(int signal) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::signal(signal, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(signal);
  std::_Exit(128 + signal);  // (only if the default action does not end the process)
}

void stop_on_signals() {
  SN_CHECK(signals_taken.load(), "stop_on_signals() needs take_signals_in_their_own_thread() first, in main()");
  stopping_on_signals.store(true);
}

sigset_t signal_mask_for_children() {
  if (signals_taken.load()) return mask_at_start;
  sigset_t current;
  pthread_sigmask(SIG_SETMASK, nullptr, &current);
  return current;
}

void ignore_write_signals() {
  for (const int signal : kWriteSignals) std::signal(signal, SIG_IGN);
}

sigset_t signals_to_default_in_children() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal : kWriteSignals) sigaddset(&set, signal);
  return set;
}

void request_stop(int signal) {
  int none = kNone;
  requested.compare_exchange_strong(none, signal);  // the first request names the cause
}

std::optional<int> stop_requested() {
  const int value = requested.load();
  if (value == kNone) return std::nullopt;
  return value;
}

void clear_stop_request() { requested.store(kNone); }

const char* stop_cause_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a stop request";
  }
}

}  // namespace sprintnet
