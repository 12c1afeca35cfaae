#include <cmath>

#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dispatch.h"

namespace sprintnet {

void CpuBackend::sgd_step(const Tensor& param, const Tensor& grad, const Tensor* momentum_buf, const SgdHyper& h) {
  cpu::dispatch_float(param.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t n = param.numel();
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* buf = momentum_buf != nullptr ? momentum_buf->data<T>() : nullptr;
    const T lr = static_cast<T>(h.lr), wd = static_cast<T>(h.weight_decay), mom = static_cast<T>(h.momentum);
    const T keep = static_cast<T>(1.0 - h.dampening);
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelMinElements)
    for (std::int64_t i = 0; i < n; ++i) {
      T d = g[i] + wd * p[i];
      if (h.momentum != 0.0) {
        buf[i] = h.first_step ? d : mom * buf[i] + keep * d;
        d = h.nesterov ? d + mom * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
  });
}

void CpuBackend::adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                           const AdamHyper& h) {
  cpu::dispatch_float(param.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t n = param.numel();
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    T* m = exp_avg.data<T>();
    T* v = exp_avg_sq.data<T>();
    const double bias1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
    const double bias2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
    // The same algebra as torch.optim.Adam(W): step = lr / bias1, denom = sqrt(v) / sqrt(bias2) + eps.
    const T step_size = static_cast<T>(h.lr / bias1), bias2_sqrt = static_cast<T>(std::sqrt(bias2));
    const T b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2), eps = static_cast<T>(h.eps);
    const T decay = static_cast<T>(h.weight_decay), decoupled_keep = static_cast<T>(1.0 - h.lr * h.weight_decay);
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelMinElements)
    for (std::int64_t i = 0; i < n; ++i) {
      T gi = g[i];
      if (h.decoupled) {
        p[i] *= decoupled_keep;
      } else {
        gi += decay * p[i];
      }
      m[i] = b1 * m[i] + (T(1) - b1) * gi;
      v[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
      p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bias2_sqrt + eps);
    }
  });
}

}  // namespace sprintnet
