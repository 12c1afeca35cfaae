#include "adam_fast_probe.h"

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/ops/cuda/flat_update.cuh"

namespace sprintnet::test {
namespace {

__global__ void adam_fast_kernel(const cuda::FlatOptimizerArgs args, double lr, double beta1_t, double beta2_t, float* p,
                                 const float* g, float* m, float* v, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const cuda::BlockScalars s = cuda::update_scalars(args, lr, beta1_t, beta2_t, false, 1.0f, false);
  cuda::adam_update_fast(args, s, p[i], g[i], m[i], v[i]);
}

}  // namespace

void adam_update_fast_on_gpu(const cuda::FlatOptimizerArgs& args, double lr, double beta1_t, double beta2_t, float* p,
                             const float* g, float* m, float* v, int n) {
  adam_fast_kernel<<<(n + 255) / 256, 256>>>(args, lr, beta1_t, beta2_t, p, g, m, v, n);
  SN_CUDA_CHECK(cudaGetLastError());
  SN_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace sprintnet::test
