#pragma once
// One row's loss, first-maximum class and gradient, computed by a group of kWidth lanes (a warp, or
// a half-warp: two rows at once) holding the row's logits (class lane in v[0], class lane + kWidth in
// v[1], -INFINITY past the classes; lane: the thread's index in its group): softmax cross-entropy
// with label smoothing (torch's formula) or MSE against the one-hot label. Shared by the fused
// engine's grid, cluster and regression kernels (fused_epoch.cu, cluster_epoch.cu, regression_epoch.cu).
#include <cmath>

#include "sprintnet/ops/cuda/launch_config.cuh"

namespace sprintnet::cuda::fused {

struct RowLoss {
  double loss;     // MSE: the sum over classes (the callers divide)
  int best_index;  // the first maximum (ties to the lower class, as torch.argmax)
  float grad[2];   // grad_scale times d(loss)/d(logit) for the lane's two classes (0 past the classes)
};

// The sum over a group of kWidth lanes (every lane gets it).
template <int kWidth, typename T>
__device__ inline T group_sum(T v) {
  for (int offset = kWidth / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

template <int kWidth = kWarpSize>
__device__ inline RowLoss warp_row_loss(const float (&v)[2], int classes, int label, bool mse, float smoothing,
                                        float grad_scale) {
  static_assert(kWidth == 16 || kWidth == 32, "a warp or a half-warp");
  const int lane = static_cast<int>(threadIdx.x) % kWidth;
  RowLoss r{0.0, lane, {0.0f, 0.0f}};
  float best = v[0];
  if (v[1] > best) {
    best = v[1];
    r.best_index = lane + kWidth;
  }
  for (int offset = kWidth / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullWarpMask, best, offset);
    const int other_index = __shfl_xor_sync(kFullWarpMask, r.best_index, offset);
    if (other > best || (other == best && other_index < r.best_index)) {
      best = other;
      r.best_index = other_index;
    }
  }
  if (mse) {
    float sq = 0.0f;
    for (int j = 0; j < 2; ++j) {
      const int cls = lane + kWidth * j;
      if (cls >= classes) continue;
      const float diff = v[j] - (cls == label ? 1.0f : 0.0f);
      sq += diff * diff;
      r.grad[j] = grad_scale * diff;
    }
    r.loss = static_cast<double>(group_sum<kWidth>(sq));
    return r;
  }
  const float off_target = smoothing / static_cast<float>(classes);
  float exp_sum = 0.0f, logit_sum = 0.0f;
  for (int j = 0; j < 2; ++j) {
    if (lane + kWidth * j >= classes) continue;
    exp_sum += expf(v[j] - best);
    logit_sum += v[j];
  }
  exp_sum = group_sum<kWidth>(exp_sum);
  logit_sum = group_sum<kWidth>(logit_sum);
  const float log_sum_exp = best + logf(exp_sum);
  const float target_logit = __shfl_sync(kFullWarpMask, v[label / kWidth], label % kWidth, kWidth);
  r.loss = static_cast<double>(log_sum_exp) - (1.0 - smoothing) * static_cast<double>(target_logit) -
           static_cast<double>(off_target) * static_cast<double>(logit_sum);
  for (int j = 0; j < 2; ++j) {
    const int cls = lane + kWidth * j;
    if (cls >= classes) continue;
    const float target = (cls == label ? 1.0f - smoothing : 0.0f) + off_target;
    r.grad[j] = grad_scale * (expf(v[j] - log_sum_exp) - target);
  }
  return r;
}

}  // namespace sprintnet::cuda::fused
