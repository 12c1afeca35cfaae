// axpy: y += alpha * x, elementwise (gradient accumulation).
#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

__global__ void axpy_kernel(float* y, const float* x, std::int64_t count, float alpha) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) y[i] += alpha * x[i];
}

}  // namespace

cudaError_t launch_axpy(float* y, const float* x, std::int64_t count, float alpha, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("axpy");
  axpy_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(y, x, count, alpha);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
