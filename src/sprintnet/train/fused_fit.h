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

namespace sprintnet::train {

inline constexpr int kFusedMaxLayersSupported = 8;
inline constexpr std::int64_t kFusedMaxClassesSupported = 64;

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
// The L2 cache of CUDA device `index` in bytes (0 in a build without CUDA).
std::int64_t gpu_on_chip_bytes(int index);

}  // namespace sprintnet::train
