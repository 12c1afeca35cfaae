#pragma once
// A grid-wide barrier for a cooperatively launched (so co-resident) grid: one
// monotonic arrival counter in global memory, zeroed before the launch. Barrier
// number n completes when the counter reaches n * gridDim.x; the release add and
// acquire loads order every block's writes before the barrier with every read
// after it, as cooperative groups' grid.sync() does, without its per-call setup.
#include <cstdint>

namespace sprintnet::cuda {

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void add_release(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ std::uint64_t global_nanoseconds() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

class GridBarrier {
 public:
  // With `clock` set, block 0 records the time each barrier completes (the kernel lab's per-stage
  // profile, SPRINTNET_FUSED_PROFILE): clock[0] is the kernel's start.
  __device__ GridBarrier(unsigned* counter, std::uint64_t* clock, int capacity)
      : counter_(counter), clock_(clock), capacity_(capacity) {
    record();
  }

  __device__ void sync() {
    target_ += gridDim.x;
    __syncthreads();  // the block's writes happen before thread 0's release
    if (threadIdx.x == 0) {
      add_release(counter_, 1u);
      while (load_acquire(counter_) < target_) {
      }
      record();
    }
    __syncthreads();  // ... and thread 0's acquire before the block's reads
  }

 private:
  __device__ void record() {
    if (clock_ != nullptr && blockIdx.x == 0 && threadIdx.x == 0 && recorded_ < capacity_) {
      clock_[recorded_] = global_nanoseconds();
    }
    ++recorded_;
  }

  unsigned* counter_;
  std::uint64_t* clock_;
  int capacity_;
  int recorded_ = 0;
  unsigned target_ = 0;
};

}  // namespace sprintnet::cuda
