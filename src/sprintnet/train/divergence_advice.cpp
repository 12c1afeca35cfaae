#include "sprintnet/train/divergence_advice.h"

#include <fmt/format.h>

namespace sprintnet::train {

namespace {

// The largest lr x weight_decay for which the decay alone does not grow the weights. On the decay's own
// quadratic (gradient wd x w) plain SGD multiplies w by 1 - lr wd, stable below 2; heavy-ball momentum m widens
// that to 2(1 + m), Nesterov's to 2(1 + m)/(1 + 2m); dampening d scales the step by 1 - d. AdamW's decoupled decay
// multiplies w by 1 - lr wd: 2. Adam's L2 term is divided by the gradients' own scale: no such bound.
double decay_bound(const OptimConfig& optim) {
  if (optim.type == "adamw") return 2.0;
  if (optim.type != "sgd") return 0.0;
  const double m = optim.momentum;
  const double bound = optim.nesterov ? 2.0 * (1.0 + m) / (1.0 + 2.0 * m) : 2.0 * (1.0 + m);
  return optim.dampening < 1.0 ? bound / (1.0 - optim.dampening) : 0.0;
}

}  // namespace

std::string divergence_advice(const Config& config, double lr) {
  const OptimConfig& optim = config.optim;
  std::string advice = "try a lower optim.lr";
  if (optim.type == "sgd" && optim.momentum >= 1.0) {
    advice += fmt::format(", or optim.momentum below 1 (it is {:g}: the velocity never decays)", optim.momentum);
  }
  const double bound = decay_bound(optim);
  if (bound > 0.0 && optim.momentum < 1.0 && lr * optim.weight_decay >= bound) {
    advice += fmt::format(", or a lower optim.weight_decay (lr x weight_decay = {:g}, at or past {:g}: the decay alone "
                          "grows the weights)",
                          lr * optim.weight_decay, bound);
  }
  if (config.schedule.type != "constant") {
    advice += fmt::format(", or schedule settings that keep it lower: schedule.type is \"{}\"", config.schedule.type);
  }
  return advice;
}

}  // namespace sprintnet::train
