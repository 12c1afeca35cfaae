#include "sprintnet/train/train_plan.h"

namespace sprintnet::train {

std::optional<std::string> train_plan_unsupported(const Config& config, std::int64_t train_samples) {
  const std::string& activation = config.model.activation;
  if (!config.model.hidden.empty() && activation != "relu" && activation != "identity") {
    return fmt::format("model.activation = \"{}\" (the compiled step fuses relu and identity)", activation);
  }
  if (config.loss.type != "cross_entropy") {
    return fmt::format("loss.type = \"{}\" (the compiled step fuses cross_entropy)", config.loss.type);
  }
  if (!config.train.drop_last && train_samples % config.train.batch_size != 0) {
    return fmt::format("train.drop_last = false with a partial last batch ({} samples, batch {})", train_samples,
                       config.train.batch_size);
  }
  if (config.train.batch_size > 65535 || config.train.eval_batch_size > 65535) {
    return std::string("a batch of more than 65535 samples");
  }
  return std::nullopt;
}

}  // namespace sprintnet::train
