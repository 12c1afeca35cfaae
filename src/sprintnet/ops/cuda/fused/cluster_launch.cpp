#include "sprintnet/ops/cuda/fused/cluster_launch.h"

#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace sprintnet::cuda {

cudaError_t configure_cluster_kernel(const void* kernel, const ClusterShape& shape) {
  if (shape.ctas > 8) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (e != cudaSuccess) return e;
  }
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shape.shared_bytes));
}

cudaLaunchConfig_t cluster_launch_config(const ClusterShape& shape, cudaStream_t stream, cudaLaunchAttribute* attribute) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(shape.ctas));
  config.blockDim = dim3(static_cast<unsigned>(shape.threads));
  config.dynamicSmemBytes = static_cast<std::size_t>(shape.shared_bytes);
  config.stream = stream;
  attribute->id = cudaLaunchAttributeClusterDimension;
  attribute->val.clusterDim.x = static_cast<unsigned>(shape.ctas);
  attribute->val.clusterDim.y = 1;
  attribute->val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

namespace {

// Why `device` cannot run `kernel` in `shape` (empty: it can), and how many such clusters it holds at once.
std::string why_not_run(int device, const void* kernel, const ClusterShape& shape, const std::string& name,
                        int& clusters) {
  clusters = 0;
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 9) {
    return "thread-block clusters need compute capability 9.0 or newer";
  }
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess || attributes.binaryVersion < 90) {
    cudaGetLastError();
    return "this build has no sm_90 code for " + name + " (CMAKE_CUDA_ARCHITECTURES)";
  }
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = cluster_launch_config(shape, nullptr, &attribute);
  if (configure_cluster_kernel(kernel, shape) != cudaSuccess ||
      cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess || clusters < 1) {
    cudaGetLastError();
    clusters = 0;
    return "this GPU cannot schedule a cluster of " + std::to_string(shape.ctas) + " blocks with " + name +
           "'s shared memory";
  }
  return {};
}

// A kept answer; why_not points into `reason` (a map's entries stay where they are).
struct KeptProbe {
  ClusterProbe probe;
  std::string reason;
};

}  // namespace

const ClusterProbe& probe_cluster_kernel(int device, const void* kernel, const ClusterShape& shape, const char* name) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, std::int64_t>, KeptProbe> kept;
  const std::lock_guard lock(mutex);
  const auto [at, fresh] = kept.try_emplace({kernel, device, shape.shared_bytes});
  KeptProbe& answer = at->second;
  if (fresh) {
    answer.reason = why_not_run(device, kernel, shape, name, answer.probe.clusters);
    answer.probe.why_not = answer.reason.empty() ? nullptr : answer.reason.c_str();
  }
  return answer.probe;
}

}  // namespace sprintnet::cuda
