#pragma once
// Repeats one run of the golden file with sprintnet on the CPU: the same MLP
// (nn::Sequential of Linear and ReLU), the golden initial weights, the same
// batches, nn::CrossEntropyLoss and optim::SGD / optim::AdamW with the
// hyperparameters the file describes. Every recorded value is compared with
// PyTorch's: per step the loss, each gradient (before the update) and each
// updated parameter. The run continues from sprintnet's own state, so errors
// accumulate over the steps as they would in training.
#include <string>
#include <vector>

#include "parity/golden_file.h"
#include "parity/reference_compare.h"

namespace sprintnet::parity {

// precision: "fp64" or "fp32"; optimizer: a key of the description's "optimizers" ("sgd", "adamw").
std::vector<ReferenceComparison> replay_and_compare(const GoldenFile& golden, const std::string& precision,
                                                    const std::string& optimizer);

}  // namespace sprintnet::parity
