#pragma once
// Whether a model fits the fused engine (docs/FUSED.md): its limits, and the
// bytes the engine keeps resident (fp32 master weights and optimizer state, the
// compute copies, every layer's batch buffers), against what the GPU keeps on
// chip (its L2 cache, which holds them for the whole epoch). Pure arithmetic,
// tested on the CPU.
#include <cstdint>
#include <optional>
#include <string>

#include "sprintnet/io/config.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/ops/cuda/fused/cluster_layout.h"
#include "sprintnet/ops/cuda/fused/quads_layout.h"
#include "sprintnet/ops/cuda/fused/rows_layout.h"

namespace sprintnet::train {

inline constexpr int kFusedMaxLayersSupported = 8;
inline constexpr std::int64_t kFusedMaxClassesSupported = 64;

// The fused engine's kernels that train only the models they are built for (docs/FUSED.md); the
// grid kernel trains the rest.
enum class FusedKernel { kCluster, kSplit, kRegression, kRows, kQuads };

struct FusedFootprint {
  std::int64_t params = 0;  // padded flat length
  std::int64_t bytes = 0;   // resident bytes
};

FusedFootprint fused_footprint(const nn::MlpSpec& mlp, const std::string& precision, const OptimConfig& optim,
                               std::int64_t batch, std::int64_t eval_batch);
// Why the fused engine cannot run this model (naming the limit and the need), or nullopt when it can.
// `on_chip_bytes`: the GPU's L2 (gpu_on_chip_bytes()).
std::optional<std::string> fused_unsupported(const nn::MlpSpec& mlp, const std::string& precision,
                                             const OptimConfig& optim, std::int64_t batch, std::int64_t eval_batch,
                                             std::int64_t on_chip_bytes);
// Why the cluster kernel (docs/FUSED.md v4: the whole model in one 16-block cluster) cannot train
// this model, or nullopt when it can: bf16, up to 7 hidden layers of at most 128, a batch of at most
// 128, at most 1024 input features (a multiple of 8) and 64 classes, an activation whose slope
// follows from its output, and the layout within a block's shared memory. The grid kernel trains
// the rest.
std::optional<std::string> fused_cluster_unsupported(const nn::MlpSpec& mlp, const std::string& precision,
                                                     std::int64_t batch);
// Why the rows kernel (docs/FUSED.md v13: one 16-block cluster, the batch's rows split over the blocks,
// the hidden weights replicated in each) cannot train this model, or nullopt when it can: bf16, 1 to 3
// hidden layers of at most 128, a batch of at most 128, a multiple of 16 input features (at most 1024),
// at most 16 classes, an activation whose slope follows from its output, and the layout within a block's
// shared memory. Every optimizer and loss, with or without biases and a partial last batch. The cluster
// kernel trains the rest of its models.
std::optional<std::string> fused_rows_unsupported(const nn::MlpSpec& mlp, const std::string& precision,
                                                  std::int64_t batch);
// Why the quads kernel (docs/FUSED.md v18: one 16-block cluster as four quads, each owning 32 of the
// batch's rows, each of its blocks a quarter of every hidden layer's neurons) cannot train this model, or
// nullopt when it can: bf16, exactly two hidden layers of at most 256, a batch of at most 128, a multiple
// of 16 input features whose layout fits a block's shared memory (784 does), at most 16 classes, an
// activation whose slope follows from its output, SGD in any form (Adam's second moment does not fit the
// registers: the split kernel takes it). Either loss, with or without biases and a partial last batch.
std::optional<std::string> fused_quads_unsupported(const nn::MlpSpec& mlp, const std::string& precision,
                                                   const OptimConfig& optim, std::int64_t batch);
// Why the split kernel (docs/FUSED.md v7: 98 blocks in clusters of 7, or 32 in clusters of 4, each
// rank's fp32 master tiles in shared memory) cannot train this model, or nullopt when it can: the
// shapes it is compiled for (784 inputs, 1 to 3 hidden layers all of 784 or all of 256, 10 classes,
// ops/cuda/fused/split_epoch.h), bf16, a batch of at most 128. Every optimizer, activation and
// loss, with or without biases and a partial last batch.
std::optional<std::string> fused_split_unsupported(const nn::MlpSpec& mlp, const std::string& precision,
                                                   std::int64_t batch);
// Why the regression kernel (docs/FUSED.md v8: a model without hidden layers in one cluster of 8
// blocks, ops/cuda/fused/regression_epoch.h) cannot train this model, or nullopt when it can: no
// hidden layer, bf16, a batch of at most 128, at most 1024 input features (a multiple of 16) and at
// most 16 classes. Every optimizer and loss, with or without a bias and a partial last batch.
std::optional<std::string> fused_regression_unsupported(const nn::MlpSpec& mlp, const std::string& precision,
                                                        std::int64_t batch);
// Whether the split kernel's runs of this model may share a GPU: its 256-wide shape holds 32 SMs a
// run (four fit an H100 at once); the 784-wide one holds 98, so runs beside it would take turns.
bool fused_split_shares_a_gpu(const nn::MlpSpec& mlp);
// The cluster kernel's shared-memory layout for `mlp`.
cuda::ClusterLayout fused_cluster_layout(const nn::MlpSpec& mlp);
// The rows kernel's shared-memory layout for `mlp` (1 to 3 hidden layers).
cuda::RowsLayout fused_rows_layout(const nn::MlpSpec& mlp);
// The L2 cache of CUDA device `index` in bytes (0 in a build without CUDA).
std::int64_t gpu_on_chip_bytes(int index);
// Whether CUDA device `index` runs the cluster kernel with `mlp`'s layout (compute capability 9.0+,
// code for it in this build, a 16-block cluster with that much shared memory; false without CUDA).
bool gpu_runs_cluster_kernel(int index, const nn::MlpSpec& mlp);
// Whether CUDA device `index` runs the rows kernel with `mlp`'s layout (compute capability 9.0+, code
// for it in this build, a 16-block cluster with that much shared memory; false without CUDA).
bool gpu_runs_rows_kernel(int index, const nn::MlpSpec& mlp);
// The quads kernel's shared-memory layout for `mlp`.
cuda::QuadsLayout fused_quads_layout(const nn::MlpSpec& mlp);
// Whether CUDA device `index` runs the quads kernel with `mlp`'s layout (compute capability 9.0+, code
// for it in this build, a 16-block cluster with that much shared memory; false without CUDA).
bool gpu_runs_quads_kernel(int index, const nn::MlpSpec& mlp);
// Whether CUDA device `index` runs the regression kernel (compute capability 9.0+, code for it in this
// build, an 8-block cluster with its shared memory; false without CUDA).
bool gpu_runs_regression_kernel(int index);
// Whether CUDA device `index` runs the split kernel for `depth` hidden layers `width` wide (compute
// capability 9.0+, code for it in this build, its clusters co-resident: 14 of 7 blocks for 784, 8
// of 4 for 256; false without CUDA or for another shape).
bool gpu_runs_split_kernel(int index, std::int64_t width, std::int64_t depth);
// Whether this thread trains beside other runs on CUDA device `index` (a sweep's worker, with a
// stream of its own: ops/cuda/stream_scope.h); false without CUDA. Where the split kernel does not
// share a GPU (fused_split_shares_a_gpu), auto leaves such runs on the compiled step, which
// overlaps (docs/PERFORMANCE.md: 16 runs of 4x784x128, 4.3 s against 4.95).
bool gpu_shared_with_other_runs(int index);

}  // namespace sprintnet::train
