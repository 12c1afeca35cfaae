#include "sprintnet/train/padded_parameters.h"

#include <algorithm>
#include <optional>
#include <string>

#include "sprintnet/core/error.h"
#include "sprintnet/ops/ops.h"

namespace sprintnet::train {
namespace {

void scatter(std::vector<float>& image, const FlatSlot& slot, const std::vector<float>& values) {
  for (std::int64_t r = 0; r < slot.rows; ++r) {
    std::copy_n(values.begin() + r * slot.cols, slot.cols, image.begin() + slot.offset + r * slot.row_stride);
  }
}

std::vector<nn::Parameter*> parameters_of(const std::vector<nn::Linear*>& layers) {
  std::vector<nn::Parameter*> params;
  for (nn::Linear* layer : layers) {
    params.push_back(&layer->weight());
    if (layer->has_bias()) params.push_back(&layer->bias());
  }
  return params;
}

}  // namespace

FlatImages export_to_flat(const std::vector<nn::Linear*>& layers, optim::Optimizer& optimizer,
                          const std::vector<FlatSlot>& slots, std::int64_t length, const OptimConfig& optim,
                          std::string_view engine) {
  const auto params = parameters_of(layers);
  SN_CHECK(params.size() == slots.size(), "the model has {} parameters, the {} {}", params.size(), engine,
           slots.size());
  const auto n = static_cast<std::size_t>(length);
  FlatImages images;
  images.master.assign(n, 0.0f);
  const bool sgd = optim.type == "sgd";
  if (!sgd || optim.momentum > 0.0) images.state1.assign(n, 0.0f);
  if (!sgd) images.state2.assign(n, 0.0f);
  for (std::size_t i = 0; i < params.size(); ++i) {
    scatter(images.master, slots[i], params[i]->value.to(Device::cpu()).to_vector<float>());
  }
  for (const auto& [name, tensor] : optimizer.state()) {
    const auto dot = name.find('.');
    const std::size_t index = std::stoul(name.substr(0, dot));
    const std::string what = name.substr(dot + 1);
    SN_CHECK(index < slots.size(), "optimizer state '{}' has no parameter in the {}", name, engine);
    std::vector<float>& image = what == "exp_avg_sq" ? images.state2 : images.state1;
    SN_CHECK(!image.empty(), "optimizer state '{}' has no place in the {}", name, engine);
    scatter(image, slots[index], tensor.to(Device::cpu()).to_vector<float>());
  }
  return images;
}

cuda::StepState step_state_from(const optim::Counters& counters, bool fp16) {
  const StepCounters n = step_counters(counters);
  cuda::StepState state;
  state.step = n.step;
  state.opt_steps = n.opt_steps;
  state.loss_scale = fp16 ? kInitialLossScale : 1.0f;
  return state;
}

LossScaling loss_scaling_of(const cuda::StepState& state) { return {state.loss_scale, state.good_steps}; }

cuda::StepState with_loss_scaling(cuda::StepState state, const LossScaling& scaling, std::string_view engine) {
  const std::optional<std::string> problem = loss_scaling_problem(scaling);
  SN_CHECK(!problem, "{}: {}", engine, problem.value_or(""));
  state.loss_scale = scaling.scale;
  state.good_steps = static_cast<std::int32_t>(scaling.good_steps);  // < 2000: checked
  return state;
}

void import_from_flat(const FlatSlotReader& read, bool has_state1, const std::vector<FlatSlot>& slots,
                      const std::vector<nn::Linear*>& layers, optim::Optimizer& optimizer, const OptimConfig& optim,
                      const cuda::StepState& state, std::string_view engine) {
  const auto params = parameters_of(layers);
  SN_CHECK(params.size() == slots.size(), "the model has {} parameters, the {} {}", params.size(), engine,
           slots.size());
  optim::NamedTensors tensors;
  optim::Counters counters = optimizer.counters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& value = params[i]->value;
    const Device device = value.device();
    ops::copy(value, read(0, slots[i], value.shape(), device));
    if (optim.type == "sgd") {
      if (has_state1) tensors.emplace_back(fmt::format("{}.momentum_buffer", i), read(1, slots[i], value.shape(), device));
      counters[fmt::format("{}.momentum_started", i)] = state.opt_steps > 0 ? 1 : 0;
    } else {
      tensors.emplace_back(fmt::format("{}.exp_avg", i), read(1, slots[i], value.shape(), device));
      tensors.emplace_back(fmt::format("{}.exp_avg_sq", i), read(2, slots[i], value.shape(), device));
      counters[fmt::format("{}.step", i)] = state.opt_steps;
    }
  }
  counters["steps"] = state.step;
  optimizer.load_state(tensors, counters, engine);
}

cuda::FlatOptimizerArgs flat_optimizer_config(const OptimConfig& o, bool check_finite) {
  cuda::FlatOptimizerArgs args;
  args.kind = o.type == "sgd"    ? cuda::FlatOptimizerKind::kSgd
              : o.type == "adam" ? cuda::FlatOptimizerKind::kAdam
                                 : cuda::FlatOptimizerKind::kAdamW;
  args.momentum = static_cast<float>(o.momentum);
  args.keep = static_cast<float>(1.0 - o.dampening);
  args.weight_decay = static_cast<float>(o.weight_decay);
  args.nesterov = o.nesterov;
  args.beta1 = static_cast<float>(o.beta1);
  args.beta2 = static_cast<float>(o.beta2);
  args.eps = static_cast<float>(o.eps);
  args.beta1_d = o.beta1;
  args.beta2_d = o.beta2;
  args.weight_decay_d = o.weight_decay;
  args.check_finite = check_finite;
  return args;
}

}  // namespace sprintnet::train
