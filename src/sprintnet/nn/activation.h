#pragma once
// Elementwise activation modules: y = f(x), dx = f'(x) * dy.
// The named classes (ReLU, GELU, ...) exist so model code reads like PyTorch.
#include "sprintnet/nn/module.h"
#include "sprintnet/nn/saved_tensor.h"
#include "sprintnet/ops/backend.h"

namespace sprintnet::nn {

class ActivationModule : public Module {
 public:
  explicit ActivationModule(Activation act) : act_(act) {}
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::string describe() const override;
  Activation activation() const { return act_; }

 private:
  const char* class_name() const;  // "ReLU", as torch.nn names it

  Activation act_;
  SavedTensor saved_input_, saved_output_;
};

class ReLU final : public ActivationModule {
 public:
  ReLU() : ActivationModule(Activation::kReLU) {}
};
class GELU final : public ActivationModule {  // exact (erf) form
 public:
  GELU() : ActivationModule(Activation::kGELU) {}
};
class Tanh final : public ActivationModule {
 public:
  Tanh() : ActivationModule(Activation::kTanh) {}
};
class Sigmoid final : public ActivationModule {
 public:
  Sigmoid() : ActivationModule(Activation::kSigmoid) {}
};
class SiLU final : public ActivationModule {
 public:
  SiLU() : ActivationModule(Activation::kSiLU) {}
};

}  // namespace sprintnet::nn
