// Squared error against one-hot targets, fused with its gradient. One warp per
// row; each row's sum goes to row_loss[r] and the batch sum is taken in a fixed
// order afterwards (reduce.cu), so the loss is bit-identical run to run.
#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

// dpred may alias pred: each element is read before it is written, by the same lane.
template <bool kWithGradient>
__global__ void mse_one_hot_kernel(const float* pred, const std::int32_t* labels, std::int64_t rows,
                                   std::int64_t classes, double* row_loss, float* dpred, float grad_scale,
                                   DeviceError* error) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (row >= rows) return;  // the whole warp leaves together
  const std::int64_t label = checked_index(labels[row], classes, row, DeviceErrorCode::kMseLabel, error);
  const float* p = pred + row * classes;
  const float two_scale = 2.0f * grad_scale;
  float acc = 0.0f;
  for (std::int64_t c = lane; c < classes; c += kWarpSize) {
    const float diff = p[c] - (c == label ? 1.0f : 0.0f);
    acc += diff * diff;
    if constexpr (kWithGradient) dpred[row * classes + c] = two_scale * diff;
  }
  acc = warp_sum(acc);
  if (lane == 0) row_loss[row] = acc;
}

}  // namespace

cudaError_t launch_mse_one_hot(const float* pred, const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                               double* row_loss, float* dpred, float grad_scale, DeviceError* error,
                               cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const NvtxRange range("mse_one_hot");
  if (dpred != nullptr) {
    mse_one_hot_kernel<true><<<row_blocks(rows), kRowThreads, 0, stream>>>(pred, labels, rows, classes, row_loss,
                                                                           dpred, grad_scale, error);
  } else {
    mse_one_hot_kernel<false><<<row_blocks(rows), kRowThreads, 0, stream>>>(pred, labels, rows, classes, row_loss,
                                                                            nullptr, grad_scale, error);
  }
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
