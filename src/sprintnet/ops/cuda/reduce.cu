// The batch sum of per-row losses: sum[0] += scale * sum_i values[i].
//
// One block of 1024 threads: thread t adds values t, t + 1024, ... in order (in
// double), then a shared-memory tree halves the partials in a fixed pattern.
// The order depends only on the count, so the sum is bit-identical run to run.
// One block is plenty: a batch has at most a few thousand rows, and this runs
// once per step.
#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

inline constexpr int kSumThreads = 1024;

template <typename T>
__global__ void accumulate_sum_kernel(const double* values, std::int64_t count, T* sum, double scale) {
  __shared__ double partial[kSumThreads];
  const int t = static_cast<int>(threadIdx.x);
  double acc = 0.0;
  for (std::int64_t i = t; i < count; i += kSumThreads) acc += values[i];
  partial[t] = acc;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) sum[0] += static_cast<T>(scale * partial[0]);
}

}  // namespace

cudaError_t launch_accumulate_sum(const double* values, std::int64_t count, void* sum, bool sum_is_double,
                                  double scale, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("accumulate_sum");
  if (sum_is_double) {
    accumulate_sum_kernel<double><<<1, kSumThreads, 0, stream>>>(values, count, static_cast<double*>(sum), scale);
  } else {
    accumulate_sum_kernel<float><<<1, kSumThreads, 0, stream>>>(values, count, static_cast<float*>(sum), scale);
  }
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
