#pragma once
// How the fused engine's one-cluster kernels (cluster_epoch.cu, rows_epoch.cu, quads_epoch.cu,
// regression_epoch.cu)
// are configured, launched and asked whether a GPU runs them: one thread-block cluster of `ctas`
// blocks of `threads` threads, `shared_bytes` of dynamic shared memory a block. Host code over the
// CUDA runtime only (cluster_launch.cpp).
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "sprintnet/ops/cuda/launch.h"

namespace sprintnet::cuda {

struct ClusterShape {
  int ctas = 0;
  int threads = 0;
  std::int64_t shared_bytes = 0;
};

// The kernel's attributes for that shape (set before each launch: the shared memory differs between
// models); more than 8 blocks take the non-portable cluster size Hopper allows (16).
cudaError_t configure_cluster_kernel(const void* kernel, const ClusterShape& shape);
// A launch of one cluster of that shape on `stream`; `attribute` holds the cluster's dimension.
cudaLaunchConfig_t cluster_launch_config(const ClusterShape& shape, cudaStream_t stream, cudaLaunchAttribute* attribute);

// Whether `device` runs `kernel` in that shape (why_not null) and how many such clusters it holds at
// once. `name` names the kernel in the reasons ("the rows kernel"). Asked once for each kernel, device
// and shared memory and kept (the answer depends only on the GPU and the shape; an auto run asks when it
// picks the engine and again when the plan picks the kernel, a sweep for every run).
struct ClusterProbe {
  const char* why_not = nullptr;
  int clusters = 0;
};
const ClusterProbe& probe_cluster_kernel(int device, const void* kernel, const ClusterShape& shape, const char* name);
template <class Args>
const ClusterProbe& probe_cluster_kernel(int device, void (*kernel)(Args), const ClusterShape& shape, const char* name) {
  return probe_cluster_kernel(device, reinterpret_cast<const void*>(kernel), shape, name);
}
// The clusters a probe found room for; 0 where the kernel does not run.
inline int active_clusters(const ClusterProbe& probe) { return probe.why_not == nullptr ? probe.clusters : 0; }

// One cluster of `kernel` in `shape` on `stream`, with `args`; cudaErrorInvalidValue for a null kernel (a
// configuration no instantiation takes).
template <class Args>
cudaError_t launch_cluster_kernel(void (*kernel)(Args), const ClusterShape& shape, cudaStream_t stream, const Args& args) {
  if (kernel == nullptr) return cudaErrorInvalidValue;
  const cudaError_t e = configure_cluster_kernel(reinterpret_cast<const void*>(kernel), shape);
  if (e != cudaSuccess) return e;
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = cluster_launch_config(shape, stream, &attribute);
  return cudaLaunchKernelEx(&config, kernel, args);
}

// `pick(std::integral_constant<ActivationKind, A>{})` for a hidden activation A the one-cluster kernels are
// instantiated for (identity, ReLU, tanh, sigmoid); nullptr for GELU and SiLU, which take the split kernel.
template <class Pick>
auto for_cluster_activation(ActivationKind activation, Pick pick)
    -> decltype(pick(std::integral_constant<ActivationKind, ActivationKind::kReLU>{})) {
  switch (activation) {
    case ActivationKind::kIdentity: return pick(std::integral_constant<ActivationKind, ActivationKind::kIdentity>{});
    case ActivationKind::kReLU: return pick(std::integral_constant<ActivationKind, ActivationKind::kReLU>{});
    case ActivationKind::kTanh: return pick(std::integral_constant<ActivationKind, ActivationKind::kTanh>{});
    case ActivationKind::kSigmoid: return pick(std::integral_constant<ActivationKind, ActivationKind::kSigmoid>{});
    default: return nullptr;
  }
}

}  // namespace sprintnet::cuda
