// fp32 → compute-type copies (the bf16/fp16 weights the matrix units read).
#include "sprintnet/ops/cuda/element_access.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

__global__ void convert_kernel(const float* src, void* dst, ElementType type, std::int64_t count) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) store_element(dst, type, i, src[i]);
}

}  // namespace

cudaError_t launch_convert_from_f32(const float* src, void* dst, ElementType dst_type, std::int64_t count,
                                    cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("convert");
  convert_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(src, dst, dst_type, count);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
