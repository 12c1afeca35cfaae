#include "sprintnet/ops/cuda/fused/cluster_launch.h"

#include <map>
#include <mutex>
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

ClusterProbe probe_cluster_kernel(int device, const void* kernel, const ClusterShape& shape, const char* no_code,
                                  const char* no_fit) {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 9) {
    return {"thread-block clusters need compute capability 9.0 or newer", 0};
  }
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess || attributes.binaryVersion < 90) {
    cudaGetLastError();
    return {no_code, 0};
  }
  ClusterProbe answer;
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = cluster_launch_config(shape, nullptr, &attribute);
  if (configure_cluster_kernel(kernel, shape) != cudaSuccess ||
      cudaOccupancyMaxActiveClusters(&answer.clusters, kernel, &config) != cudaSuccess || answer.clusters < 1) {
    cudaGetLastError();
    return {no_fit, 0};
  }
  return answer;
}

const ClusterProbe& cached_cluster_probe(ClusterKernelId kernel, int device, std::int64_t key,
                                         const std::function<ClusterProbe()>& probe) {
  static std::mutex mutex;
  static std::map<std::tuple<ClusterKernelId, int, std::int64_t>, ClusterProbe> answers;
  const std::lock_guard lock(mutex);
  const auto [at, fresh] = answers.try_emplace({kernel, device, key});
  if (fresh) at->second = probe();
  return at->second;
}

}  // namespace sprintnet::cuda
