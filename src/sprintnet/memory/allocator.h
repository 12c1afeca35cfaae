#pragma once
// The interface every memory source implements: the CPU's aligned heap, and on
// CUDA our caching allocator or CUDA's stream-ordered pool. Tensors never call
// malloc/cudaMalloc themselves; they hold a Storage that returns its bytes to
// the allocator it came from.
#include <cstddef>

#include "sprintnet/core/device.h"

namespace sprintnet {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Throws sprintnet::Error (naming the size) when the memory cannot be had: on a device, its
  // subclass sprintnet::OutOfMemoryError when the device has no room (core/out_of_memory_error.h).
  virtual void* allocate(std::size_t bytes) = 0;
  // Never throws: called from destructors.
  virtual void deallocate(void* ptr, std::size_t bytes) noexcept = 0;
  virtual Device device() const = 0;
};

// 64-byte aligned host memory (a cache line; what AVX-512 loads like).
Allocator& cpu_allocator();

}  // namespace sprintnet
