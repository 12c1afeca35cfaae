#pragma once
// The error thrown when the device has no room for a request: by a device allocator, by
// SN_CUDA_CHECK for cudaErrorMemoryAllocation (core/cuda_check.h: cuBLASLt's workspace, streams,
// graphs) and for cuBLASLt's CUBLAS_STATUS_ALLOC_FAILED. A sprintnet::Error of its own type, so
// the code that knows what sized the request (a run's config, in train/out_of_memory_advice.h)
// can catch exactly this and say what to change, while everything else still sees an Error. The host's
// allocator throws it too, marked as the host's (kind()), so that advice says which memory ran out.
#include <string>

#include <fmt/format.h>

#include "sprintnet/core/error.h"

namespace sprintnet {

// Which memory ran out: a device's, or the host's (memory/cpu_allocator.cpp).
enum class MemoryKind { kDevice, kHost };

class OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(const std::string& message, MemoryKind kind = MemoryKind::kDevice)
      : Error(message), kind_(kind) {}
  MemoryKind kind() const { return kind_; }

 private:
  MemoryKind kind_;
};

}  // namespace sprintnet

// SN_FAIL_OUT_OF_MEMORY("format {}", args...): SN_FAIL, throwing OutOfMemoryError.
#define SN_FAIL_OUT_OF_MEMORY(...) \
  ::sprintnet::detail::throw_out_of_memory(__FILE__, __LINE__, nullptr, fmt::format(__VA_ARGS__))
// SN_FAIL_OUT_OF_HOST_MEMORY("format {}", args...): the same for the host's memory.
#define SN_FAIL_OUT_OF_HOST_MEMORY(...) \
  ::sprintnet::detail::throw_out_of_memory(__FILE__, __LINE__, nullptr, fmt::format(__VA_ARGS__), /*host=*/true)
