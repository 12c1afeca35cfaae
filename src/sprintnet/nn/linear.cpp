#include "sprintnet/nn/linear.h"

#include <cmath>

#include "sprintnet/ops/ops.h"

namespace sprintnet::nn {
namespace {

Parameter make_parameter(Shape shape, Device device, DType dtype) {
  Parameter p;
  p.value = Tensor::zeros(shape, dtype, device);
  p.grad = Tensor::zeros(std::move(shape), dtype, device);
  return p;
}

// beta for a gradient write: overwrite an empty gradient, accumulate into a live one.
double accumulate_beta(Parameter& p) {
  const double beta = p.has_grad ? 1.0 : 0.0;
  p.has_grad = true;
  return beta;
}

}  // namespace

Linear::Linear(std::int64_t in_features, std::int64_t out_features, bool bias, Device device, DType dtype)
    : in_features_(in_features), out_features_(out_features) {
  SN_CHECK(in_features >= 1 && out_features >= 1, "Linear({}, {}): features must be >= 1", in_features, out_features);
  // The modules compute in fp32 or fp64 (16-bit training keeps fp32 parameters and converts in the engines).
  SN_CHECK(dtype == DType::kF32 || dtype == DType::kF64, "Linear({}, {}): parameters in {} are not supported (fp32 or "
           "fp64)", in_features, out_features, dtype_name(dtype));
  weight_ = make_parameter({out_features, in_features}, device, dtype);
  if (bias) bias_ = make_parameter({out_features}, device, dtype);
}

void Linear::reset_parameters(Generator& gen, Init init) {
  const double fan_in = static_cast<double>(in_features_), fan_out = static_cast<double>(out_features_);
  Tensor w = Tensor::empty(weight_.value.shape(), weight_.value.dtype());
  Tensor b = has_bias() ? Tensor::zeros(bias_.value.shape(), bias_.value.dtype()) : Tensor();
  switch (init) {
    case Init::kPyTorch: {
      // kaiming_uniform_(a=sqrt(5)) reduces to U(-1/sqrt(fan_in), 1/sqrt(fan_in)); the bias uses the same bound.
      const double bound = 1.0 / std::sqrt(fan_in);
      fill_uniform(w, gen, -bound, bound);
      if (b.defined()) fill_uniform(b, gen, -bound, bound);
      break;
    }
    case Init::kXavierUniform: fill_uniform(w, gen, -std::sqrt(6.0 / (fan_in + fan_out)), std::sqrt(6.0 / (fan_in + fan_out))); break;
    case Init::kXavierNormal: fill_normal(w, gen, 0.0, std::sqrt(2.0 / (fan_in + fan_out))); break;
    case Init::kKaimingUniform: fill_uniform(w, gen, -std::sqrt(6.0 / fan_in), std::sqrt(6.0 / fan_in)); break;
    case Init::kKaimingNormal: fill_normal(w, gen, 0.0, std::sqrt(2.0 / fan_in)); break;
  }
  ops::copy(weight_.value, w.to(weight_.value.device()));
  if (b.defined()) ops::copy(bias_.value, b.to(bias_.value.device()));
}

Tensor Linear::forward(const Tensor& input) {
  SN_CHECK(input.dim() == 2 && input.size(1) == in_features_, "Linear({}, {}): input has shape {}, expected [B, {}]",
           in_features_, out_features_, shape_str(input.shape()), in_features_);
  SN_CHECK(input.dtype() == weight_.value.dtype() && input.device() == weight_.value.device(),
           "Linear({}, {}): input is {} on {}, the weights {} on {} (convert the input with .to(), or build the model "
           "in its dtype and on its device)", in_features_, out_features_, dtype_name(input.dtype()),
           input.device().str(), dtype_name(weight_.value.dtype()), weight_.value.device().str());
  Tensor output = Tensor::empty({input.size(0), out_features_}, weight_.value.dtype(), weight_.value.device());
  ops::gemm(input, false, weight_.value, true, output);
  if (has_bias()) ops::add_bias(output, bias_.value);
  saved_input_ = training_ ? SavedTensor(input) : SavedTensor();
  saved_weight_ = training_ && input_requires_grad_ ? SavedTensor(weight_.value) : SavedTensor();
  return output;
}

Tensor Linear::backward(const Tensor& grad_output) {
  SN_CHECK(saved_input_.defined(), "Linear::backward without a forward in training mode");
  const std::string name = describe();
  // Both checked before any gradient is written: a refused backward changes nothing.
  const Tensor& input = saved_input_.unpack(name, "the input");
  const Tensor weight = saved_weight_.defined() ? saved_weight_.unpack(name, "the weight") : Tensor();
  check_shape(grad_output, {input.size(0), out_features_}, "Linear::backward: grad_output");
  ops::gemm(grad_output, true, input, false, weight_.grad, 1.0, accumulate_beta(weight_));
  if (has_bias()) ops::sum_rows(grad_output, bias_.grad, accumulate_beta(bias_));
  Tensor grad_input;
  if (weight.defined()) {
    grad_input = Tensor::empty(input.shape(), grad_output.dtype(), grad_output.device());
    ops::gemm(grad_output, false, weight, false, grad_input);
  }
  saved_input_ = saved_weight_ = SavedTensor();
  return grad_input;
}

NamedParameters Linear::named_parameters() {
  NamedParameters out{{"weight", &weight_}};
  if (has_bias()) out.emplace_back("bias", &bias_);
  return out;
}

std::string Linear::describe() const {
  return fmt::format("Linear(in={}, out={}, bias={})", in_features_, out_features_, bias_.value.defined());
}

}  // namespace sprintnet::nn
