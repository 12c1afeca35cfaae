#pragma once
// The hidden activations the cluster and rows kernels take (GELU and SiLU take the grid or split
// kernel: their slope needs the pre-activation), as a template argument so no epilogue branches on
// it, and f' from the layer's output y (every one of them has one).
#include "sprintnet/ops/cuda/activation_math.cuh"

namespace sprintnet::cuda::fused {

template <ActivationKind kAct>
__device__ __forceinline__ float activation(float x) {
  if constexpr (kAct == ActivationKind::kIdentity) {
    return x;
  } else {
    return activate<kAct>(x);
  }
}

template <ActivationKind kAct>
__device__ __forceinline__ float slope_from_output(float y) {
  if constexpr (kAct == ActivationKind::kReLU) {
    return y > 0.0f ? 1.0f : 0.0f;
  } else if constexpr (kAct == ActivationKind::kIdentity) {
    return 1.0f;
  } else {
    return activate_derivative<kAct>(0.0f, y);
  }
}

}  // namespace sprintnet::cuda::fused
