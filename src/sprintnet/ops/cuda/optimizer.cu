// In-place parameter updates, elementwise: the algebra of ops/cpu/optimizer.cpp
// (torch.optim.SGD and torch.optim.Adam/AdamW), in fp32. The step-dependent
// scalars (bias corrections) are computed once on the host, in double.
#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

__global__ void sgd_step_kernel(float* param, const float* grad, float* momentum_buf, std::int64_t count,
                                SgdScalars s) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) {
    float d = grad[i] + s.weight_decay * param[i];
    if (s.use_momentum) {
      const float buf = s.first_step ? d : s.momentum * momentum_buf[i] + s.keep * d;  // first step: buf = g
      momentum_buf[i] = buf;
      d = s.nesterov ? d + s.momentum * buf : buf;
    }
    param[i] -= s.lr * d;
  }
}

__global__ void adam_step_kernel(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                                 std::int64_t count, AdamScalars s) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) {
    float p = param[i], g = grad[i];
    if (s.decoupled) {
      p *= s.decoupled_keep;  // AdamW: decay the weight, not the gradient
    } else {
      g += s.weight_decay * p;
    }
    const float m = s.beta1 * exp_avg[i] + s.one_minus_beta1 * g;
    const float v = s.beta2 * exp_avg_sq[i] + s.one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p - s.step_size * m / (sqrtf(v) / s.bias2_sqrt + s.eps);
  }
}

}  // namespace

cudaError_t launch_sgd_step(float* param, const float* grad, float* momentum_buf, std::int64_t count,
                            const SgdScalars& s, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("sgd_step");
  sgd_step_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(param, grad, momentum_buf, count, s);
  return cudaGetLastError();
}

cudaError_t launch_adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::int64_t count,
                             const AdamScalars& s, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("adam_step");
  adam_step_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(param, grad, exp_avg, exp_avg_sq,
                                                                                   count, s);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
