// sum_rows: out[c] = sum_r x[r, c] + beta * out[c] (the bias gradient).
//
// Deterministic by construction, no float atomics: a block owns a strip of 32
// columns; thread (tx, ty) adds rows ty, ty + 16, ty + 32, ... of column tx in
// order, then thread (tx, 0) adds the 16 partial sums in order. The order of
// additions depends only on the shape, so results are bit-identical run to run.
#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

inline constexpr int kStripColumns = 32;  // one warp reads 32 consecutive floats of a row: coalesced
inline constexpr int kRowLanes = 16;      // threads a column's rows are split over

__global__ void sum_rows_kernel(const float* x, float* out, std::int64_t rows, std::int64_t cols, float beta) {
  __shared__ float partial[kRowLanes][kStripColumns + 1];  // +1: no bank conflicts on the column read
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kStripColumns + tx;
  float acc = 0.0f;
  if (col < cols) {
    for (std::int64_t r = ty; r < rows; r += kRowLanes) acc += x[r * cols + col];
  }
  partial[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && col < cols) {
    float total = partial[0][tx];
    for (int lane = 1; lane < kRowLanes; ++lane) total += partial[lane][tx];
    out[col] = total + (beta == 0.0f ? 0.0f : beta * out[col]);  // beta 0 ignores NaN in out
  }
}

}  // namespace

cudaError_t launch_sum_rows(const float* x, float* out, std::int64_t rows, std::int64_t cols, float beta,
                            cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  const NvtxRange range("sum_rows");
  const auto strips = static_cast<unsigned>((cols + kStripColumns - 1) / kStripColumns);
  sum_rows_kernel<<<strips, dim3(kStripColumns, kRowLanes), 0, stream>>>(x, out, rows, cols, beta);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
