// Column sums in fp32 (bias gradients): one thread per column walks the rows in
// order, so the sum is bit-identical run to run; neighbouring threads read
// neighbouring columns, so the loads coalesce.
#include "sprintnet/ops/cuda/element_access.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

__global__ void column_sum_kernel(const void* x, ElementType type, std::int64_t rows, std::int64_t cols, void* out) {
  for (std::int64_t c = global_thread(); c < cols; c += grid_threads()) {
    float sum = 0.0f;
    for (std::int64_t r = 0; r < rows; ++r) sum += load_element(x, type, r * cols + c);
    store_element(out, type, c, sum);
  }
}

}  // namespace

cudaError_t launch_column_sum(const void* x, ElementType type, std::int64_t rows, std::int64_t cols, void* out,
                              cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  const NvtxRange range("column_sum");
  column_sum_kernel<<<elementwise_blocks(cols, 128), 128, 0, stream>>>(x, type, rows, cols, out);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
