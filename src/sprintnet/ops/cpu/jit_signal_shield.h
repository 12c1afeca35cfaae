#pragma once
// While oneDNN's JIT kernels run, asynchronous signals wait. oneDNN 2.x's JIT GEMM points rsp into the heap
// while it runs (oneDNN issue #4845, fixed in 3.11; Debian 12 ships 2.6), so a signal handler that runs on a
// computing thread then writes its frame into the heap and corrupts it: a program embedding the library and
// handling SIGUSR1, SIGALRM or SIGPROF aborted in free() in 20 of 22 CPU runs. The shield blocks every signal
// but the synchronous ones (faults, which the kernels do not raise) on the calling thread for the shield's
// life, and for good on the worker threads of its OpenMP team. A signal sent to the process meanwhile goes to
// another of its threads that takes it, or waits until the product ends (a millisecond or two); none is
// lost. Costs two system calls a product (~0.4 µs, against products of 20 µs to 2 ms).
#include <signal.h>

namespace sprintnet::cpu {

class JitSignalShield {
 public:
  JitSignalShield();
  ~JitSignalShield();
  JitSignalShield(const JitSignalShield&) = delete;
  JitSignalShield& operator=(const JitSignalShield&) = delete;

 private:
  sigset_t previous_;
};

// The signals the shield holds back: all but SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP and SIGSYS.
const sigset_t& asynchronous_signals();

}  // namespace sprintnet::cpu
