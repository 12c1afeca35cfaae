#include "sprintnet/train/evaluate.h"

#include "sprintnet/ops/ops.h"

namespace sprintnet::train {
namespace {

// The model's mode as the caller had it, back whether evaluation returns or throws.
class ModeRestored {
 public:
  explicit ModeRestored(nn::Module& model) : model_(model), was_training_(model.is_training()) {}
  ~ModeRestored() { model_.train(was_training_); }
  ModeRestored(const ModeRestored&) = delete;
  ModeRestored& operator=(const ModeRestored&) = delete;

 private:
  nn::Module& model_;
  bool was_training_;
};

}  // namespace

EvalResult evaluate(nn::Module& model, BatchLoader& loader, std::string_view loss_type, const BatchHook& on_batch) {
  SN_CHECK(loss_type == "cross_entropy" || loss_type == "mse",
           "evaluate: unknown loss '{}' (loss.type is cross_entropy or mse)", loss_type);
  const ModeRestored restored(model);
  model.eval();
  const Device device = loader.device();
  // In double, as the plans sum it: an fp32 sum overflowed to infinity for finite outputs (a bias of 3e38, whose
  // per-sample losses are ~3e38), and eval blamed outputs that were not finite.
  const Tensor loss_sum = Tensor::zeros({1}, DType::kF64, device);
  const Tensor correct = Tensor::zeros({1}, DType::kI32, device);
  for (std::int64_t b = 0; b < loader.batches_in_order(); ++b) {
    const Batch batch = loader.batch_in_order(b);
    const Tensor logits = model.forward(batch.inputs);
    if (loss_type == "mse") {
      ops::mse_one_hot(logits, batch.labels, loss_sum, 1.0 / static_cast<double>(logits.size(1)), nullptr, 0.0);
    } else {
      ops::cross_entropy(logits, batch.labels, 0.0, loss_sum, 1.0, nullptr, 0.0);
    }
    ops::count_correct(logits, batch.labels, correct);
    if (on_batch) on_batch(logits, batch.labels);
  }
  EvalResult result;
  result.samples = loader.samples();
  result.correct = static_cast<std::int64_t>(correct.item());
  result.loss = loss_sum.item() / static_cast<double>(result.samples);
  result.accuracy = static_cast<double>(result.correct) / static_cast<double>(result.samples);
  return result;
}

}  // namespace sprintnet::train
