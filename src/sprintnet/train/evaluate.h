#pragma once
// Loss and accuracy of a model over a whole dataset, in eval mode. The sums
// accumulate on the device and are read once at the end.
#include <cstdint>
#include <functional>

#include "sprintnet/nn/loss.h"
#include "sprintnet/nn/module.h"
#include "sprintnet/train/batch_loader.h"

namespace sprintnet::train {

struct EvalResult {
  double loss = 0.0;      // mean over samples
  double accuracy = 0.0;  // fraction in [0, 1]
  std::int64_t samples = 0;
  std::int64_t correct = 0;
};

// Sees each batch's logits and labels (on the device) after the loss and count are taken.
using BatchHook = std::function<void(const Tensor& logits, const Tensor& labels)>;

// loss_type: "cross_entropy" or "mse" (label smoothing is a training device, not used here). Means over every
// sample of the loader's data set, in order, whatever its shuffle and drop_last (as the engines' plans
// evaluate); the loader's epoch is not touched, and the model's mode is left as it was, whether it returns or throws.
EvalResult evaluate(nn::Module& model, BatchLoader& loader, std::string_view loss_type,
                    const BatchHook& on_batch = {});

}  // namespace sprintnet::train
