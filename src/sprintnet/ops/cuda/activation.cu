// Activation functions, forward and backward, elementwise kernels over the
// device functions of activation_math.cuh.
#include "sprintnet/ops/cuda/activation_math.cuh"
#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

// No __restrict__: y may alias x (in-place forward).
template <ActivationKind kAct>
__global__ void activation_forward_kernel(const float* x, float* y, std::int64_t count) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) y[i] = activate<kAct>(x[i]);
}

template <ActivationKind kAct>
__global__ void activation_backward_kernel(const float* x, const float* y, const float* dy, float* dx,
                                           std::int64_t count) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) {
    dx[i] = activate_derivative<kAct>(x[i], y[i]) * dy[i];
  }
}

template <ActivationKind kAct>
cudaError_t forward_as(const float* x, float* y, std::int64_t count, cudaStream_t stream) {
  activation_forward_kernel<kAct><<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(x, y, count);
  return cudaGetLastError();
}

template <ActivationKind kAct>
cudaError_t backward_as(const float* x, const float* y, const float* dy, float* dx, std::int64_t count,
                        cudaStream_t stream) {
  activation_backward_kernel<kAct><<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(x, y, dy, dx, count);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_activation_forward(ActivationKind act, const float* x, float* y, std::int64_t count,
                                      cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("activation_forward");
  switch (act) {
    case ActivationKind::kIdentity: return forward_as<ActivationKind::kIdentity>(x, y, count, stream);
    case ActivationKind::kReLU: return forward_as<ActivationKind::kReLU>(x, y, count, stream);
    case ActivationKind::kGELU: return forward_as<ActivationKind::kGELU>(x, y, count, stream);
    case ActivationKind::kTanh: return forward_as<ActivationKind::kTanh>(x, y, count, stream);
    case ActivationKind::kSigmoid: return forward_as<ActivationKind::kSigmoid>(x, y, count, stream);
    case ActivationKind::kSiLU: return forward_as<ActivationKind::kSiLU>(x, y, count, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_activation_backward(ActivationKind act, const float* x, const float* y, const float* dy, float* dx,
                                       std::int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("activation_backward");
  switch (act) {
    case ActivationKind::kIdentity: return backward_as<ActivationKind::kIdentity>(x, y, dy, dx, count, stream);
    case ActivationKind::kReLU: return backward_as<ActivationKind::kReLU>(x, y, dy, dx, count, stream);
    case ActivationKind::kGELU: return backward_as<ActivationKind::kGELU>(x, y, dy, dx, count, stream);
    case ActivationKind::kTanh: return backward_as<ActivationKind::kTanh>(x, y, dy, dx, count, stream);
    case ActivationKind::kSigmoid: return backward_as<ActivationKind::kSigmoid>(x, y, dy, dx, count, stream);
    case ActivationKind::kSiLU: return backward_as<ActivationKind::kSiLU>(x, y, dy, dx, count, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace sprintnet::cuda
