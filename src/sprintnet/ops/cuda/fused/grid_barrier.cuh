#pragma once
// A grid-wide barrier for a cooperatively launched (so co-resident) grid: one
// monotonic arrival counter in global memory, zeroed before the launch. Barrier
// number n completes when the counter reaches n * gridDim.x; the release add and
// acquire loads order every block's writes before the barrier with every read
// after it, as cooperative groups' grid.sync() does, without its per-call setup.
#include <cstdint>

#include "sprintnet/ops/cuda/fused/stage_stamps.cuh"

namespace sprintnet::cuda {

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void add_release(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

class GridBarrier {
 public:
  // With `clock` set, block 0 records the time each barrier completes (the kernel lab's per-stage
  // profile, SPRINTNET_FUSED_PROFILE): clock[0] is the kernel's start.
  __device__ GridBarrier(unsigned* counter, std::uint64_t* clock, int capacity)
      : counter_(counter), stamps_(clock, capacity, blockIdx.x == 0 && threadIdx.x == 0) {
    stamps_.stamp();
  }

  __device__ void sync() {
    arrive();
    wait();
  }
  // sync() in two halves, for work between them that no other block needs before the barrier: what
  // the block wrote before arrive() is what the barrier publishes.
  __device__ void arrive() {
    target_ += gridDim.x;
    __syncthreads();  // the block's writes happen before thread 0's release
    if (threadIdx.x == 0) add_release(counter_, 1u);
  }
  // A stamp inside a stage (the kernel lab's finer profile), on the same clock as the barriers'.
  __device__ void stamp() { stamps_.stamp(); }
  __device__ void wait() {
    if (threadIdx.x == 0) {
      while (load_acquire(counter_) < target_) {
      }
      stamps_.stamp();
    }
    __syncthreads();  // ... and thread 0's acquire before the block's reads
  }

 private:
  unsigned* counter_;
  StageStamps stamps_;
  unsigned target_ = 0;
};

}  // namespace sprintnet::cuda
