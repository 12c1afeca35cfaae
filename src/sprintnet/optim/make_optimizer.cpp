#include "sprintnet/optim/make_optimizer.h"

namespace sprintnet::optim {

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& config, std::vector<nn::Parameter*> params) {
  if (config.type == "sgd") {
    return std::make_unique<SGD>(std::move(params), SgdOptions{config.lr, config.momentum, config.dampening,
                                                               config.weight_decay, config.nesterov});
  }
  const AdamOptions adam{config.lr, config.beta1, config.beta2, config.eps, config.weight_decay};
  if (config.type == "adam") return std::make_unique<Adam>(std::move(params), adam);
  if (config.type == "adamw") return std::make_unique<AdamW>(std::move(params), adam);
  SN_FAIL("optim.type: unknown optimizer '{}' (expected sgd, adam or adamw)", config.type);
}

}  // namespace sprintnet::optim
