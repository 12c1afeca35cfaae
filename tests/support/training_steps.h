#pragma once
// The first steps of an epoch through the eager step, the reference every engine is compared with (zero_grad,
// forward, loss, backward, the optimizer at that step's learning rate, as a PyTorch loop writes it), and through an
// engine's plan, from the same model and optimizer.
#include <vector>

#include "sprintnet/nn/loss.h"
#include "sprintnet/nn/sequential.h"
#include "sprintnet/optim/optimizer.h"
#include "sprintnet/train/batch_loader.h"
#include "sprintnet/train/train_plan.h"

namespace sprintnet::test {

// One step per entry of `lr_per_step` (the first batches of epoch `epoch`); returns the sum of the steps' mean losses.
inline double train_eager_steps(nn::Sequential& net, optim::Optimizer& optimizer, nn::Loss& loss,
                                train::BatchLoader& loader, const std::vector<double>& lr_per_step,
                                std::int64_t epoch = 0) {
  net.train();
  loader.start_epoch(epoch);
  double sum = 0.0;
  for (std::size_t s = 0; s < lr_per_step.size(); ++s) {
    optimizer.set_lr(lr_per_step[s]);
    const train::Batch batch = loader.batch(static_cast<std::int64_t>(s));
    optimizer.zero_grad();
    const Tensor value = loss.forward(net.forward(batch.inputs), batch.labels);
    net.backward(loss.backward());
    optimizer.step();
    sum += value.item();
  }
  return sum;
}

// `steps` steps of `plan`, from the model's weights and the optimizer's state, stored back into them; returns the
// epoch's totals.
inline train::EpochTotals train_plan_steps(train::TrainPlan& plan, nn::Sequential& net, optim::Optimizer& optimizer,
                                           int steps) {
  plan.load(net, optimizer);
  plan.start_epoch(0);
  for (int s = 0; s < steps; ++s) plan.step();
  const train::EpochTotals totals = plan.finish_epoch();
  plan.store(net, optimizer);
  return totals;
}

}  // namespace sprintnet::test
