#pragma once
// nn::Linear: y = x W^T + b.
//   x [B, in], W [out, in] (PyTorch's layout, so checkpoints load unchanged), b [out], y [B, out]
// Backward, given dy [B, out]:
//   dW += dy^T x        [out, in]
//   db += sum_B dy      [out]
//   dx  = dy W          [B, in]   (skipped when the input needs no gradient)
#include "sprintnet/core/random.h"
#include "sprintnet/nn/init.h"
#include "sprintnet/nn/module.h"
#include "sprintnet/nn/saved_tensor.h"

namespace sprintnet::nn {

class Linear final : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true, Device device = Device::cpu(),
         DType dtype = DType::kF32);

  // Draws fresh weights with `gen` (on the CPU, then copies to the module's device).
  void reset_parameters(Generator& gen, Init init = Init::kPyTorch);

  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  NamedParameters named_parameters() override;
  std::string describe() const override;

  std::int64_t in_features() const { return in_features_; }
  std::int64_t out_features() const { return out_features_; }
  bool has_bias() const { return bias_.value.defined(); }
  Parameter& weight() { return weight_; }
  Parameter& bias() { return bias_; }

 private:
  std::int64_t in_features_, out_features_;
  Parameter weight_;
  Parameter bias_;  // undefined value when bias = false
  SavedTensor saved_input_, saved_weight_;  // the weight for the input's gradient (when it needs one)
};

}  // namespace sprintnet::nn
