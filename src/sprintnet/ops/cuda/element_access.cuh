#pragma once
// Loads and stores of one element of an ElementType array as fp32: by the type known at run time
// (load_element, store_element), or at compile time (to_float, from_float<T>).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "sprintnet/ops/cuda/step_launch.h"

namespace sprintnet::cuda {

__device__ inline float load_element(const void* p, ElementType t, std::int64_t i) {
  switch (t) {
    case ElementType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case ElementType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case ElementType::kF32: break;
  }
  return static_cast<const float*>(p)[i];
}

__device__ inline void store_element(void* p, ElementType t, std::int64_t i, float v) {
  switch (t) {
    case ElementType::kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); return;
    case ElementType::kF16: static_cast<__half*>(p)[i] = __float2half_rn(v); return;
    case ElementType::kF32: break;
  }
  static_cast<float*>(p)[i] = v;
}

// The same conversions when the element type is a template parameter.
__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float to_float(__half v) { return __half2float(v); }
template <typename T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) { return v; }
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ inline __half from_float<__half>(float v) { return __float2half_rn(v); }
// v as storing it in a T and loading it back gives it (the rounding a T output applies).
template <typename T>
__device__ inline float round_to(float v) { return to_float(from_float<T>(v)); }

}  // namespace sprintnet::cuda
