#include "sprintnet/nn/loss.h"

#include <cmath>

#include "sprintnet/ops/ops.h"

namespace sprintnet::nn {

Tensor Loss::backward() const {
  SN_CHECK(grad_input_.defined(), "Loss::backward before forward");
  return grad_input_;
}

CrossEntropyLoss::CrossEntropyLoss(double label_smoothing) : label_smoothing_(label_smoothing) {
  SN_CHECK(label_smoothing >= 0.0 && label_smoothing < 1.0, "label_smoothing {} not in [0, 1)", label_smoothing);
}

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& labels) {
  SN_CHECK(logits.defined() && logits.dim() == 2, "CrossEntropyLoss: logits must be [batch, classes], got {}",
           logits.defined() ? shape_str(logits.shape()) : std::string("an undefined tensor"));
  Tensor loss = Tensor::zeros({1}, logits.dtype(), logits.device());
  grad_input_ = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  const double inv_batch = 1.0 / static_cast<double>(std::max<std::int64_t>(logits.size(0), 1));
  ops::cross_entropy(logits, labels, label_smoothing_, loss, inv_batch, &grad_input_, inv_batch);
  if (logits.size(0) == 0) ops::fill(loss, std::nan(""));  // the mean of no rows, as torch's
  return loss;
}

std::string CrossEntropyLoss::describe() const {
  return fmt::format("CrossEntropyLoss(label_smoothing={})", label_smoothing_);
}

Tensor MSELoss::forward(const Tensor& pred, const Tensor& labels) {
  Tensor loss = Tensor::zeros({1}, pred.dtype(), pred.device());
  grad_input_ = Tensor::empty(pred.shape(), pred.dtype(), pred.device());
  const double inv_elements = 1.0 / static_cast<double>(std::max<std::int64_t>(pred.numel(), 1));
  ops::mse_one_hot(pred, labels, loss, inv_elements, &grad_input_, inv_elements);
  if (pred.numel() == 0) ops::fill(loss, std::nan(""));  // the mean of no elements, as torch's
  return loss;
}

std::unique_ptr<Loss> make_loss(std::string_view type, double label_smoothing) {
  if (type == "cross_entropy") return std::make_unique<CrossEntropyLoss>(label_smoothing);
  if (type == "mse") return std::make_unique<MSELoss>();
  SN_FAIL("unknown loss '{}' (expected cross_entropy or mse)", type);
}

}  // namespace sprintnet::nn
