#pragma once
// Runs a generic lambda with the C++ type of a floating tensor (float or double).
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

}  // namespace sprintnet::cpu
