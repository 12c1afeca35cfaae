#include "sprintnet/ops/cpu/jit_signal_shield.h"

#include <omp.h>
#include <pthread.h>

#include <initializer_list>

namespace sprintnet::cpu {
namespace {

sigset_t make_asynchronous_signals() {
  sigset_t set;
  sigfillset(&set);
  for (const int synchronous : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&set, synchronous);
  return set;
}

// The worker threads of this thread's OpenMP team block the signals for good. libgomp keeps a team's
// threads for the next parallel region of the same thread, so this runs again only when the team grows;
// a thread it adds later inside a shield (oneDNN's own parallel region) inherits the blocked mask anyway.
void shield_team_workers() {
  thread_local int shielded_team = 1;  // the calling thread is shielded by the JitSignalShield itself
  const int team = omp_get_max_threads();
  if (team <= shielded_team) return;
#pragma omp parallel num_threads(team)
  {
    if (omp_get_thread_num() != 0) pthread_sigmask(SIG_BLOCK, &asynchronous_signals(), nullptr);
  }
  shielded_team = team;
}

}  // namespace

const sigset_t& asynchronous_signals() {
  static const sigset_t set = make_asynchronous_signals();
  return set;
}

JitSignalShield::JitSignalShield() {
  pthread_sigmask(SIG_BLOCK, &asynchronous_signals(), &previous_);
  shield_team_workers();
}

JitSignalShield::~JitSignalShield() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

}  // namespace sprintnet::cpu
