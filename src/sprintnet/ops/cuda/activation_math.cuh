// Activation functions and their derivatives as device functions, shared by the
// elementwise kernels (activation.cu), the compiled step's fused epilogues and the
// fused engine. The formulas are those of ops/cpu/activation_math.h (the
// definition of record) in fp32: GELU is the exact erf form; sigmoid is split by
// sign so exp never overflows.
#pragma once

#include "sprintnet/ops/cuda/launch.h"

namespace sprintnet::cuda {

inline constexpr float kSqrtHalf = 0.70710678118654752440f;     // 1 / sqrt(2)
inline constexpr float kInvSqrtTwoPi = 0.39894228040143267794f;  // 1 / sqrt(2 pi)

__device__ __forceinline__ float stable_sigmoid(float x) {
  return x >= 0.0f ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
}

template <ActivationKind kAct>
__device__ __forceinline__ float activate(float x) {
  if constexpr (kAct == ActivationKind::kIdentity) {
    return x;
  } else if constexpr (kAct == ActivationKind::kReLU) {
    return x > 0.0f ? x : 0.0f;
  } else if constexpr (kAct == ActivationKind::kGELU) {
    return 0.5f * x * (1.0f + erff(x * kSqrtHalf));
  } else if constexpr (kAct == ActivationKind::kTanh) {
    return tanhf(x);
  } else if constexpr (kAct == ActivationKind::kSigmoid) {
    return stable_sigmoid(x);
  } else {
    static_assert(kAct == ActivationKind::kSiLU);
    return x * stable_sigmoid(x);
  }
}

// f'(x), given the input x and the output y = f(x).
template <ActivationKind kAct>
__device__ __forceinline__ float activate_derivative(float x, float y) {
  if constexpr (kAct == ActivationKind::kIdentity) {
    return 1.0f;
  } else if constexpr (kAct == ActivationKind::kReLU) {
    return x > 0.0f ? 1.0f : 0.0f;
  } else if constexpr (kAct == ActivationKind::kGELU) {
    const float cdf = 0.5f * (1.0f + erff(x * kSqrtHalf));
    const float pdf = expf(-0.5f * x * x) * kInvSqrtTwoPi;
    return cdf + x * pdf;
  } else if constexpr (kAct == ActivationKind::kTanh) {
    return 1.0f - y * y;
  } else if constexpr (kAct == ActivationKind::kSigmoid) {
    return y * (1.0f - y);
  } else {
    static_assert(kAct == ActivationKind::kSiLU);
    const float s = stable_sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
  }
}

// dx = f'(x) dy; ReLU's a select, as activation_gradient in ops/cpu/activation_math.h (an infinite or
// NaN dy where x <= 0 gives 0, not NaN).
template <ActivationKind kAct>
__device__ __forceinline__ float activation_gradient(float x, float y, float dy) {
  if constexpr (kAct == ActivationKind::kReLU) {
    return x <= 0.0f ? 0.0f : dy;
  } else {
    return activate_derivative<kAct>(x, y) * dy;
  }
}

}  // namespace sprintnet::cuda
