#pragma once
// The error thrown when the device has no room for a request: by a device allocator (and the host's), by
// SN_CUDA_CHECK for cudaErrorMemoryAllocation (core/cuda_check.h: cuBLASLt's workspace, streams,
// graphs) and for cuBLASLt's CUBLAS_STATUS_ALLOC_FAILED. A sprintnet::Error of its own type, so
// the code that knows what sized the request (a run's config, in train/out_of_memory_advice.h)
// can catch exactly this and say what to change, while everything else still sees an Error.
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "sprintnet/core/error.h"

namespace sprintnet {

// How the host allocator's OutOfMemoryError begins (memory/cpu_allocator.cpp), so advice can tell it apart.
inline constexpr std::string_view kOutOfHostMemory = "out of host memory";

class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

}  // namespace sprintnet

// SN_FAIL_OUT_OF_MEMORY("format {}", args...): SN_FAIL, throwing OutOfMemoryError.
#define SN_FAIL_OUT_OF_MEMORY(...) \
  ::sprintnet::detail::throw_out_of_memory(__FILE__, __LINE__, nullptr, fmt::format(__VA_ARGS__))
