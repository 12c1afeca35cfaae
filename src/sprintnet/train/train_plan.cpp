#include "sprintnet/train/train_plan.h"

namespace sprintnet::train {

std::optional<std::string> train_plan_unsupported(const Config& config) {
  if (config.train.batch_size > 65535 || config.train.eval_batch_size > 65535) {
    return std::string("a batch of more than 65535 samples");
  }
  return std::nullopt;
}

}  // namespace sprintnet::train
