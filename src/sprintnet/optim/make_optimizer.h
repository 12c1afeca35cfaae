#pragma once
// Builds the optimizer an OptimConfig describes.
#include <memory>

#include "sprintnet/io/config.h"
#include "sprintnet/optim/optimizer.h"

namespace sprintnet::optim {

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& config, std::vector<nn::Parameter*> params);

}  // namespace sprintnet::optim
