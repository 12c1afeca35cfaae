#include "parity/golden_replay.h"

#include <memory>

#include "sprintnet/nn/activation.h"
#include "sprintnet/nn/linear.h"
#include "sprintnet/nn/loss.h"
#include "sprintnet/nn/sequential.h"
#include "sprintnet/optim/optimizer.h"
#include "sprintnet/train/model_io.h"

namespace sprintnet::parity {
namespace {

DType precision_dtype(const std::string& precision) {
  if (precision == "fp64") return DType::kF64;
  if (precision == "fp32") return DType::kF32;
  SN_FAIL("golden precision '{}' is neither fp64 nor fp32", precision);
}

// Linear, ReLU, Linear, ..., Linear: torch.nn.Sequential's indices, so the names match.
std::unique_ptr<nn::Sequential> build_model(const GoldenFile& golden, DType dtype) {
  const nlohmann::json& d = golden.description();
  SN_CHECK(d.at("activation").get<std::string>() == "relu" && d.at("loss").get<std::string>() == "cross_entropy",
           "{}: this replay builds ReLU MLPs trained with cross-entropy", golden.path().string());
  const std::vector<std::int64_t> layers = golden.layers();
  auto model = std::make_unique<nn::Sequential>();
  for (std::size_t i = 0; i + 1 < layers.size(); ++i) {
    model->emplace<nn::Linear>(layers[i], layers[i + 1], true, Device::cpu(), dtype);
    if (i + 2 < layers.size()) model->emplace<nn::ReLU>();
  }
  model->set_input_requires_grad(false);
  return model;
}

std::unique_ptr<optim::Optimizer> build_optimizer(const nlohmann::json& h, std::vector<nn::Parameter*> params) {
  const auto number = [&h](const char* key) { return h.at(key).get<double>(); };
  const auto type = h.at("type").get<std::string>();
  if (type == "sgd") {
    const optim::SgdOptions options{number("lr"), number("momentum"), number("dampening"), number("weight_decay"),
                                    h.at("nesterov").get<bool>()};
    return std::make_unique<optim::SGD>(std::move(params), options);
  }
  SN_CHECK(type == "adamw", "golden optimizer type '{}' is neither sgd nor adamw", type);
  const optim::AdamOptions options{number("lr"), number("beta1"), number("beta2"), number("eps"),
                                   number("weight_decay")};
  return std::make_unique<optim::AdamW>(std::move(params), options);
}

}  // namespace

std::vector<ReferenceComparison> replay_and_compare(const GoldenFile& golden, const std::string& precision,
                                                    const std::string& optimizer_name) {
  const DType dtype = precision_dtype(precision);
  std::unique_ptr<nn::Sequential> model = build_model(golden, dtype);
  const nn::NamedParameters params = model->named_parameters();
  TensorList init;
  for (const auto& [name, param] : params) init.emplace_back(name, golden.tensor(precision + ".init." + name));
  train::load_model_weights(*model, init, golden.path().string());
  std::unique_ptr<optim::Optimizer> optimizer = build_optimizer(golden.optimizer(optimizer_name), model->parameters());
  nn::CrossEntropyLoss loss_fn;

  std::vector<ReferenceComparison> out;
  for (std::int64_t step = 1; step <= golden.steps(); ++step) {
    const std::int64_t b = (step - 1) % golden.batches();
    const Tensor& inputs = golden.tensor(fmt::format("{}.batch.{}.inputs", precision, b));
    SN_CHECK(inputs.dtype() == dtype, "{}: batch {} inputs are {}, expected {}", golden.path().string(), b,
             dtype_name(inputs.dtype()), dtype_name(dtype));
    const std::string prefix = fmt::format("{}.{}.step.{}", precision, optimizer_name, step);

    optimizer->zero_grad();
    const Tensor logits = model->forward(inputs);
    const Tensor loss = loss_fn.forward(logits, golden.tensor(fmt::format("batch.{}.labels", b)));
    model->backward(loss_fn.backward());
    out.push_back(compare_to_reference(prefix + ".loss", loss, golden.tensor(prefix + ".loss")));
    for (const auto& [name, param] : params) {
      const std::string grad_name = prefix + ".grad." + name;
      out.push_back(compare_to_reference(grad_name, param->grad, golden.tensor(grad_name)));
    }
    optimizer->step();
    for (const auto& [name, param] : params) {
      const std::string param_name = prefix + ".param." + name;
      out.push_back(compare_to_reference(param_name, param->value, golden.tensor(param_name)));
    }
  }
  return out;
}

}  // namespace sprintnet::parity
