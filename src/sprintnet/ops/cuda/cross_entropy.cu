// Softmax cross-entropy with label smoothing, fused with its gradient (the eager op).
//
// One warp per row (row_softmax.cuh, shared with the compiled step's loss). Each row's loss goes
// to row_loss[r]; the batch sum is taken afterwards in a fixed order (reduce.cu), so the loss is
// bit-identical run to run.
#include <cmath>

#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"
#include "sprintnet/ops/cuda/row_softmax.cuh"

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
  float* dx = kWithGradient ? dlogits + row * classes : nullptr;
  const double loss = warp_softmax_cross_entropy([&](std::int64_t c) { return x[c]; }, classes, label, max_logit,
                                                 smoothing, grad_scale, kWithGradient,
                                                 [&](std::int64_t c, float g) { dx[c] = g; });
  if (lane == 0) row_loss[row] = loss;
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
