#pragma once
// Scalar activation functions and their derivatives, shared by the CPU kernels
// and (as the definition of record) documented against PyTorch:
// GELU is the exact erf form (torch.nn.GELU(approximate='none')).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "sprintnet/ops/backend.h"

namespace sprintnet::cpu {

template <typename T>
T sigmoid(T x) {
  return x >= T(0) ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x));
}

template <typename T>
T activate(Activation act, T x) {
  switch (act) {
    case Activation::kIdentity: return x;
    case Activation::kReLU: return std::max(x, T(0));  // a max instruction, not a branch
    case Activation::kGELU: return T(0.5) * x * (T(1) + std::erf(x * T(std::numbers::sqrt2 / 2)));
    case Activation::kTanh: return std::tanh(x);
    case Activation::kSigmoid: return sigmoid(x);
    case Activation::kSiLU: return x * sigmoid(x);
  }
  return x;
}

// f'(x) given input x and output y = f(x).
template <typename T>
T activate_derivative(Activation act, T x, T y) {
  switch (act) {
    case Activation::kIdentity: return T(1);
    case Activation::kReLU: return x > T(0) ? T(1) : T(0);
    case Activation::kGELU: {
      const T cdf = T(0.5) * (T(1) + std::erf(x * T(std::numbers::sqrt2 / 2)));
      const T pdf = std::exp(T(-0.5) * x * x) * T(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
      return cdf + x * pdf;
    }
    case Activation::kTanh: return T(1) - y * y;
    case Activation::kSigmoid: return y * (T(1) - y);
    case Activation::kSiLU: {
      const T s = sigmoid(x);
      return s * (T(1) + x * (T(1) - s));
    }
  }
  return T(1);
}

// dx = f'(x) dy. ReLU's is a select, as PyTorch's threshold_backward: where x <= 0 the gradient is 0
// even when dy is infinite or NaN (an fp16 overflow), which 0 * dy would turn into NaN.
template <typename T>
T activation_gradient(Activation act, T x, T y, T dy) {
  if (act == Activation::kReLU) return x <= T(0) ? T(0) : dy;
  return activate_derivative(act, x, y) * dy;
}

}  // namespace sprintnet::cpu
