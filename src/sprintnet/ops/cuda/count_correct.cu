// Accuracy counter: correct[0] += number of rows whose argmax is the label.
// One warp per row; ties go to the lowest class index ("first maximum wins",
// like the CPU backend). Labels are only compared, never used as an index, so
// an out-of-range label simply never matches. Counts are integers, so the
// atomics are exact and the result does not depend on their order.
#include <cmath>

#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

__global__ void count_correct_kernel(const float* logits, const std::int32_t* labels, std::int64_t rows,
                                     std::int64_t classes, std::int32_t* correct) {
  __shared__ std::int32_t block_hits;
  if (threadIdx.x == 0) block_hits = 0;
  __syncthreads();

  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (row < rows) {  // uniform across the warp; no early return: the block synchronises below
    const float* x = logits + row * classes;
    float best = -INFINITY;
    std::int64_t best_index = classes;  // a lane with no class loses every comparison
    for (std::int64_t c = lane; c < classes; c += kWarpSize) {
      if (best_index == classes || x[c] > best) {  // strictly greater: a lane keeps its first maximum
        best = x[c];
        best_index = c;
      }
    }
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(kFullWarpMask, best, offset);
      const std::int64_t other_index = __shfl_xor_sync(kFullWarpMask, best_index, offset);
      if (other > best || (other == best && other_index < best_index)) {
        best = other;
        best_index = other_index;
      }
    }
    if (lane == 0 && best_index == labels[row]) atomicAdd(&block_hits, 1);
  }
  __syncthreads();
  if (threadIdx.x == 0 && block_hits > 0) atomicAdd(correct, block_hits);
}

}  // namespace

cudaError_t launch_count_correct(const float* logits, const std::int32_t* labels, std::int64_t rows,
                                 std::int64_t classes, std::int32_t* correct, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const NvtxRange range("count_correct");
  count_correct_kernel<<<row_blocks(rows), kRowThreads, 0, stream>>>(logits, labels, rows, classes, correct);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
