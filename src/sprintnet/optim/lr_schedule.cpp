#include "sprintnet/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "sprintnet/core/error.h"
#include "sprintnet/io/progress_format.h"

namespace sprintnet::optim {
namespace {

// Cosine interpolation from `start` (fraction 0) to `end` (fraction 1).
double cosine_anneal(double start, double end, double fraction) {
  return end + (start - end) * (1.0 + std::cos(std::numbers::pi * fraction)) / 2.0;
}

}  // namespace

LrSchedule::LrSchedule(const ScheduleConfig& config, double base_lr, std::int64_t steps_per_epoch,
                       std::int64_t total_steps, bool resumed)
    : config_(config), base_lr_(base_lr), steps_per_epoch_(std::max<std::int64_t>(steps_per_epoch, 1)),
      total_steps_(std::max<std::int64_t>(total_steps, 1)) {
  SN_CHECK(config.type == "constant" || config.type == "step" || config.type == "cosine" || config.type == "onecycle",
           "schedule.type: unknown schedule '{}' (expected constant, step, cosine or onecycle)", config.type);
  SN_CHECK(config.step_size >= 1, "schedule.step_size: must be >= 1, got {}", config.step_size);
  // A cosine needs a step after the warm-up: a warm-up to the end left the schedule's cosine (lr, min_lr) silently
  // unused. Under the other types a warm-up may ramp the rate up to the end. A resumed run keeps the bound it began
  // with, which allowed that (and resume refuses a change of schedule.warmup_steps): it finishes as it started.
  const bool cosine = config.type == "cosine" && !resumed;
  const std::int64_t max_warmup = cosine ? total_steps_ - 1 : total_steps_;
  SN_CHECK(config.warmup_steps >= 0 && config.warmup_steps <= max_warmup,
           "schedule.warmup_steps: {} is not in [0, {}]: the run takes {}{}; lower schedule.warmup_steps (or raise "
           "train.epochs)", config.warmup_steps, max_warmup, run_steps(),
           cosine ? ", and the cosine schedule (from optim.lr to schedule.min_lr) needs at least one of them after the "
                    "warm-up"
                  : "");
  // The config's bounds again (io/config_schema.cpp), for a program that builds a schedule itself: outside them
  // the rates came out negative, infinite or NaN, and only the optimizer's set_lr said so, naming no key.
  SN_CHECK(std::isfinite(base_lr) && base_lr >= 0.0, "schedule: the base learning rate {} is not finite and >= 0",
           base_lr);
  SN_CHECK(config.warmup_start_factor >= 0.0 && config.warmup_start_factor <= 1.0,
           "schedule.warmup_start_factor: {} is not in [0, 1]", config.warmup_start_factor);
  SN_CHECK(config.gamma > 0.0 && std::isfinite(config.gamma), "schedule.gamma: must be > 0, got {}", config.gamma);
  SN_CHECK(config.min_lr >= 0.0 && std::isfinite(config.min_lr), "schedule.min_lr: must be >= 0, got {}",
           config.min_lr);
  SN_CHECK(config.pct_start > 0.0 && config.pct_start < 1.0, "schedule.pct_start: {} is not in (0, 1)",
           config.pct_start);
  SN_CHECK(config.div_factor > 0.0 && std::isfinite(config.div_factor), "schedule.div_factor: must be > 0, got {}",
           config.div_factor);
  SN_CHECK(config.final_div_factor > 0.0 && std::isfinite(config.final_div_factor),
           "schedule.final_div_factor: must be > 0, got {}", config.final_div_factor);
  // Keys each within its bounds can still make a rate overflow (onecycle's lr / 1e-320, step's gamma^epochs):
  // refused now, naming them, not after an epoch trained at an infinite rate. The rates are monotone between the
  // first and the last step (step, onecycle's ends) or bounded by lr (constant, cosine, onecycle's peak).
  const char* keys = config.type == "onecycle" ? "optim.lr, schedule.div_factor and schedule.final_div_factor"
                     : config.type == "step"   ? "optim.lr, schedule.gamma and the run's epochs"
                                               : "optim.lr";
  for (const std::int64_t step : {std::int64_t{0}, total_steps_ - 1}) {
    const double lr = lr_at(step);
    SN_CHECK(std::isfinite(lr), "schedule: the learning rate at step {} is {}, not a finite number (schedule.type = "
             "\"{}\"): change {}", step, lr, config.type, keys);
  }
}

double LrSchedule::base_value(std::int64_t step) const {
  const ScheduleConfig& c = config_;
  if (c.type == "step") {
    const std::int64_t epoch = step / steps_per_epoch_;
    return base_lr_ * std::pow(c.gamma, static_cast<double>(epoch / c.step_size));
  }
  if (c.type == "cosine") {
    // Steps warmup .. total - 1, the first at lr and the last at min_lr. A cosine of one step runs it at lr, its
    // start, as torch's SequentialLR of a warm-up and CosineAnnealingLR does: a one-step run then trains.
    const double span = static_cast<double>(std::max<std::int64_t>(total_steps_ - 1 - c.warmup_steps, 1));
    const double t = static_cast<double>(std::clamp<std::int64_t>(step - c.warmup_steps, 0, total_steps_));
    return cosine_anneal(base_lr_, c.min_lr, std::min(t / span, 1.0));
  }
  if (c.type == "onecycle") {
    const double initial = base_lr_ / c.div_factor, final_lr = initial / c.final_div_factor;
    const double rise_end = c.pct_start * static_cast<double>(total_steps_) - 1.0;
    const double fall_end = static_cast<double>(total_steps_) - 1.0;
    const double s = static_cast<double>(step);
    if (s <= rise_end) return cosine_anneal(initial, base_lr_, rise_end > 0.0 ? s / rise_end : 1.0);
    // The fall spans (1 - pct_start) x total steps, which may be under one (pct_start 0.95 of 10 steps: 0.5), and
    // ends at final_lr on the last step, as torch's OneCycleLR does (a span floored at 1 left it half way).
    const double fall = fall_end - rise_end;  // > 0: pct_start < 1
    return cosine_anneal(base_lr_, final_lr, std::min((s - rise_end) / fall, 1.0));
  }
  return base_lr_;
}

double LrSchedule::lr_at(std::int64_t step) const {
  SN_CHECK(step >= 0, "learning-rate schedule: step {} is negative (steps count from 0)", step);
  double lr = base_value(step);
  if (step < config_.warmup_steps) {
    const double progress = static_cast<double>(step) / static_cast<double>(config_.warmup_steps);
    lr *= config_.warmup_start_factor + (1.0 - config_.warmup_start_factor) * progress;
  }
  return lr;
}

std::string LrSchedule::run_steps() const {
  // The trainer's total is epochs x steps an epoch; a program may pass any other.
  if (total_steps_ % steps_per_epoch_ != 0) return counted(total_steps_, "step");
  return fmt::format("{} ({} x {} an epoch)", counted(total_steps_, "step"),
                     counted(total_steps_ / steps_per_epoch_, "epoch"), counted(steps_per_epoch_, "step"));
}

std::string LrSchedule::describe() const {
  std::string out = config_.type;
  if (config_.warmup_steps > 0) out += fmt::format(" with {} warm-up steps", config_.warmup_steps);
  return out;
}

}  // namespace sprintnet::optim
