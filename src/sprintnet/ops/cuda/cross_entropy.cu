// Softmax cross-entropy with label smoothing, fused with its gradient.
//
// One warp per row: lanes stride over the classes, then butterfly reductions
// give every lane the row's max, sum of exp and sum of logits (log-sum-exp in
// fp32, shifted by the max so exp never overflows). Each row's loss goes to
// row_loss[r]; the batch sum is taken afterwards in a fixed order
// (reduce.cu), so the loss is bit-identical run to run.
#include <cmath>

#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

// dlogits may alias logits: each element is read before it is written, by the same lane.
template <bool kWithGradient>
__global__ void cross_entropy_kernel(const float* logits, const std::int32_t* labels, std::int64_t rows,
                                     std::int64_t classes, float smoothing, double* row_loss, float* dlogits,
                                     float grad_scale, DeviceError* error) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (row >= rows) return;  // the whole warp leaves together: the shuffles below see 32 lanes
  const float* x = logits + row * classes;
  const std::int64_t label = checked_index(labels[row], classes, row, DeviceErrorCode::kCrossEntropyLabel, error);

  float max_logit = -INFINITY;
  for (std::int64_t c = lane; c < classes; c += kWarpSize) max_logit = fmaxf(max_logit, x[c]);
  max_logit = warp_max(max_logit);
  float exp_sum = 0.0f, logit_sum = 0.0f;
  for (std::int64_t c = lane; c < classes; c += kWarpSize) {
    exp_sum += expf(x[c] - max_logit);
    logit_sum += x[c];
  }
  exp_sum = warp_sum(exp_sum);
  logit_sum = warp_sum(logit_sum);
  const float log_sum_exp = max_logit + logf(exp_sum);
  const float off_target = smoothing / static_cast<float>(classes);  // target = (1-s)*onehot + s/C

  // -sum_c target_c * log_softmax_c = lse - (1-s)*x[label] - (s/C)*sum_c x_c; combined in double,
  // which costs nothing here and avoids a rounding in the cancellation lse - x[label].
  if (lane == 0) {
    row_loss[row] = static_cast<double>(log_sum_exp) - (1.0 - smoothing) * static_cast<double>(x[label]) -
                    static_cast<double>(off_target) * static_cast<double>(logit_sum);
  }
  if constexpr (kWithGradient) {
    float* dx = dlogits + row * classes;
    for (std::int64_t c = lane; c < classes; c += kWarpSize) {
      const float softmax = expf(x[c] - log_sum_exp);
      const float target = (c == label ? 1.0f - smoothing : 0.0f) + off_target;
      dx[c] = grad_scale * (softmax - target);
    }
  }
}

}  // namespace

cudaError_t launch_cross_entropy(const float* logits, const std::int32_t* labels, std::int64_t rows,
                                 std::int64_t classes, float label_smoothing, double* row_loss, float* dlogits,
                                 float grad_scale, DeviceError* error, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const NvtxRange range("cross_entropy");
  if (dlogits != nullptr) {
    cross_entropy_kernel<true><<<row_blocks(rows), kRowThreads, 0, stream>>>(logits, labels, rows, classes,
                                                                             label_smoothing, row_loss, dlogits,
                                                                             grad_scale, error);
  } else {
    cross_entropy_kernel<false><<<row_blocks(rows), kRowThreads, 0, stream>>>(logits, labels, rows, classes,
                                                                              label_smoothing, row_loss, nullptr,
                                                                              grad_scale, error);
  }
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
