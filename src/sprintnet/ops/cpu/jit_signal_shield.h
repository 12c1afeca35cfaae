#pragma once
// While oneDNN's JIT kernels run, asynchronous signals wait. oneDNN 2.x's JIT GEMM points rsp into the heap
// while it runs (oneDNN issue #4845, fixed in 3.11; Debian 12 ships 2.6), so a signal handler that runs on a
// computing thread then writes its frame into the heap and corrupts it: a program embedding the library and
// handling SIGUSR1, SIGALRM or SIGPROF aborted in free() in 20 of 22 CPU runs.
//
// A shield blocks every signal but the synchronous ones (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS: faults,
// which the kernels do not raise) on the calling thread and on the worker threads of its OpenMP team, and gives
// each the calling thread's mask back when it ends.
// The workers are blocked anew by every outermost shield: libgomp ends a team's surplus workers when a smaller
// team runs and starts new ones for a larger team, which inherit the mask of the thread that starts them, so a
// record of "blocked once" would not last. Inside a shield, a new worker inherits the blocked mask. A signal sent
// to the process meanwhile goes to another of its threads that takes it, or waits until the shield ends; none is
// lost. The compiled CPU step holds one shield a step (and one an evaluation), DnnlMatmul::run one a product;
// nested, an inner shield costs nothing. An outermost one costs two system calls and two OpenMP fork-joins
// (a few µs; measured in docs/PERFORMANCE.md).

#include <signal.h>

namespace sprintnet::cpu {

class JitSignalShield {
 public:
  JitSignalShield();
  ~JitSignalShield();
  JitSignalShield(const JitSignalShield&) = delete;
  JitSignalShield& operator=(const JitSignalShield&) = delete;

 private:
  bool outermost_;
  sigset_t previous_;  // the calling thread's mask before the outermost shield
};

}  // namespace sprintnet::cpu
