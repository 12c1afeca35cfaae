#pragma once
// Where a compiled step keeps an MLP's parameters: every weight and bias in one flat buffer
// (gradients and optimizer state in buffers of the same layout), so an optimizer update is one
// loop over all parameters. load/store move weights and optimizer state between such buffers
// and the eager model and optimizer, which checkpoints, resume and the weights files use.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sprintnet/core/tensor.h"
#include "sprintnet/nn/linear.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/nn/sequential.h"
#include "sprintnet/optim/optimizer.h"

namespace sprintnet::train {

// One Linear layer's place in the flat buffers (elements; bias_offset -1: no bias).
struct FlatLayer {
  std::int64_t in = 0, out = 0;
  std::int64_t weight_offset = 0, bias_offset = -1;
};

struct FlatLayout {
  std::vector<FlatLayer> layers;
  std::int64_t size = 0;  // flat length, padding included
};

// Layers in model order, weight then bias, each starting at a multiple of `alignment` elements.
FlatLayout flat_layout(const nn::MlpSpec& mlp, std::int64_t alignment);

// The view of `flat` holding a parameter at `offset`.
Tensor flat_view(const Tensor& flat, std::int64_t offset, const Shape& shape);

// The model's Linear layers; throws unless there are `expected` of them.
std::vector<nn::Linear*> linear_layers(nn::Sequential& model, std::size_t expected);

void copy_weights_to_flat(nn::Sequential& model, const FlatLayout& layout, const Tensor& flat);
void copy_weights_from_flat(nn::Sequential& model, const FlatLayout& layout, const Tensor& flat);

// The step counters a compiled step keeps: steps of the run, and updates each parameter has had
// (all alike in a compiled step; SGD's "momentum started" is opt_steps > 0).
struct StepCounters {
  std::int64_t step = 0;
  std::int64_t opt_steps = 0;
};

// The counters of an eager optimizer as a compiled step keeps them. Adam's per-parameter counters must be alike
// (every parameter is updated at every step); a difference is an error beginning with `origin` (a checkpoint's file).
StepCounters step_counters(const optim::Counters& counters, std::string_view origin = "the optimizer");

// Copies the optimizer's state tensors into state1 (momentum or exp_avg) and state2 (exp_avg_sq)
// and returns its counters.
StepCounters load_optimizer_state(optim::Optimizer& optimizer, const FlatLayout& layout, const Tensor& state1,
                                  const Tensor& state2);
// The reverse: gives the optimizer (of config type `type`) the flat state and counters. `origin`
// names the plan in errors.
void store_optimizer_state(optim::Optimizer& optimizer, const std::string& type, const FlatLayout& layout,
                           const Tensor& state1, const Tensor& state2, const StepCounters& counters,
                           const std::string& origin);

}  // namespace sprintnet::train
