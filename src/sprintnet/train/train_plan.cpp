#include "sprintnet/train/train_plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sprintnet/core/error.h"
#include "sprintnet/io/config_schema.h"

namespace sprintnet::train {

void check_train_plan_spec(const TrainPlanSpec& spec) {
  // The optimizer and the loss are what the config's optim.* and loss.* keys hold: the schema checks them, with the
  // rules and messages loading has (the eager optimizers refuse the same values), so the three plans agree with
  // each other and with the config. The defaults around them pass.
  Config config;
  config.optim = spec.optim;
  config.loss.type = spec.loss;
  config.loss.label_smoothing = spec.label_smoothing;
  std::vector<std::string> problems = config_problems(config);
  if (spec.lr_per_step.empty()) {
    problems.push_back("lr_per_step is empty: it holds the learning rate of every step of the run");
  }
  // A rate the eager optimizer's set_lr takes: finite and >= 0 (0 is a warm-up's first step).
  for (std::size_t s = 0; s < spec.lr_per_step.size(); ++s) {
    const double lr = spec.lr_per_step[s];
    if (!std::isfinite(lr) || lr < 0.0) {
      problems.push_back(fmt::format("lr_per_step[{}] = {}: a learning rate must be finite and >= 0", s, lr));
      break;  // the first is enough: a table of NaNs would list them all
    }
  }
  if (!problems.empty()) SN_FAIL("TrainPlanSpec: {}", fmt::join(problems, "; "));
}

void check_lr_steps(const std::vector<double>& lr_per_step, std::int64_t first_step, std::int64_t steps) {
  const auto size = static_cast<std::int64_t>(lr_per_step.size());
  SN_CHECK(first_step + steps <= size,
           "step {} of the run has no learning rate: TrainPlanSpec.lr_per_step holds {} rates (one a step of the run, "
           "from its first; the Trainer gives steps an epoch x train.epochs): give the plan the rate of every step it "
           "runs",
           std::max(first_step, size) + 1, size);
}

void TrainPlan::set_loss_scaling(const LossScaling& /*scaling*/) {
  SN_FAIL("{}: has no dynamic loss scaling to set (fp16's, on a GPU)", describe());
}

std::optional<std::string> train_plan_unsupported(const Config& config) {
  if (config.train.batch_size > 65535 || config.train.eval_batch_size > 65535) {
    return std::string("a batch of more than 65535 samples");
  }
  return std::nullopt;
}

}  // namespace sprintnet::train
