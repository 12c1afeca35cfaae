#pragma once
// Runs a generic lambda with the C++ type of a floating tensor (float or double).
#include <omp.h>

#include "sprintnet/core/error.h"
#include "sprintnet/core/tensor.h"

namespace sprintnet::cpu {

template <typename Fn>
void dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: fn(float{}); return;
    case DType::kF64: fn(double{}); return;
    default: SN_FAIL("CPU op needs fp32 or fp64, got {}", dtype_name(dtype));
  }
}

// Loops shorter than this run on one thread: forking costs more than it saves.
inline constexpr std::int64_t kParallelMinElements = 1 << 15;

// Runs body(begin, end) over [0, n): inline when n is small, else one
// contiguous chunk per OpenMP thread. The body's own plain loop is what the
// compiler vectorises (loops inside `omp parallel for` were left scalar by GCC 12).
// `work` (default n) is the element count that decides whether threads pay off.
template <typename Body>
void parallel_chunks(std::int64_t n, Body&& body, std::int64_t work = -1) {
  if ((work < 0 ? n : work) < kParallelMinElements) {
    body(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    body(n * t / threads, n * (t + 1) / threads);
  }
}

}  // namespace sprintnet::cpu
