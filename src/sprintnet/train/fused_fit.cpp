#include "sprintnet/train/fused_fit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

namespace sprintnet::train {
namespace {

// The fused kernel's layout (ops/cuda/fused/fused_epoch.h): rows padded to 16 elements, parameters
// 128 elements apart, batch buffers a multiple of 32 rows.
std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }

double mib(std::int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

FusedFootprint fused_footprint(const nn::MlpSpec& mlp, const std::string& precision, const OptimConfig& optim,
                               std::int64_t batch, std::int64_t eval_batch) {
  std::vector<std::int64_t> widths = mlp.hidden;
  widths.push_back(mlp.outputs);
  const std::int64_t rows = round_up(std::max(batch, eval_batch), 32);
  const bool keeps_pre = mlp.activation != Activation::kReLU && mlp.activation != Activation::kIdentity;
  FusedFootprint f;
  // A bias is one more weight column, and one more (constant 1) input column.
  const std::int64_t bias = mlp.bias ? 1 : 0;
  std::int64_t activations = 2 * rows * round_up(mlp.inputs + bias, 16);  // two gathered batches
  std::int64_t in = mlp.inputs;
  for (std::size_t l = 0; l < widths.size(); ++l) {
    f.params = round_up(f.params + widths[l] * round_up(in + bias, 16), 128);
    const bool hidden = l + 1 < widths.size();
    activations += rows * round_up(widths[l] + (hidden ? bias : 0), 16) *
                   (1 + (hidden ? 1 : 0) + (hidden && keeps_pre ? 1 : 0));
    in = widths[l];
  }
  const bool fp16 = precision == "fp16";
  const int state_buffers = optim.type != "sgd" ? 2 : (optim.momentum > 0.0 ? 1 : 0);
  // fp32 master + state; bf16: two compute copies; fp16: one copy and fp32 gradients.
  const std::int64_t per_param = 4 + 4 * state_buffers + (fp16 ? 2 + 4 : 2 * 2);
  f.bytes = f.params * per_param + activations * 2;
  return f;
}

std::optional<std::string> fused_unsupported(const nn::MlpSpec& mlp, const std::string& precision,
                                             const OptimConfig& optim, std::int64_t batch, std::int64_t eval_batch,
                                             std::int64_t on_chip_bytes) {
  if (precision != "bf16" && precision != "fp16") {
    return fmt::format("device.precision = \"{}\" (the fused engine computes in bf16 or fp16)", precision);
  }
  const std::size_t layers = mlp.hidden.size() + 1;
  if (layers > kFusedMaxLayersSupported) {
    return fmt::format("{} layers (the fused engine takes at most {})", layers, kFusedMaxLayersSupported);
  }
  if (mlp.outputs > kFusedMaxClassesSupported) {
    return fmt::format("{} classes (the fused engine's output layer takes at most {})", mlp.outputs,
                       kFusedMaxClassesSupported);
  }
  if (batch > 65535 || eval_batch > 65535) return std::string("a batch of more than 65535 samples");
  const FusedFootprint f = fused_footprint(mlp, precision, optim, batch, eval_batch);
  if (f.bytes > on_chip_bytes) {
    return fmt::format("the model needs {:.1f} MiB resident ({} parameters with {} state, and batch buffers), more "
                       "than the GPU's {:.1f} MiB of L2 the fused engine keeps it in",
                       mib(f.bytes), f.params, optim.type, mib(on_chip_bytes));
  }
  return std::nullopt;
}

cuda::ClusterLayout fused_cluster_layout(const nn::MlpSpec& mlp) {
  const std::vector<int> hidden(mlp.hidden.begin(), mlp.hidden.end());
  return cuda::cluster_layout(static_cast<int>(mlp.inputs), hidden.data(), static_cast<int>(hidden.size()),
                              static_cast<int>(mlp.outputs));
}

std::optional<std::string> fused_split_unsupported(const nn::MlpSpec& mlp, const std::string& precision,
                                                   std::int64_t batch) {
  // ops/cuda/fused/split_epoch.h's shapes (kept here as numbers: this file builds without CUDA).
  constexpr std::int64_t kInputs = 784, kClasses = 10, kBatch = 128;
  if (precision != "bf16") return fmt::format("device.precision = \"{}\" (the split kernel computes in bf16)", precision);
  const std::int64_t width = mlp.hidden.empty() ? 0 : mlp.hidden.front();
  const bool shape = mlp.inputs == kInputs && mlp.outputs == kClasses && !mlp.hidden.empty() && mlp.hidden.size() <= 3 &&
                     (width == 784 || width == 256) &&
                     std::all_of(mlp.hidden.begin(), mlp.hidden.end(), [&](std::int64_t w) { return w == width; });
  if (!shape) {
    return fmt::format("a {}-{}-{} model (the split kernel is compiled for 784 inputs, 1 to 3 hidden layers all of 784 "
                       "or all of 256, and 10 classes)", mlp.inputs, fmt::join(mlp.hidden, "-"), mlp.outputs);
  }
  // Smaller batches run as 128 rows with the rest masked: the same time a step.
  if (batch > kBatch) return fmt::format("a batch of {} (the split kernel takes at most {})", batch, kBatch);
  return std::nullopt;
}

std::optional<std::string> fused_regression_unsupported(const nn::MlpSpec& mlp, const std::string& precision,
                                                        std::int64_t batch) {
  // ops/cuda/fused/regression_epoch.h's limits (kept here as numbers: this file builds without CUDA).
  constexpr std::int64_t kRows = 128, kMaxInputs = 1024, kMaxClasses = 16;
  if (precision != "bf16") {
    return fmt::format("device.precision = \"{}\" (the regression kernel computes in bf16)", precision);
  }
  if (!mlp.hidden.empty()) {
    return fmt::format("{} hidden layers (the regression kernel trains models without one)", mlp.hidden.size());
  }
  if (batch > kRows) return fmt::format("a batch of {} (the regression kernel takes at most {})", batch, kRows);
  if (mlp.inputs > kMaxInputs || mlp.inputs % 16 != 0) {
    return fmt::format("{} input features (the regression kernel takes a multiple of 16, at most {})", mlp.inputs,
                       kMaxInputs);
  }
  if (mlp.outputs > kMaxClasses) {
    return fmt::format("{} classes (the regression kernel takes at most {})", mlp.outputs, kMaxClasses);
  }
  return std::nullopt;
}

bool fused_split_shares_a_gpu(const nn::MlpSpec& mlp) { return !mlp.hidden.empty() && mlp.hidden.front() == 256; }

std::optional<std::string> fused_cluster_unsupported(const nn::MlpSpec& mlp, const std::string& precision,
                                                     std::int64_t batch) {
  using namespace cuda;  // cluster_layout.h's limits
  if (precision != "bf16") return fmt::format("device.precision = \"{}\" (the cluster kernel computes in bf16)", precision);
  if (mlp.hidden.size() + 1 > static_cast<std::size_t>(kClusterMaxLayers)) {
    return fmt::format("{} layers (the cluster kernel takes at most {})", mlp.hidden.size() + 1, kClusterMaxLayers);
  }
  for (const std::int64_t width : mlp.hidden) {
    if (width > kClusterMaxWidth) {
      return fmt::format("a hidden layer of {} (the cluster kernel's 16 blocks own 8 columns each: at most {})", width,
                         kClusterMaxWidth);
    }
  }
  if (batch > kClusterRows) return fmt::format("a batch of {} (the cluster kernel takes at most {})", batch, kClusterRows);
  if (mlp.inputs > kClusterMaxInputs || mlp.inputs % 8 != 0) {
    return fmt::format("{} input features (the cluster kernel takes a multiple of 8, at most {})", mlp.inputs,
                       kClusterMaxInputs);
  }
  if (mlp.outputs > kClusterMaxClasses) {
    return fmt::format("{} classes (the cluster kernel takes at most {})", mlp.outputs, kClusterMaxClasses);
  }
  if (mlp.activation == Activation::kGELU || mlp.activation == Activation::kSiLU) {
    return std::string("GELU or SiLU (their slope needs the pre-activation, which the cluster kernel does not keep)");
  }
  const ClusterLayout layout = fused_cluster_layout(mlp);
  if (layout.bytes > kClusterSharedLimit) {
    return fmt::format("{} KiB of shared memory a block (at most {})", layout.bytes / 1024, kClusterSharedLimit / 1024);
  }
  return std::nullopt;
}

cuda::RowsLayout fused_rows_layout(const nn::MlpSpec& mlp) {
  return cuda::rows_layout(static_cast<int>(mlp.inputs), static_cast<int>(mlp.hidden.size()));
}

std::optional<std::string> fused_rows_unsupported(const nn::MlpSpec& mlp, const std::string& precision,
                                                  std::int64_t batch) {
  using namespace cuda;  // rows_layout.h's limits
  if (precision != "bf16") return fmt::format("device.precision = \"{}\" (the rows kernel computes in bf16)", precision);
  if (mlp.hidden.empty() || mlp.hidden.size() > static_cast<std::size_t>(kRowsMaxHidden)) {
    return fmt::format("{} hidden layers (the rows kernel takes 1 to {})", mlp.hidden.size(), kRowsMaxHidden);
  }
  for (const std::int64_t width : mlp.hidden) {
    if (width > kRowsWidth) return fmt::format("a hidden layer of {} (the rows kernel takes at most {})", width, kRowsWidth);
  }
  if (batch > kRowsBatch) return fmt::format("a batch of {} (the rows kernel takes at most {})", batch, kRowsBatch);
  if (mlp.inputs > kRowsMaxInputs || mlp.inputs % 16 != 0) {
    return fmt::format("{} input features (the rows kernel takes a multiple of 16, at most {})", mlp.inputs,
                       kRowsMaxInputs);
  }
  if (mlp.outputs > kRowsMaxClasses) {
    return fmt::format("{} classes (the rows kernel takes at most {})", mlp.outputs, kRowsMaxClasses);
  }
  if (mlp.activation == Activation::kGELU || mlp.activation == Activation::kSiLU) {
    return std::string("GELU or SiLU (their slope needs the pre-activation, which the rows kernel does not keep)");
  }
  const RowsLayout layout = fused_rows_layout(mlp);
  if (layout.bytes > kRowsSharedLimit) {
    return fmt::format("{} KiB of shared memory a block (at most {})", layout.bytes / 1024, kRowsSharedLimit / 1024);
  }
  return std::nullopt;
}

cuda::QuadsLayout fused_quads_layout(const nn::MlpSpec& mlp) { return cuda::quads_layout(static_cast<int>(mlp.inputs)); }

std::optional<std::string> fused_quads_unsupported(const nn::MlpSpec& mlp, const std::string& precision,
                                                   const OptimConfig& optim, std::int64_t batch) {
  using namespace cuda;  // quads_layout.h's limits
  if (precision != "bf16") return fmt::format("device.precision = \"{}\" (the quads kernel computes in bf16)", precision);
  if (mlp.hidden.size() != static_cast<std::size_t>(kQuadsHidden)) {
    return fmt::format("{} hidden layers (the quads kernel takes {})", mlp.hidden.size(), kQuadsHidden);
  }
  for (const std::int64_t width : mlp.hidden) {
    if (width > kQuadsWidth) return fmt::format("a hidden layer of {} (the quads kernel takes at most {})", width, kQuadsWidth);
  }
  if (batch > kQuadsBatch) return fmt::format("a batch of {} (the quads kernel takes at most {})", batch, kQuadsBatch);
  if (mlp.inputs > kQuadsMaxInputs || mlp.inputs % 16 != 0) {
    return fmt::format("{} input features (the quads kernel takes a multiple of 16, at most {})", mlp.inputs,
                       kQuadsMaxInputs);
  }
  if (mlp.outputs > kQuadsMaxClasses) {
    return fmt::format("{} classes (the quads kernel takes at most {})", mlp.outputs, kQuadsMaxClasses);
  }
  if (mlp.activation == Activation::kGELU || mlp.activation == Activation::kSiLU) {
    return std::string("GELU or SiLU (their slope needs the pre-activation, which the quads kernel does not keep)");
  }
  if (optim.type != "sgd") {
    return fmt::format("optim.type = \"{}\" (the quads kernel keeps SGD's state in registers; Adam's second moment does "
                       "not fit)",
                       optim.type);
  }
  const QuadsLayout layout = fused_quads_layout(mlp);
  if (layout.bytes > kQuadsSharedLimit) {
    return fmt::format("{} KiB of shared memory a block (at most {})", layout.bytes / 1024, kQuadsSharedLimit / 1024);
  }
  return std::nullopt;
}

}  // namespace sprintnet::train
