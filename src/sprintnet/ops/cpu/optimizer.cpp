#include <cmath>
#include <type_traits>

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
    // The variant is chosen once, outside the loop, so the loop has no branch and vectorises.
    auto run = [&](auto use_momentum, auto first_step, auto nesterov) {
      cpu::parallel_chunks(n, [&](std::int64_t begin, std::int64_t end) {
        // Locals, not the captured references: otherwise every store may alias them, GCC reloads
        // them each iteration and leaves the loop scalar (it was 19 % of a compiled CPU step).
        const T lr_ = lr, wd_ = wd, mom_ = mom, keep_ = keep;
        T* __restrict p_ = p;
        T* __restrict buf_ = buf;
        const T* __restrict g_ = g;
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) {
          T d = g_[i] + wd_ * p_[i];
          if constexpr (use_momentum.value) {
            const T b = first_step.value ? d : mom_ * buf_[i] + keep_ * d;
            buf_[i] = b;
            d = nesterov.value ? d + mom_ * b : b;
          }
          p_[i] -= lr_ * d;
        }
      });
    };
    using Yes = std::true_type;
    using No = std::false_type;
    if (h.momentum == 0.0) {
      run(No{}, No{}, No{});
    } else if (h.first_step) {
      h.nesterov ? run(Yes{}, Yes{}, Yes{}) : run(Yes{}, Yes{}, No{});
    } else {
      h.nesterov ? run(Yes{}, No{}, Yes{}) : run(Yes{}, No{}, No{});
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
    // 1 - beta in double, then rounded: in fp32, 1 - float(0.999) is 1.3e-5 relative off PyTorch's value.
    const T one_minus_b1 = static_cast<T>(1.0 - h.beta1), one_minus_b2 = static_cast<T>(1.0 - h.beta2);
    // AdamW shrinks p first (keep = 1 - lr*wd, l2 = 0); Adam adds wd*p to the gradient (keep = 1, l2 = wd).
    // Folding the choice into two constants keeps the loop branch-free.
    const T keep = static_cast<T>(h.decoupled ? 1.0 - h.lr * h.weight_decay : 1.0);
    const T l2 = static_cast<T>(h.decoupled ? 0.0 : h.weight_decay);
    cpu::parallel_chunks(n, [&](std::int64_t begin, std::int64_t end) {
      // Locals and restrict pointers, so the loop vectorises (see sgd_step).
      const T keep_ = keep, l2_ = l2, b1_ = b1, b2_ = b2, c1 = one_minus_b1, c2 = one_minus_b2;
      const T step_ = step_size, bias2_ = bias2_sqrt, eps_ = eps;
      T* __restrict p_ = p;
      T* __restrict m_ = m;
      T* __restrict v_ = v;
      const T* __restrict g_ = g;
#pragma omp simd
      for (std::int64_t i = begin; i < end; ++i) {
        p_[i] *= keep_;
        const T gi = g_[i] + l2_ * p_[i];
        m_[i] = b1_ * m_[i] + c1 * gi;
        v_[i] = b2_ * v_[i] + c2 * gi * gi;
        p_[i] -= step_ * m_[i] / (std::sqrt(v_[i]) / bias2_ + eps_);
      }
    });
  });
}

}  // namespace sprintnet
