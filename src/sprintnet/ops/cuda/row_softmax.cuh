#pragma once
// One row's softmax cross-entropy with label smoothing (PyTorch's formula) and its gradient, by a
// warp whose lanes stride over the classes: the eager op (cross_entropy.cu) and the compiled step's
// loss (fused_cross_entropy.cu). The caller finds the row's maximum (it may need its index too).
// log-sum-exp in fp32 shifted by the maximum, so exp never overflows.
#include <cmath>
#include <cstdint>

#include "sprintnet/ops/cuda/launch_config.cuh"

namespace sprintnet::cuda {

// load(c): class c's logit as fp32. With `with_grad`, store(c, g) receives
// g = grad_scale * (softmax_c - target_c) for each class of the lane. Returns the row's loss on
// every lane. The target logit is read, and the warp synchronised, before any store: the gradient
// may overwrite the logits in place.
template <class Load, class Store>
__device__ inline double warp_softmax_cross_entropy(Load load, std::int64_t classes, std::int64_t label,
                                                    float max_logit, float smoothing, float grad_scale, bool with_grad,
                                                    Store store) {
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  float exp_sum = 0.0f, logit_sum = 0.0f;
  for (std::int64_t c = lane; c < classes; c += kWarpSize) {
    const float v = load(c);
    exp_sum += expf(v - max_logit);
    logit_sum += v;
  }
  exp_sum = warp_sum(exp_sum);
  logit_sum = warp_sum(logit_sum);
  const float log_sum_exp = max_logit + logf(exp_sum);
  const float off_target = smoothing / static_cast<float>(classes);  // target = (1-s)*onehot + s/C
  // -sum_c target_c * log_softmax_c = lse - (1-s)*x[label] - (s/C)*sum_c x_c; combined in double,
  // which costs nothing here and avoids a rounding in the cancellation lse - x[label].
  const double loss = static_cast<double>(log_sum_exp) - (1.0 - smoothing) * static_cast<double>(load(label)) -
                      static_cast<double>(off_target) * static_cast<double>(logit_sum);
  if (with_grad) {
    __syncwarp();  // every lane has read the target logit
    for (std::int64_t c = lane; c < classes; c += kWarpSize) {
      const float softmax = expf(load(c) - log_sum_exp);
      const float target = (c == label ? 1.0f - smoothing : 0.0f) + off_target;
      store(c, grad_scale * (softmax - target));
    }
  }
  return loss;
}

}  // namespace sprintnet::cuda
