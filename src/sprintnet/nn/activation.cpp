#include "sprintnet/nn/activation.h"

#include "sprintnet/ops/ops.h"

namespace sprintnet::nn {

Tensor ActivationModule::forward(const Tensor& input) {
  Tensor output = Tensor::empty(input.shape(), input.dtype(), input.device());
  ops::activation_forward(act_, input, output);
  // An eval-mode forward saves nothing and drops what a training one saved, as Linear does: a backward
  // after it would otherwise return the gradient of the earlier input.
  saved_input_ = training_ ? SavedTensor(input) : SavedTensor();
  saved_output_ = training_ ? SavedTensor(output) : SavedTensor();
  return output;
}

Tensor ActivationModule::backward(const Tensor& grad_output) {
  SN_CHECK(saved_input_.defined(), "{}::backward without a forward in training mode", class_name());
  const std::string name = describe();
  const Tensor& input = saved_input_.unpack(name, "the input");
  const Tensor& output = saved_output_.unpack(name, "the output");
  Tensor grad_input = Tensor::empty(grad_output.shape(), grad_output.dtype(), grad_output.device());
  ops::activation_backward(act_, input, output, grad_output, grad_input);
  saved_input_ = saved_output_ = SavedTensor();
  return grad_input;
}

std::string ActivationModule::describe() const { return std::string(class_name()) + "()"; }

const char* ActivationModule::class_name() const {
  switch (act_) {
    case Activation::kReLU: return "ReLU";
    case Activation::kGELU: return "GELU";
    case Activation::kTanh: return "Tanh";
    case Activation::kSigmoid: return "Sigmoid";
    case Activation::kSiLU: return "SiLU";
    case Activation::kIdentity: return "Identity";
  }
  return "?";
}

}  // namespace sprintnet::nn
