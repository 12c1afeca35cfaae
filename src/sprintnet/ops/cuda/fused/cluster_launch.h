#pragma once
// How the fused engine's one-cluster kernels (cluster_epoch.cu, rows_epoch.cu, quads_epoch.cu,
// regression_epoch.cu)
// are configured, launched and asked whether a GPU runs them: one thread-block cluster of `ctas`
// blocks of `threads` threads, `shared_bytes` of dynamic shared memory a block. Host code over the
// CUDA runtime only (cluster_launch.cpp).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

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
// once. `name` names the kernel in the reasons ("the rows kernel").
struct ClusterProbe {
  const char* why_not = nullptr;
  int clusters = 0;
};
ClusterProbe probe_cluster_kernel(int device, const void* kernel, const ClusterShape& shape, const char* no_code,
                                  const char* no_fit);
// The answer for (kernel, device, key), computed once by `probe` and kept (it depends only on the GPU
// and the shape; an auto run asks when it picks the engine and again when the plan picks the kernel, a
// sweep for every run).
enum class ClusterKernelId { kCluster, kRows, kRegression, kQuads };
const ClusterProbe& cached_cluster_probe(ClusterKernelId kernel, int device, std::int64_t key,
                                         const std::function<ClusterProbe()>& probe);

}  // namespace sprintnet::cuda
