#include "sprintnet/train/loss_scaling.h"

#include <cmath>

#include <fmt/format.h>

namespace sprintnet::train {

std::optional<std::string> loss_scaling_problem(const LossScaling& scaling) {
  int exponent = 0;
  const bool power_of_two = std::isfinite(scaling.scale) && scaling.scale > 0.0f &&
                            std::frexp(scaling.scale, &exponent) == 0.5f;
  if (!power_of_two) {
    return fmt::format("loss scale {} is not a positive, finite power of two (fp16's scale starts at {} and only "
                       "doubles or halves)", scaling.scale, kInitialLossScale);
  }
  if (scaling.good_steps < 0 || scaling.good_steps >= kLossScaleGrowthInterval) {
    return fmt::format("{} finite steps since the loss scale changed is outside [0, {}) (the scale doubles after {})",
                       scaling.good_steps, kLossScaleGrowthInterval, kLossScaleGrowthInterval);
  }
  return std::nullopt;
}

}  // namespace sprintnet::train
