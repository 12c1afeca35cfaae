#include "sprintnet/ops/cpu/jit_signal_shield.h"

#include <omp.h>
#include <pthread.h>

#include <initializer_list>

namespace sprintnet::cpu {
namespace {

thread_local int shields_held = 0;  // on this thread: an inner shield finds its team shielded already

sigset_t make_asynchronous_signals() {
  sigset_t set;
  sigfillset(&set);
  for (const int synchronous : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&set, synchronous);
  return set;
}

const sigset_t& asynchronous_signals() {
  static const sigset_t set = make_asynchronous_signals();
  return set;
}

// Every worker of this thread's team (the one its next parallel region gets) takes `mask`.
void set_team_workers_mask(const sigset_t& mask) {
  const int team = omp_get_max_threads();
  if (team <= 1) return;
#pragma omp parallel num_threads(team)
  {
    if (omp_get_thread_num() != 0) pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  }
}

}  // namespace

JitSignalShield::JitSignalShield() : outermost_(shields_held++ == 0) {
  if (!outermost_) return;
  pthread_sigmask(SIG_BLOCK, &asynchronous_signals(), &previous_);
  sigset_t blocked;
  pthread_sigmask(SIG_SETMASK, nullptr, &blocked);
  set_team_workers_mask(blocked);
}

JitSignalShield::~JitSignalShield() {
  --shields_held;
  if (!outermost_) return;
  set_team_workers_mask(previous_);  // the mask they would have inherited from this thread
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

}  // namespace sprintnet::cpu
