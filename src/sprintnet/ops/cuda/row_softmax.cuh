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
  float exp_sum = 0.0f, gap_sum = 0.0f;
  for (std::int64_t c = lane; c < classes; c += kWarpSize) {
    const float v = load(c);
    exp_sum += expf(v - max_logit);
    gap_sum += max_logit - v;
  }
  exp_sum = warp_sum(exp_sum);
  gap_sum = warp_sum(gap_sum);
  const float off_target = smoothing / static_cast<float>(classes);  // target = (1-s)*onehot + s/C
  // -sum_c target_c * log_softmax_c = log(exp_sum) + (1-s)*(max - x[label]) + (s/C)*sum_c (max - x_c), from the gaps
  // to the maximum: lse - x[label] would cancel to 0 for logits near FLT_MAX. The gaps may overflow fp32 (their
  // exact sum is in double on the CPU); without smoothing they are not used, and 0 * inf would be NaN.
  const double loss = static_cast<double>(logf(exp_sum)) +
                      (1.0 - smoothing) * (static_cast<double>(max_logit) - static_cast<double>(load(label))) +
                      (smoothing != 0.0f ? static_cast<double>(off_target) * static_cast<double>(gap_sum) : 0.0);
  if (with_grad) {
    // exp(x - max) / exp_sum, not exp(x - lse): lse = max + log(exp_sum) rounds to max near FLT_MAX.
    const float inv_sum = 1.0f / exp_sum;
    __syncwarp();  // every lane has read the target logit
    for (std::int64_t c = lane; c < classes; c += kWarpSize) {
      const float softmax = expf(load(c) - max_logit) * inv_sum;
      const float target = (c == label ? 1.0f - smoothing : 0.0f) + off_target;
      store(c, grad_scale * (softmax - target));
    }
  }
  return loss;
}

}  // namespace sprintnet::cuda
