#pragma once
// Checks for CUDA runtime calls, for .cpp (host compiler) and .cu (nvcc) files alike.
//   SN_CUDA_CHECK(cudaMalloc(&p, n));  throws sprintnet::Error naming the CUDA error, the call, file and line
//                                      (sprintnet::OutOfMemoryError for cudaErrorMemoryAllocation)
//   SN_CUDA_CHECK_LAST();              after a kernel launch: reports a bad launch configuration
//   SN_CUDA_WARN(cudaFree(p));         in destructors and noexcept code: prints the error instead of throwing
#include <cstdio>
#include <string>

#include <cuda_runtime_api.h>

#include "sprintnet/core/check_failure.h"

namespace sprintnet::detail {

inline std::string describe_cuda_error(cudaError_t status) {
  return std::string("CUDA error ") + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")";
}

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* file, int line, const char* call) {
  // The error is reported here, so clear it: a later SN_CUDA_CHECK_LAST() must not report it again.
  // (Sticky errors, which corrupt the context, stay whatever we do.)
  static_cast<void>(cudaGetLastError());
  // Out of memory is not sticky, and the user can act on it: its own type, so that the command that
  // knows the run's config can name the keys to lower (train/out_of_memory_advice.h).
  if (status == cudaErrorMemoryAllocation) throw_out_of_memory(file, line, call, describe_cuda_error(status));
  throw_check_failure(file, line, call, describe_cuda_error(status));
}

inline void warn_cuda_error(cudaError_t status, const char* file, int line, const char* call) noexcept {
  static_cast<void>(cudaGetLastError());
  std::fprintf(stderr, "sprintnet: warning: %s:%d: %s failed: %s (%s)\n", file, line, call, cudaGetErrorName(status),
               cudaGetErrorString(status));
}

}  // namespace sprintnet::detail

#define SN_CUDA_CHECK(call)                                                            \
  do {                                                                                 \
    const cudaError_t sn_cuda_status = (call);                                         \
    if (sn_cuda_status != cudaSuccess) {                                               \
      ::sprintnet::detail::throw_cuda_error(sn_cuda_status, __FILE__, __LINE__, #call); \
    }                                                                                  \
  } while (false)

#define SN_CUDA_CHECK_LAST() SN_CUDA_CHECK(cudaGetLastError())

#define SN_CUDA_WARN(call)                                                            \
  do {                                                                                \
    const cudaError_t sn_cuda_status = (call);                                        \
    if (sn_cuda_status != cudaSuccess) {                                              \
      ::sprintnet::detail::warn_cuda_error(sn_cuda_status, __FILE__, __LINE__, #call); \
    }                                                                                 \
  } while (false)
