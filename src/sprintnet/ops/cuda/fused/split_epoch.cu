// The split kernel's host side (split_epoch.h): which kernel a model runs, whether a GPU can run
// it, and its launch. The kernel is split_epoch_kernel.cuh.
#include <map>
#include <mutex>
#include <tuple>

#include "sprintnet/ops/cuda/fused/split_epoch_kernel.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace split {
namespace {

// The kernel for a model of 1 to 3 hidden layers (nullptr: another depth).
template <class S>
SplitKernel kernel_of_depth(int depth, const FlatOptimizerArgs& optimizer, ActivationKind activation) {
  switch (depth) {
    case 1: return kernel_for<S, 1>(optimizer, activation);
    case 2: return kernel_for<S, 2>(optimizer, activation);
    case 3: return kernel_for<S, 3>(optimizer, activation);
    default: return nullptr;
  }
}

// The shape's blocks in its clusters, launched cooperatively (the grid barrier needs them co-resident).
template <class S>
cudaLaunchConfig_t launch_config(cudaStream_t stream, cudaLaunchAttribute (&attributes)[2]) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(S::kBlocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = S::kSmemBytes;
  config.stream = stream;
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = S::kCluster;
  attributes[0].val.clusterDim.y = 1;
  attributes[0].val.clusterDim.z = 1;
  attributes[1].id = cudaLaunchAttributeCooperative;
  attributes[1].val.cooperative = 1;
  config.attrs = attributes;
  config.numAttrs = 2;
  return config;
}

// Asks about a kernel of the model's shape and depth, so the module it loads is the one the run
// launches.
template <class S>
const char* probe(int device, int depth, int& clusters) {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 9) {
    return "thread-block clusters and their bulk copies need compute capability 9.0 or newer";
  }
  FlatOptimizerArgs sgd{};
  sgd.kind = FlatOptimizerKind::kSgd;
  const SplitKernel kernel = kernel_of_depth<S>(depth, sgd, ActivationKind::kReLU);
  if (kernel == nullptr) return "the split kernel takes 1 to 3 hidden layers";
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess || attributes.binaryVersion < 90) {
    cudaGetLastError();
    return "this build has no sm_90 code for the split kernel (CMAKE_CUDA_ARCHITECTURES)";
  }
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes) != cudaSuccess) {
    cudaGetLastError();
    return "this GPU does not give a block the split kernel's shared memory";
  }
  cudaLaunchAttribute launch_attributes[2];
  cudaLaunchConfig_t config = launch_config<S>(nullptr, launch_attributes);
  config.numAttrs = 1;  // the occupancy query takes the cluster shape only
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess || clusters < S::kClusters) {
    cudaGetLastError();
    return S::kWidth == Wide::kWidth ? "this GPU cannot hold 14 clusters of 7 blocks of the split kernel at once"
                                     : "this GPU cannot hold 8 clusters of 4 blocks of the split kernel at once";
  }
  return nullptr;
}

template <class S>
cudaError_t launch(const FusedEpochArgs& a, SplitParams& p, cudaStream_t stream) {
  const SplitKernel kernel = kernel_of_depth<S>(a.num_layers - 1, a.optimizer, a.activation);  // null: another depth
  if (kernel == nullptr) return cudaErrorInvalidValue;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
  if (e != cudaSuccess) return e;
  cudaLaunchAttribute attributes[2];
  const cudaLaunchConfig_t config = launch_config<S>(stream, attributes);
  return cudaLaunchKernelEx(&config, kernel, p);
}

}  // namespace
}  // namespace split

using namespace split;

std::int64_t split_epoch_scratch_bytes() {
  return kScratchActivations * kActivationBytes + kLiveBiasBytes + 2 * kMomentumBytes;  // SGD uses one state
}

namespace {

struct ProbeAnswer {
  const char* why_not = nullptr;
  int clusters = 0;  // of the shape, co-resident at most
};

const ProbeAnswer& probe_answer(int device, int width, int depth) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int>, ProbeAnswer> answers;
  const std::lock_guard lock(mutex);
  const auto [at, fresh] = answers.try_emplace({device, width, depth});
  if (fresh) {
    ProbeAnswer& a = at->second;
    a.why_not = width == Wide::kWidth ? probe<Wide>(device, depth, a.clusters) : probe<Narrow>(device, depth, a.clusters);
  }
  return at->second;
}

}  // namespace

const char* split_epoch_unavailable(int device, int width, int depth) {
  if (split_shape(width) == nullptr) return "the split kernel is compiled for hidden layers of 784 or 256";
  return probe_answer(device, width, depth).why_not;
}

int split_epoch_active_clusters(int device, int width, int depth) {
  if (split_epoch_unavailable(device, width, depth) != nullptr) return 0;
  return probe_answer(device, width, depth).clusters;
}

cudaError_t launch_split_epoch(const FusedEpochArgs& a, void* scratch, cudaStream_t stream) {
  const NvtxRange range("split_epoch");
  const int depth = a.num_layers - 1;
  if (depth < 1 || depth > kMaxHidden || !a.train || a.type != ElementType::kBF16 || a.batch < 1 || a.batch > kBatch ||
      a.steps > (1 << 30) || (a.optimizer.kind != FlatOptimizerKind::kSgd && a.optimizer.state2 == nullptr)) {
    return cudaErrorInvalidValue;  // fused_split_unsupported says why first
  }
  const std::int64_t width = a.layers[0].out;
  if (split_shape(width) == nullptr) return cudaErrorInvalidValue;
  for (int l = 0; l <= depth; ++l) {
    const FusedLayer& layer = a.layers[l];
    if (layer.in != (l == 0 ? kIn : width) || layer.out != (l == depth ? kClasses : width) ||
        layer.bias != a.layers[0].bias) {
      return cudaErrorInvalidValue;
    }
  }
  SplitParams p{};
  p.images = a.images;
  p.labels = a.labels;
  p.order = a.order;
  p.samples = a.samples;
  p.steps = static_cast<int>(a.steps);
  p.batch = static_cast<int>(a.batch);
  p.scale = a.scale;
  p.shift = a.shift;
  auto* bytes = static_cast<std::uint8_t*>(scratch);
  const auto activation = [&](int i) { return reinterpret_cast<bf16*>(bytes + i * kActivationBytes); };
  p.x[0] = activation(0);
  p.x0_odd = activation(1);
  for (int l = 1; l <= kMaxHidden; ++l) {
    p.x[l] = activation(1 + l);
    p.d[l] = activation(1 + kMaxHidden + l);
  }
  p.b4_live = reinterpret_cast<float*>(bytes + kScratchActivations * kActivationBytes);
  const bool adam = a.optimizer.kind != FlatOptimizerKind::kSgd;
  auto* state_scratch = bytes + kScratchActivations * kActivationBytes + kLiveBiasBytes;
  p.mom_frag = a.optimizer.state1 != nullptr ? reinterpret_cast<float4*>(state_scratch) : nullptr;
  p.var_frag = adam ? reinterpret_cast<float4*>(state_scratch + kMomentumBytes) : nullptr;
  for (int l = 1; l <= depth + 1; ++l) {
    const FusedLayer& layer = a.layers[l - 1];
    p.w[l] = static_cast<bf16*>(a.copies[0]) + layer.weight_offset;
    p.w_other[l] = static_cast<bf16*>(a.copies[1]) + layer.weight_offset;
    p.master[l] = a.optimizer.master + layer.weight_offset;
    p.mom[l] = a.optimizer.state1 != nullptr ? a.optimizer.state1 + layer.weight_offset : nullptr;
    p.var[l] = a.optimizer.state2 != nullptr ? a.optimizer.state2 + layer.weight_offset : nullptr;
    p.ld[l] = layer.in_pad;
  }
  p.bias = a.layers[0].bias;
  p.opt = a.optimizer;
  p.mse = a.loss == FusedLoss::kMse ? 1 : 0;
  p.smoothing = a.smoothing;
  p.state = a.state;
  p.metrics = a.metrics;
  p.progress = a.progress;
  p.barrier = a.barrier;
  p.clock = a.stage_clock;
  p.clock_capacity = a.stage_clock_capacity;
  return width == Wide::kWidth ? launch<Wide>(a, p, stream) : launch<Narrow>(a, p, stream);
}

}  // namespace sprintnet::cuda
