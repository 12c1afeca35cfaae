// The batch of the current step, gathered from the uint8 data set on the device
// and normalised into the compute type. One block row per sample (blockIdx.y),
// threads across its features; the step is read from device memory, so the
// same captured launch serves every step of every epoch.
#include "sprintnet/ops/cuda/element_access.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

__global__ void gather_batch_kernel(GatherArgs a) {
  const std::int64_t stride = a.stride > 0 ? a.stride : a.rows;
  const std::int64_t first = a.state != nullptr ? (a.state->step % a.steps_per_epoch) * stride + a.first : a.first;
  const std::int64_t row = blockIdx.y;
  const std::int64_t position = first + row;
  const std::int64_t sample = a.order != nullptr ? a.order[position] : position;
  const std::uint8_t* src = a.images + sample * a.features;
  const std::int64_t out = row * a.features;
  for (std::int64_t f = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; f < a.features;
       f += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    store_element(a.dst, a.dst_type, out + f, static_cast<float>(src[f]) * a.scale + a.shift);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) a.dst_labels[row] = a.labels[sample];
}

}  // namespace

cudaError_t launch_gather_batch(const GatherArgs& args, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  const NvtxRange range("gather_batch");
  const std::int64_t per_row = (args.features + kElementwiseThreads - 1) / kElementwiseThreads;
  const dim3 grid(static_cast<unsigned>(per_row < 8 ? per_row : 8), static_cast<unsigned>(args.rows));
  gather_batch_kernel<<<grid, kElementwiseThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
