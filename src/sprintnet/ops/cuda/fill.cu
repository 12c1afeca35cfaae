// fill and scale: set every element to one value, or multiply every element by beta.
#include <cstring>

#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

template <typename T>
__global__ void fill_kernel(T* data, std::int64_t count, T value) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) data[i] = value;
}

__global__ void scale_kernel(float* y, std::int64_t count, float beta) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) y[i] = beta == 0.0f ? 0.0f : beta * y[i];
}

template <typename T>
cudaError_t fill_as(void* data, std::int64_t count, std::uint64_t pattern, cudaStream_t stream) {
  T value;
  std::memcpy(&value, &pattern, sizeof(T));  // the low bytes on a little-endian host
  fill_kernel<T><<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(static_cast<T*>(data), count, value);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_fill(void* data, std::int64_t count, int element_bytes, std::uint64_t pattern, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("fill");
  switch (element_bytes) {
    case 1: return fill_as<std::uint8_t>(data, count, pattern, stream);
    case 2: return fill_as<std::uint16_t>(data, count, pattern, stream);
    case 4: return fill_as<std::uint32_t>(data, count, pattern, stream);
    case 8: return fill_as<std::uint64_t>(data, count, pattern, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_scale(float* y, std::int64_t count, float beta, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("scale");
  scale_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(y, count, beta);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
