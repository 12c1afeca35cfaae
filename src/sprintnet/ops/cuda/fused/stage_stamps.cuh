#pragma once
// The kernel lab's per-stage profile (SPRINTNET_FUSED_PROFILE): one thread (block 0's first) stamps
// the global time at the end of each stage (the cluster and regression kernels) or grid barrier
// (GridBarrier: the grid and split kernels; the split kernel also stamps inside its stages through
// GridBarrier::stamp(), v17) into the host's buffer. Every other thread, and every
// thread of an unprofiled run, holds a null pointer: a stamp is one register test (a test of four
// values at each stamp was 2.4 % of the cluster kernel's instructions, ncu).
#include <cstdint>

namespace sprintnet::cuda {

__device__ __forceinline__ std::uint64_t global_nanoseconds() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

class StageStamps {
 public:
  __device__ StageStamps(std::uint64_t* clock, int capacity, bool stamper)
      : clock_(stamper ? clock : nullptr), capacity_(capacity) {}
  __device__ void stamp() {
    if (clock_ != nullptr) {
      if (count_ < capacity_) clock_[count_] = global_nanoseconds();
      ++count_;
    }
  }

 private:
  std::uint64_t* clock_;
  int capacity_;
  int count_ = 0;
};

}  // namespace sprintnet::cuda
