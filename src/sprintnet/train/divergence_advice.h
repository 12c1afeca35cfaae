#pragma once
// What a "training diverged" message advises. A lower optim.lr always; and where the config's own values make
// the update unstable whatever the data, the key to blame: momentum of 1 or more never lets the velocity decay,
// and a weight decay with lr x decay past the bound below grows the weights by the decay alone.
#include <string>

#include "sprintnet/io/config.h"

namespace sprintnet::train {

// The advice for a run of `config` that diverged at learning rate `lr` (the schedule's value then):
// "try a lower optim.lr[, or ...]".
std::string divergence_advice(const Config& config, double lr);

}  // namespace sprintnet::train
