#pragma once
// Launch geometry and warp-level reductions shared by the kernels.
#include <cstdint>

namespace sprintnet::cuda {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;
// Elementwise kernels: 256 threads a block, a grid-stride loop over the elements.
inline constexpr int kElementwiseThreads = 256;
// Grids are capped (a grid-stride loop covers the rest); 2^16 blocks of 256 fill any current GPU many times over.
inline constexpr std::int64_t kMaxGridBlocks = 1 << 16;
// Row kernels: one warp per row, 8 warps a block.
inline constexpr int kRowThreads = 256;
inline constexpr int kRowsPerBlock = kRowThreads / kWarpSize;

inline unsigned elementwise_blocks(std::int64_t count, int threads = kElementwiseThreads) {
  const std::int64_t blocks = (count + threads - 1) / threads;
  return static_cast<unsigned>(blocks < kMaxGridBlocks ? blocks : kMaxGridBlocks);
}

// One warp per row: rows are never skipped, so no cap (grid.x may be up to 2^31 - 1).
inline unsigned row_blocks(std::int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

// Butterfly reductions: every lane ends with the same value, and the order of
// operations is fixed for a given warp, so results are bit-identical run to run.
__device__ inline float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFullWarpMask, v, offset));
  return v;
}

// Grid-stride loop bounds.
__device__ inline std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_threads() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

}  // namespace sprintnet::cuda
