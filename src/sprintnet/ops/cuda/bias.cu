// add_bias: y[r, c] += bias[c].
#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

__global__ void add_bias_kernel(float* y, const float* bias, std::int64_t count, std::int64_t cols) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) y[i] += bias[i % cols];
}

}  // namespace

cudaError_t launch_add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  const std::int64_t count = rows * cols;
  if (count == 0) return cudaSuccess;
  const NvtxRange range("add_bias");
  add_bias_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(y, bias, count, cols);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
