#pragma once
// One row's loss, first-maximum class and gradient, computed by the group of lanes that holds the
// row's logits (-INFINITY past the classes): softmax cross-entropy with label smoothing (torch's
// formula) or MSE against the one-hot label. The one formula of the fused engine's grid, cluster, split
// and regression kernels (fused_epoch.cu, cluster_epoch.cu, split_epoch_kernel.cuh, regression_epoch.cu),
// for three layouts:
//   SpreadRow<kWidth>      a warp or a half-warp a row, class lane + kWidth j in value j (j < 2): the
//                          grid kernel (a warp a row), the regression kernel (two rows a warp)
//   FragmentRow<kTiles>    the accumulator of mma.m16n8 tiles: a quad of lanes a row, lane t holding
//                          classes 8 nt + 2 t + e in value 2 nt + e (the cluster kernel's logits)
//   ThreadRow<kClasses>    a thread a row, every class (the split kernel)
#include <cmath>

#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"

namespace sprintnet::cuda::fused {

template <int kWidth>
struct SpreadRow {
  static_assert(kWidth == 16 || kWidth == 32, "a warp or a half-warp");
  static constexpr int kLanes = kWidth, kPerLane = 2;
  __device__ static int lane() { return static_cast<int>(threadIdx.x) % kWidth; }
  __device__ static int class_of(int lane, int j) { return lane + kWidth * j; }
  __device__ static int lane_of(int cls) { return cls % kWidth; }
  __device__ static int value_of(int cls) { return cls / kWidth; }
};

template <int kTiles>
struct FragmentRow {
  static constexpr int kLanes = 4, kPerLane = 2 * kTiles;
  __device__ static int lane() { return static_cast<int>(threadIdx.x) & 3; }
  __device__ static int class_of(int lane, int j) { return (j >> 1) * 8 + 2 * lane + (j & 1); }
  __device__ static int lane_of(int cls) { return (cls & 7) >> 1; }
  __device__ static int value_of(int cls) { return (cls >> 3) * 2 + (cls & 1); }
};

template <int kClasses>
struct ThreadRow {
  static constexpr int kLanes = 1, kPerLane = kClasses;
  __device__ static int lane() { return 0; }
  __device__ static int class_of(int, int j) { return j; }
  __device__ static int lane_of(int) { return 0; }
  __device__ static int value_of(int cls) { return cls; }
};

template <int kPerLane>
struct RowLoss {
  double loss;              // MSE: the sum over classes (the callers divide); 0 without metrics
  int best_index;           // the first maximum (ties to the lower class, as torch.argmax); metrics only
  float grad[kPerLane];     // grad_scale times d(loss)/d(logit) for the lane's classes (0 past the classes)
};

// The sum over a group of kLanes lanes (every lane gets it).
template <int kLanes, typename T>
__device__ inline T group_sum(T v) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

// `metrics` false: only the gradient (the cluster kernel's blocks other than 0, which keep no loss).
template <typename Layout>
__device__ inline RowLoss<Layout::kPerLane> row_loss(const float (&v)[Layout::kPerLane], int classes, int label,
                                                     bool mse, float smoothing, float grad_scale,
                                                     bool metrics = true) {
  constexpr int kLanes = Layout::kLanes, kPer = Layout::kPerLane;
  const int lane = Layout::lane();
  RowLoss<kPer> r{};
  r.best_index = Layout::class_of(lane, 0);
  float best = v[0];
  if (metrics) {
#pragma unroll
    for (int j = 1; j < kPer; ++j) {  // classes rise with j: the first maximum stays
      if (v[j] > best) {
        best = v[j];
        r.best_index = Layout::class_of(lane, j);
      }
    }
    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(kFullWarpMask, best, offset);
      const int other_index = __shfl_xor_sync(kFullWarpMask, r.best_index, offset);
      if (other > best || (other == best && other_index < r.best_index)) {
        best = other;
        r.best_index = other_index;
      }
    }
  } else {
#pragma unroll
    for (int j = 1; j < kPer; ++j) best = fmaxf(best, v[j]);
    for (int offset = kLanes / 2; offset > 0; offset /= 2) best = fmaxf(best, __shfl_xor_sync(kFullWarpMask, best, offset));
  }
  if (mse) {
    float sq = 0.0f;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int cls = Layout::class_of(lane, j);
      if (cls >= classes) continue;
      const float diff = v[j] - (cls == label ? 1.0f : 0.0f);
      sq += diff * diff;
      r.grad[j] = grad_scale * diff;
    }
    if (metrics) r.loss = static_cast<double>(group_sum<kLanes>(sq));
    return r;
  }
  // softmax = e / sum(e), e = exp(v - best): one hardware exp a class (relative error ~2^-21, far below
  // the bf16 or fp16 rounding of the gradient the kernels store) and one reciprocal; -INFINITY past the
  // classes gives e = 0. Kept for the gradient up to 4 a lane; more would spill (recomputed).
  constexpr bool kKeep = kPer <= 4;
  float e_of[kKeep ? kPer : 1];
  float exp_sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const float ex = __expf(v[j] - best);
    if constexpr (kKeep) e_of[j] = ex;
    exp_sum += ex;
  }
  exp_sum = group_sum<kLanes>(exp_sum);
  const float inv_sum = rcp_approx(exp_sum);  // exp_sum >= 1: the maximum contributes 1
  // An approximate division (2 ulp): the IEEE one's slow path is a call, whose registers cost the
  // cluster kernel 16 bytes of spills (ptxas -v).
  const float off_target = __fdividef(smoothing, static_cast<float>(classes));
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int cls = Layout::class_of(lane, j);
    const float target = (cls == label ? 1.0f - smoothing : 0.0f) + off_target;
    const float ex = kKeep ? e_of[kKeep ? j : 0] : __expf(v[j] - best);
    r.grad[j] = cls < classes ? grad_scale * fmaf(ex, inv_sum, -target) : 0.0f;
  }
  if (metrics) {
    float gap_sum = 0.0f, held = v[0];
    const int label_value = Layout::value_of(label);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (Layout::class_of(lane, j) < classes) gap_sum += best - v[j];
      if (j == label_value) held = v[j];  // a select, not a dynamic index into the registers
    }
    gap_sum = group_sum<kLanes>(gap_sum);
    float target_logit = held;
    if constexpr (kLanes > 1) target_logit = __shfl_sync(kFullWarpMask, held, Layout::lane_of(label), kLanes);
    // From the gaps to the maximum, as row_softmax.cuh: lse - x[label] cancels for logits near FLT_MAX.
    r.loss = static_cast<double>(logf(exp_sum)) +
             (1.0 - smoothing) * (static_cast<double>(best) - static_cast<double>(target_logit)) +
             (smoothing != 0.0f ? static_cast<double>(off_target) * static_cast<double>(gap_sum) : 0.0);
  }
  return r;
}

}  // namespace sprintnet::cuda::fused
