#include "sprintnet/train/flat_parameters.h"

#include <algorithm>

#include "sprintnet/ops/ops.h"

namespace sprintnet::train {
namespace {

std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }

// Flat offset and shape of every parameter, in parameters() order (weight, then bias, per layer).
std::vector<std::pair<std::int64_t, Shape>> parameter_places(const FlatLayout& layout) {
  std::vector<std::pair<std::int64_t, Shape>> places;
  for (const FlatLayer& layer : layout.layers) {
    places.emplace_back(layer.weight_offset, Shape{layer.out, layer.in});
    if (layer.bias_offset >= 0) places.emplace_back(layer.bias_offset, Shape{layer.out});
  }
  return places;
}

}  // namespace

FlatLayout flat_layout(const nn::MlpSpec& mlp, std::int64_t alignment) {
  FlatLayout layout;
  std::vector<std::int64_t> widths = mlp.hidden;
  widths.push_back(mlp.outputs);
  std::int64_t in = mlp.inputs;
  for (const std::int64_t out : widths) {
    FlatLayer layer{.in = in, .out = out, .weight_offset = layout.size};
    layout.size = round_up(layout.size + in * out, alignment);
    if (mlp.bias) {
      layer.bias_offset = layout.size;
      layout.size = round_up(layout.size + out, alignment);
    }
    layout.layers.push_back(layer);
    in = out;
  }
  return layout;
}

Tensor flat_view(const Tensor& flat, std::int64_t offset, const Shape& shape) {
  return flat.slice_rows(offset, offset + shape_numel(shape)).view(shape);
}

std::vector<nn::Linear*> linear_layers(nn::Sequential& model, std::size_t expected) {
  std::vector<nn::Linear*> out;
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (auto* linear = dynamic_cast<nn::Linear*>(&model[i])) out.push_back(linear);
  }
  SN_CHECK(out.size() == expected, "the model has {} Linear layers, the compiled step {}", out.size(), expected);
  return out;
}

void copy_weights_to_flat(nn::Sequential& model, const FlatLayout& layout, const Tensor& flat) {
  const auto linears = linear_layers(model, layout.layers.size());
  for (std::size_t l = 0; l < linears.size(); ++l) {
    const FlatLayer& layer = layout.layers[l];
    ops::copy(flat_view(flat, layer.weight_offset, {layer.out, layer.in}), linears[l]->weight().value);
    if (layer.bias_offset >= 0) ops::copy(flat_view(flat, layer.bias_offset, {layer.out}), linears[l]->bias().value);
  }
}

void copy_weights_from_flat(nn::Sequential& model, const FlatLayout& layout, const Tensor& flat) {
  const auto linears = linear_layers(model, layout.layers.size());
  for (std::size_t l = 0; l < linears.size(); ++l) {
    const FlatLayer& layer = layout.layers[l];
    ops::copy(linears[l]->weight().value, flat_view(flat, layer.weight_offset, {layer.out, layer.in}));
    if (layer.bias_offset >= 0) ops::copy(linears[l]->bias().value, flat_view(flat, layer.bias_offset, {layer.out}));
  }
}

StepCounters load_optimizer_state(optim::Optimizer& optimizer, const FlatLayout& layout, const Tensor& state1,
                                  const Tensor& state2) {
  // Optimizer state by the names the eager optimizers export ("<param>.<state>").
  const auto places = parameter_places(layout);
  for (const auto& [name, tensor] : optimizer.state()) {
    const auto dot = name.find('.');
    const std::size_t index = std::stoul(name.substr(0, dot));
    const std::string what = name.substr(dot + 1);
    SN_CHECK(index < places.size(), "optimizer state '{}' has no parameter in the compiled step", name);
    const Tensor& flat = what == "exp_avg_sq" ? state2 : state1;
    SN_CHECK(flat.defined(), "optimizer state '{}' has no place in the compiled step", name);
    ops::copy(flat_view(flat, places[index].first, places[index].second), tensor);
  }
  return step_counters(optimizer.counters());
}

StepCounters step_counters(const optim::Counters& counters, std::string_view origin) {
  StepCounters out;
  out.step = counters.at("steps");
  out.opt_steps = out.step;
  if (const auto it = counters.find("0.step"); it != counters.end()) {
    out.opt_steps = it->second;  // Adam: updates per parameter (all alike in a compiled step)
    for (const auto& [name, value] : counters) {
      SN_CHECK(name == "steps" || value == out.opt_steps,
               "{}: optimizer counters '0.step' ({}) and '{}' ({}) differ, where every parameter is updated at every "
               "step", origin, out.opt_steps, name, value);
    }
  } else if (const auto started = counters.find("0.momentum_started"); started != counters.end()) {
    out.opt_steps = started->second == 1 ? std::max<std::int64_t>(out.step, 1) : 0;
  }
  return out;
}

void store_optimizer_state(optim::Optimizer& optimizer, const std::string& type, const FlatLayout& layout,
                           const Tensor& state1, const Tensor& state2, const StepCounters& counters,
                           const std::string& origin) {
  optim::NamedTensors tensors;
  optim::Counters out = optimizer.counters();
  std::int64_t index = 0;
  for (const auto& [offset, shape] : parameter_places(layout)) {
    if (type == "sgd") {
      if (state1.defined()) tensors.emplace_back(fmt::format("{}.momentum_buffer", index), flat_view(state1, offset, shape));
      out[fmt::format("{}.momentum_started", index)] = counters.opt_steps > 0 ? 1 : 0;
    } else {
      tensors.emplace_back(fmt::format("{}.exp_avg", index), flat_view(state1, offset, shape));
      tensors.emplace_back(fmt::format("{}.exp_avg_sq", index), flat_view(state2, offset, shape));
      out[fmt::format("{}.step", index)] = counters.opt_steps;
    }
    ++index;
  }
  out["steps"] = counters.step;
  optimizer.load_state(tensors, out, origin);
}

}  // namespace sprintnet::train
