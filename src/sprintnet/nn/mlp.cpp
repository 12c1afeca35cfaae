#include "sprintnet/nn/mlp.h"

#include "sprintnet/nn/activation.h"
#include "sprintnet/nn/linear.h"

namespace sprintnet::nn {

std::unique_ptr<Sequential> make_mlp(const MlpSpec& spec, Generator& gen, Device device, DType dtype) {
  auto model = std::make_unique<Sequential>();
  std::int64_t width = spec.inputs;
  std::vector<std::int64_t> outs = spec.hidden;
  outs.push_back(spec.outputs);
  for (std::size_t i = 0; i < outs.size(); ++i) {
    auto& linear = model->emplace<Linear>(width, outs[i], spec.bias, device, dtype);
    linear.reset_parameters(gen, spec.init);
    if (i + 1 < outs.size()) model->emplace<ActivationModule>(spec.activation);
    width = outs[i];
  }
  model->set_input_requires_grad(false);
  return model;
}

double mlp_train_flops(const MlpSpec& spec, std::int64_t batch) {
  double flops = 0.0;
  std::int64_t width = spec.inputs;
  std::vector<std::int64_t> outs = spec.hidden;
  outs.push_back(spec.outputs);
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const double gemm = 2.0 * static_cast<double>(batch) * static_cast<double>(width) * static_cast<double>(outs[i]);
    flops += gemm * (i == 0 ? 2.0 : 3.0);  // forward, weight gradient, and input gradient except for the data
    width = outs[i];
  }
  return flops;
}

}  // namespace sprintnet::nn
