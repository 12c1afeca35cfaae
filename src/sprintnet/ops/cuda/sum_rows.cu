// sum_rows: out[c] = sum_r x[r, c] + beta * out[c] (the bias gradient), summed in fp32 and stored
// in x's element type: the eager op (fp32) and the compiled step's bias gradient where cuBLASLt
// fuses none (fp32, bf16 or fp16).
//
// Deterministic by construction, no float atomics: a block owns a strip of 32
// columns; thread (tx, ty) adds rows ty, ty + 16, ty + 32, ... of column tx in
// order, then thread (tx, 0) adds the 16 partial sums in order. The order of
// additions depends only on the shape, so results are bit-identical run to run.
#include "sprintnet/ops/cuda/element_access.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

inline constexpr int kStripColumns = 32;  // one warp reads 32 consecutive elements of a row: coalesced
inline constexpr int kRowLanes = 16;      // threads a column's rows are split over

template <typename T>
__global__ void sum_rows_kernel(const T* x, T* out, std::int64_t rows, std::int64_t cols, float beta) {
  __shared__ float partial[kRowLanes][kStripColumns + 1];  // +1: no bank conflicts on the column read
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kStripColumns + tx;
  float acc = 0.0f;
  if (col < cols) {
    for (std::int64_t r = ty; r < rows; r += kRowLanes) acc += to_float(x[r * cols + col]);
  }
  partial[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && col < cols) {
    float total = partial[0][tx];
    for (int lane = 1; lane < kRowLanes; ++lane) total += partial[lane][tx];
    out[col] = from_float<T>(total + (beta == 0.0f ? 0.0f : beta * to_float(out[col])));  // beta 0 ignores NaN in out
  }
}

template <typename T>
void launch_typed(const void* x, void* out, std::int64_t rows, std::int64_t cols, float beta, cudaStream_t stream) {
  const auto strips = static_cast<unsigned>((cols + kStripColumns - 1) / kStripColumns);
  sum_rows_kernel<T><<<strips, dim3(kStripColumns, kRowLanes), 0, stream>>>(static_cast<const T*>(x),
                                                                            static_cast<T*>(out), rows, cols, beta);
}

}  // namespace

cudaError_t launch_sum_rows(const void* x, ElementType type, std::int64_t rows, std::int64_t cols, float beta,
                            void* out, cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  const NvtxRange range("sum_rows");
  switch (type) {
    case ElementType::kBF16: launch_typed<__nv_bfloat16>(x, out, rows, cols, beta, stream); break;
    case ElementType::kF16: launch_typed<__half>(x, out, rows, cols, beta, stream); break;
    case ElementType::kF32: launch_typed<float>(x, out, rows, cols, beta, stream); break;
  }
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
