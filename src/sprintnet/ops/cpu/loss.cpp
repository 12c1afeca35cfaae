#include <cmath>
#include <limits>

#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dispatch.h"

namespace sprintnet {
namespace {

void check_label_range(const Tensor& labels, std::int64_t classes) {
  const std::int32_t* y = labels.data<std::int32_t>();
  for (std::int64_t n = 0; n < labels.numel(); ++n) {
    SN_CHECK(y[n] >= 0 && y[n] < classes, "label {} at row {} is outside [0, {})", y[n], n, classes);
  }
}

// Adds `value` to a one-element fp32/fp64 tensor.
void accumulate_scalar(const Tensor& sum, double value) {
  if (sum.dtype() == DType::kF32) {
    sum.data<float>()[0] += static_cast<float>(value);
  } else {
    sum.data<double>()[0] += value;
  }
}

}  // namespace

void CpuBackend::cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing,
                               const Tensor& loss_sum, double loss_scale, const Tensor* dlogits, double grad_scale) {
  const std::int64_t rows = logits.size(0), classes = logits.size(1);
  check_label_range(labels, classes);
  cpu::dispatch_float(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = logits.data<T>();
    const std::int32_t* y = labels.data<std::int32_t>();
    T* dx = dlogits != nullptr ? dlogits->data<T>() : nullptr;
    const double smooth = label_smoothing, off_target = smooth / static_cast<double>(classes);
    double total = 0.0;  // summed in row order: deterministic
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * classes;
      T max_logit = row[0];
      for (std::int64_t c = 1; c < classes; ++c) max_logit = std::max(max_logit, row[c]);
      const double max = static_cast<double>(max_logit);
      double exp_sum = 0.0, gap_sum = 0.0;
      for (std::int64_t c = 0; c < classes; ++c) {
        exp_sum += std::exp(static_cast<double>(row[c]) - max);
        gap_sum += max - static_cast<double>(row[c]);
      }
      // -sum_c target_c * log_softmax_c with target = (1-s)*onehot + s/C, and log_softmax_c = x_c - max - log(exp_sum):
      // summed from the gaps to the maximum, never as (max + log(exp_sum)) - x_label, which cancels to 0 for logits
      // near FLT_MAX (all 3e38: the loss is log(C), not 0).
      // Without smoothing the gaps' term is left out, not multiplied by 0: a -inf logit makes gap_sum inf, and
      // 0 * inf is NaN where PyTorch's loss is finite.
      total += std::log(exp_sum) + (1.0 - smooth) * (max - static_cast<double>(row[y[r]])) +
               (smooth != 0.0 ? off_target * gap_sum : 0.0);
      if (dx != nullptr) {
        for (std::int64_t c = 0; c < classes; ++c) {
          const double softmax = std::exp(static_cast<double>(row[c]) - max) / exp_sum;
          const double target = (c == y[r] ? 1.0 - smooth : 0.0) + off_target;
          dx[r * classes + c] = static_cast<T>(grad_scale * (softmax - target));
        }
      }
    }
    accumulate_scalar(loss_sum, loss_scale * total);
  });
}

void CpuBackend::mse_one_hot(const Tensor& pred, const Tensor& labels, const Tensor& loss_sum, double loss_scale,
                             const Tensor* dpred, double grad_scale) {
  const std::int64_t rows = pred.size(0), classes = pred.size(1);
  check_label_range(labels, classes);
  cpu::dispatch_float(pred.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* p = pred.data<T>();
    const std::int32_t* y = labels.data<std::int32_t>();
    T* dp = dpred != nullptr ? dpred->data<T>() : nullptr;
    double total = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < classes; ++c) {
        const double diff = static_cast<double>(p[r * classes + c]) - (c == y[r] ? 1.0 : 0.0);
        total += diff * diff;
        if (dp != nullptr) dp[r * classes + c] = static_cast<T>(grad_scale * 2.0 * diff);
      }
    }
    accumulate_scalar(loss_sum, loss_scale * total);
  });
}

void CpuBackend::count_correct(const Tensor& logits, const Tensor& labels, const Tensor& correct) {
  const std::int64_t rows = logits.size(0), classes = logits.size(1);
  cpu::dispatch_float(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = logits.data<T>();
    const std::int32_t* y = labels.data<std::int32_t>();
    std::int32_t hits = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t best = 0;
      for (std::int64_t c = 1; c < classes; ++c) {
        if (x[r * classes + c] > x[r * classes + best]) best = c;
      }
      hits += best == y[r] ? 1 : 0;
    }
    correct.data<std::int32_t>()[0] += hits;
  });
}

}  // namespace sprintnet
