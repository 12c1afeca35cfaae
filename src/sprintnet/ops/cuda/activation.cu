// Activation functions, forward and backward, elementwise kernels over the device functions of
// activation_math.cuh, for fp32 tensors (the eager ops) and for the compiled step's fp32, bf16 and
// fp16 buffers: one kernel family, the element type read and written as fp32 (element_access.cuh).
#include "sprintnet/ops/cuda/activation_math.cuh"
#include "sprintnet/ops/cuda/element_access.cuh"
#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"
#include "sprintnet/ops/cuda/step_launch.h"

namespace sprintnet::cuda {
namespace {

// No __restrict__: y may alias x (in-place forward).
template <ActivationKind kAct>
__global__ void activation_forward_kernel(const void* x, void* y, ElementType type, std::int64_t count) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) {
    store_element(y, type, i, activate<kAct>(load_element(x, type, i)));
  }
}

// No __restrict__: dx may alias dy (the compiled step scales its gradient in place).
template <ActivationKind kAct>
__global__ void activation_backward_kernel(const void* x, const void* y, const void* dy, void* dx, ElementType type,
                                           std::int64_t count) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) {
    store_element(dx, type, i,
                  activation_gradient<kAct>(load_element(x, type, i), load_element(y, type, i), load_element(dy, type, i)));
  }
}

template <ActivationKind kAct>
cudaError_t forward_as(const void* x, void* y, ElementType type, std::int64_t count, cudaStream_t stream) {
  activation_forward_kernel<kAct><<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(x, y, type, count);
  return cudaGetLastError();
}

template <ActivationKind kAct>
cudaError_t backward_as(const void* x, const void* y, const void* dy, void* dx, ElementType type, std::int64_t count,
                        cudaStream_t stream) {
  activation_backward_kernel<kAct>
      <<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(x, y, dy, dx, type, count);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_activation_forward(ActivationKind act, ElementType type, const void* x, void* y,
                                      std::int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("activation_forward");
  switch (act) {
    case ActivationKind::kIdentity: return forward_as<ActivationKind::kIdentity>(x, y, type, count, stream);
    case ActivationKind::kReLU: return forward_as<ActivationKind::kReLU>(x, y, type, count, stream);
    case ActivationKind::kGELU: return forward_as<ActivationKind::kGELU>(x, y, type, count, stream);
    case ActivationKind::kTanh: return forward_as<ActivationKind::kTanh>(x, y, type, count, stream);
    case ActivationKind::kSigmoid: return forward_as<ActivationKind::kSigmoid>(x, y, type, count, stream);
    case ActivationKind::kSiLU: return forward_as<ActivationKind::kSiLU>(x, y, type, count, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_activation_backward(ActivationKind act, ElementType type, const void* x, const void* y,
                                       const void* dy, void* dx, std::int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("activation_backward");
  switch (act) {
    case ActivationKind::kIdentity: return backward_as<ActivationKind::kIdentity>(x, y, dy, dx, type, count, stream);
    case ActivationKind::kReLU: return backward_as<ActivationKind::kReLU>(x, y, dy, dx, type, count, stream);
    case ActivationKind::kGELU: return backward_as<ActivationKind::kGELU>(x, y, dy, dx, type, count, stream);
    case ActivationKind::kTanh: return backward_as<ActivationKind::kTanh>(x, y, dy, dx, type, count, stream);
    case ActivationKind::kSigmoid: return backward_as<ActivationKind::kSigmoid>(x, y, dy, dx, type, count, stream);
    case ActivationKind::kSiLU: return backward_as<ActivationKind::kSiLU>(x, y, dy, dx, type, count, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace sprintnet::cuda
