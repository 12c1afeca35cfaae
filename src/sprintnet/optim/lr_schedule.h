#pragma once
// Learning-rate schedules, evaluated per optimizer step on the host (the value
// is a kernel argument, so a schedule costs no device work).
//   constant  lr
//   step      lr * gamma^floor(epoch / step_size)                      (torch StepLR, stepped per epoch)
//   cosine    min_lr + (lr - min_lr) * (1 + cos(pi * t / T)) / 2       (CosineAnnealingLR over the steps after warm-up,
//             with T_max = total - 1 - warmup: the last step that runs gets min_lr, where torch's T_max = total
//             leaves it one step short of it; a cosine of one step runs it at lr, its start, as torch's SequentialLR
//             does. A warm-up must leave it at least that step: warmup_steps < total)
//   onecycle  torch OneCycleLR, cosine annealing, two phases, max_lr = lr (momentum is not cycled)
// A linear warm-up (torch LinearLR from warmup_start_factor to 1, where 0 is allowed) multiplies
// any of them during the first warmup_steps steps; during it the cosine stays at lr, so the two
// make torch's SequentialLR (warm-up, then the cosine), and with step its ChainedScheduler. (torch's
// OneCycleLR sets the rate outright each step, so no torch chain gives onecycle's product.)
#include <cstdint>
#include <memory>
#include <string>

#include "sprintnet/io/config.h"

namespace sprintnet::optim {

class LrSchedule {
 public:
  // `resumed`: the schedule of a run continued from a checkpoint, which keeps the bounds its run began under (a
  // cosine warm-up to the run's end was allowed before 2026-11-30).
  LrSchedule(const ScheduleConfig& config, double base_lr, std::int64_t steps_per_epoch, std::int64_t total_steps,
             bool resumed = false);
  // The learning rate for 0-based optimizer step `step`.
  double lr_at(std::int64_t step) const;
  std::string describe() const;

 private:
  double base_value(std::int64_t step) const;
  // "100 steps (10 epochs x 10 steps an epoch)", for errors.
  std::string run_steps() const;

  ScheduleConfig config_;
  double base_lr_;
  std::int64_t steps_per_epoch_, total_steps_;
};

}  // namespace sprintnet::optim
