#pragma once
// Losses over a batch, mean reduction (as torch.nn's defaults). forward()
// computes the loss and, in the same pass, the gradient w.r.t. the input,
// which backward() returns. The loss stays a one-element tensor on the
// input's device: reading it (item()) is the caller's choice, not a hidden sync.
#include <memory>

#include "sprintnet/core/tensor.h"

namespace sprintnet::nn {

class Loss {
 public:
  virtual ~Loss() = default;
  // logits/pred [B, C] and int32 labels [B]; returns the mean loss as a [1] tensor.
  virtual Tensor forward(const Tensor& input, const Tensor& labels) = 0;
  // dLoss/dinput of the last forward.
  Tensor backward() const;
  virtual std::string describe() const = 0;

 protected:
  Tensor grad_input_;
};

// torch.nn.CrossEntropyLoss(label_smoothing=s): softmax and log-sum-exp fused.
class CrossEntropyLoss final : public Loss {
 public:
  explicit CrossEntropyLoss(double label_smoothing = 0.0);
  Tensor forward(const Tensor& logits, const Tensor& labels) override;
  std::string describe() const override;

 private:
  double label_smoothing_;
};

// torch.nn.MSELoss against one-hot targets: mean over B*C elements of (pred - onehot)^2.
class MSELoss final : public Loss {
 public:
  Tensor forward(const Tensor& pred, const Tensor& labels) override;
  std::string describe() const override { return "MSELoss()"; }
};

// "cross_entropy" or "mse".
std::unique_ptr<Loss> make_loss(std::string_view type, double label_smoothing);

}  // namespace sprintnet::nn
