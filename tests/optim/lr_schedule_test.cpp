// Learning-rate schedules against torch.optim.lr_scheduler's formulas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "support/error_message.h"
#include "sprintnet/optim/lr_schedule.h"

namespace sprintnet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Closed forms in double against the same in double: rounding only.
constexpr double kTolerance = 1e-15;

ScheduleConfig schedule(std::string type) {
  ScheduleConfig config;
  config.type = std::move(type);
  return config;
}

TEST(LrSchedule, Constant) {
  const optim::LrSchedule s(schedule("constant"), 0.1, 10, 100);
  for (std::int64_t step : {0, 1, 50, 99}) EXPECT_EQ(s.lr_at(step), 0.1) << step;
  EXPECT_EQ(s.describe(), "constant");
}

TEST(LrSchedule, StepDecaysByGammaEveryStepSizeEpochs) {
  // torch StepLR stepped per epoch: lr * gamma^floor(epoch / step_size); 10 steps per epoch.
  ScheduleConfig config = schedule("step");
  config.step_size = 2;
  config.gamma = 0.5;
  const optim::LrSchedule s(config, 0.1, 10, 100);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(19), 0.1);  // last step of epoch 1
  EXPECT_DOUBLE_EQ(s.lr_at(20), 0.05);
  EXPECT_DOUBLE_EQ(s.lr_at(39), 0.05);
  EXPECT_DOUBLE_EQ(s.lr_at(40), 0.025);
  EXPECT_DOUBLE_EQ(s.lr_at(99), 0.1 * std::pow(0.5, 4));
}

TEST(LrSchedule, CosineStartsAtLrAndFallsMonotonically) {
  ScheduleConfig config = schedule("cosine");
  config.min_lr = 0.001;
  const optim::LrSchedule s(config, 0.1, 10, 101);
  EXPECT_EQ(s.lr_at(0), 0.1);
  for (std::int64_t step = 1; step < 101; ++step) EXPECT_LT(s.lr_at(step), s.lr_at(step - 1)) << step;
  for (std::int64_t step = 0; step < 101; ++step) EXPECT_GE(s.lr_at(step), config.min_lr - kTolerance) << step;
}

// schedule.min_lr is the cosine schedule's final learning rate: reached on the last step that
// runs (total_steps - 1), with the midpoint (lr + min_lr) / 2 halfway through.
TEST(LrSchedule, CosineReachesMinLrOnTheLastStep) {
  ScheduleConfig config = schedule("cosine");
  config.min_lr = 0.001;
  const optim::LrSchedule s(config, 0.1, 10, 101);  // steps 0..100
  EXPECT_NEAR(s.lr_at(50), (0.1 + 0.001) / 2, kTolerance);
  EXPECT_NEAR(s.lr_at(100), 0.001, kTolerance);

  // With a warm-up the cosine runs over the steps after it: steps 10..110.
  config.warmup_steps = 10;
  const optim::LrSchedule warm(config, 0.1, 10, 111);
  EXPECT_NEAR(warm.lr_at(10), 0.1, kTolerance);
  EXPECT_NEAR(warm.lr_at(60), (0.1 + 0.001) / 2, kTolerance);
  EXPECT_NEAR(warm.lr_at(110), 0.001, kTolerance);
}

TEST(LrSchedule, LinearWarmupFromStartFactorToLr) {
  // torch LinearLR(start_factor, end_factor = 1, total_iters = warmup_steps):
  // factor(step) = start + (1 - start) * step / warmup_steps, then 1.
  ScheduleConfig config = schedule("constant");
  config.warmup_steps = 10;
  config.warmup_start_factor = 0.1;
  const optim::LrSchedule s(config, 0.2, 10, 100);
  EXPECT_NEAR(s.lr_at(0), 0.02, kTolerance);
  EXPECT_NEAR(s.lr_at(5), 0.2 * (0.1 + 0.9 * 0.5), kTolerance);
  EXPECT_NEAR(s.lr_at(9), 0.2 * (0.1 + 0.9 * 0.9), kTolerance);
  EXPECT_EQ(s.lr_at(10), 0.2);
  EXPECT_EQ(s.lr_at(99), 0.2);
  EXPECT_EQ(s.describe(), "constant with 10 warm-up steps");

  // The warm-up multiplies the other schedules too: step decay in its first epoch is lr itself.
  config.type = "step";
  const optim::LrSchedule step(config, 0.2, 10, 100);
  EXPECT_NEAR(step.lr_at(5), 0.2 * (0.1 + 0.9 * 0.5), kTolerance);
  config.type = "cosine";
  const optim::LrSchedule cosine(config, 0.2, 10, 100);
  EXPECT_NEAR(cosine.lr_at(5), 0.2 * (0.1 + 0.9 * 0.5), kTolerance);
}

// torch.optim.lr_scheduler.OneCycleLR (anneal_strategy="cos", three_phase=False), written
// out from its documented phases: rise from max_lr/div_factor to max_lr until step
// pct_start*total - 1, then fall to initial/final_div_factor at step total - 1.
double torch_one_cycle(double max_lr, double pct_start, double div_factor, double final_div_factor,
                       std::int64_t total, std::int64_t step) {
  const double initial = max_lr / div_factor, minimum = initial / final_div_factor;
  const double rise_end = pct_start * static_cast<double>(total) - 1.0, fall_end = static_cast<double>(total) - 1.0;
  const auto anneal = [](double start, double end, double pct) {
    return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
  };
  const double s = static_cast<double>(step);
  if (s <= rise_end) return anneal(initial, max_lr, s / rise_end);
  return anneal(max_lr, minimum, (s - rise_end) / (fall_end - rise_end));
}

TEST(LrSchedule, OneCycleMatchesTorch) {
  ScheduleConfig config = schedule("onecycle");  // pct_start 0.3, div_factor 25, final_div_factor 1e4
  const optim::LrSchedule s(config, 0.1, 10, 100);
  EXPECT_NEAR(s.lr_at(0), 0.1 / 25, kTolerance);
  EXPECT_NEAR(s.lr_at(29), 0.1, kTolerance);  // pct_start * total - 1
  EXPECT_LT(s.lr_at(28), 0.1);
  EXPECT_LT(s.lr_at(30), 0.1);
  EXPECT_NEAR(s.lr_at(99), 0.1 / 25 / 1e4, kTolerance);
  for (std::int64_t step = 0; step < 100; ++step) {
    EXPECT_NEAR(s.lr_at(step), torch_one_cycle(0.1, 0.3, 25, 1e4, 100, step), kTolerance) << step;
  }

  // A peak between two steps (pct_start * total - 1 = 11.5) and other factors.
  config.pct_start = 0.25;
  config.div_factor = 10;
  config.final_div_factor = 100;
  const optim::LrSchedule odd(config, 0.3, 10, 50);
  for (std::int64_t step = 0; step < 50; ++step) {
    EXPECT_NEAR(odd.lr_at(step), torch_one_cycle(0.3, 0.25, 10, 100, 50, step), kTolerance) << step;
  }
}

// A fall shorter than one step ((1 - pct_start) x total < 1: 0.5 of 10 steps at 0.95, 0.4 of 4 at 0.9) still ends at
// the minimum on the last step, as torch's; a span floored at one step left it half way (0.500002 for 4e-6).
TEST(LrSchedule, OneCycleWithAFallShorterThanAStepEndsAtTheMinimum) {
  ScheduleConfig config = schedule("onecycle");
  for (const auto& [pct_start, total] : {std::pair{0.95, std::int64_t{10}}, std::pair{0.9, std::int64_t{4}}}) {
    config.pct_start = pct_start;
    const optim::LrSchedule s(config, 1.0, 1, total);
    for (std::int64_t step = 0; step < total; ++step) {
      EXPECT_NEAR(s.lr_at(step), torch_one_cycle(1.0, pct_start, 25, 1e4, total, step), kTolerance)
          << "pct_start " << pct_start << " step " << step;
    }
    EXPECT_NEAR(s.lr_at(total - 1), 1.0 / 25 / 1e4, kTolerance);
  }
}

TEST(LrSchedule, ANegativeStepIsRefused) {
  const optim::LrSchedule s(schedule("onecycle"), 0.1, 10, 100);
  EXPECT_THROW(s.lr_at(-3), Error);
}

// A cosine with one step after the warm-up runs that step at lr, the cosine's start, as torch's SequentialLR of
// LinearLR and CosineAnnealingLR does (warm-up 5 of 6 steps: 0, .01, .02, .03, .04, then .05), and a one-step run
// trains at lr; with two steps or more the last runs at min_lr.
TEST(LrSchedule, ACosineOfOneStepRunsItAtLr) {
  ScheduleConfig config = schedule("cosine");
  config.min_lr = 0.01;
  config.warmup_steps = 5;
  const optim::LrSchedule last(config, 0.05, 2, 6);
  const double expected[] = {0.0, 0.01, 0.02, 0.03, 0.04, 0.05};
  for (std::int64_t step = 0; step < 6; ++step) EXPECT_NEAR(last.lr_at(step), expected[step], kTolerance) << step;

  // Two steps after the warm-up: lr, then min_lr (as before).
  config.warmup_steps = 4;
  const optim::LrSchedule two(config, 0.05, 2, 6);
  EXPECT_NEAR(two.lr_at(4), 0.05, kTolerance);
  EXPECT_EQ(two.lr_at(5), 0.01);  // cos(pi) rounds to -1: min_lr exactly, as at the end of any cosine

  // A run of one step without a warm-up trains at lr.
  config.warmup_steps = 0;
  EXPECT_EQ(optim::LrSchedule(config, 0.05, 1, 1).lr_at(0), 0.05);
}

// A warm-up as long as the run left the cosine no step (neither lr nor min_lr reached): refused, naming the key,
// its bound and the run's steps. The other types have no such end, and may ramp the rate up to the last step.
TEST(LrSchedule, ACosineWarmUpToTheRunsEndIsRefused) {
  ScheduleConfig config = schedule("cosine");
  config.min_lr = 0.01;
  config.warmup_steps = 6;
  EXPECT_THAT(test::error_message([&] { optim::LrSchedule(config, 0.05, 2, 6); }),
              AllOf(HasSubstr("schedule.warmup_steps: 6 is not in [0, 5]"),
                    HasSubstr("the run takes 6 steps (3 epochs x 2 steps an epoch)"), HasSubstr("schedule.min_lr"),
                    HasSubstr("train.epochs")));
  config.warmup_steps = 1;
  EXPECT_THAT(test::error_message([&] { optim::LrSchedule(config, 0.05, 1, 1); }),
              HasSubstr("the run takes 1 step (1 epoch x 1 step an epoch)"));

  // A run resumed from a checkpoint keeps the bound it began with (a warm-up to the end was allowed before), since
  // a resume may not change schedule.warmup_steps: it finishes warming up, as it would have.
  config.warmup_steps = 6;
  const optim::LrSchedule resumed(config, 0.05, 2, 6, /*resumed=*/true);
  EXPECT_NEAR(resumed.lr_at(5), 0.05 * 5.0 / 6.0, kTolerance);

  for (const char* type : {"constant", "step", "onecycle"}) {
    config.type = type;
    config.warmup_steps = 100;
    config.warmup_start_factor = 0.1;
    const optim::LrSchedule s(config, 0.2, 10, 100);
    const double warm = 0.1 + 0.9 * 0.99;  // the warm-up's factor on the last step
    EXPECT_NEAR(s.lr_at(99), warm * optim::LrSchedule(schedule(type), 0.2, 10, 100).lr_at(99), kTolerance) << type;
  }
}

TEST(LrSchedule, BadConfigErrorsNameTheKey) {
  const std::string type = test::error_message([] { optim::LrSchedule(schedule("linear"), 0.1, 10, 100); });
  EXPECT_THAT(type, HasSubstr("schedule.type"));
  EXPECT_THAT(type, HasSubstr("'linear'"));

  ScheduleConfig config = schedule("cosine");
  config.warmup_steps = 101;
  const std::string warmup = test::error_message([&] { optim::LrSchedule(config, 0.1, 10, 100); });
  EXPECT_THAT(warmup, HasSubstr("schedule.warmup_steps: 101"));
  EXPECT_THAT(warmup, HasSubstr("100 steps (10 epochs x 10 steps an epoch)"));
  config.type = "constant";  // a total a program chose, not epochs x steps an epoch: the total alone
  EXPECT_THAT(test::error_message([&] { optim::LrSchedule(config, 0.1, 7, 100); }),
              HasSubstr("not in [0, 100]: the run takes 100 steps;"));
  config.type = "cosine";
  config.warmup_steps = -1;
  EXPECT_THAT(test::error_message([&] { optim::LrSchedule(config, 0.1, 10, 100); }),
              HasSubstr("schedule.warmup_steps"));

  // Built by a program, not from a config: the config's bounds hold here too (a negative gamma gave a negative
  // rate, pct_start 1.5 a OneCycle that never fell, div_factor 0 infinite and NaN rates).
  const auto refusal = [](auto change) {
    ScheduleConfig c = schedule("onecycle");
    change(c);
    return test::error_message([&] { optim::LrSchedule(c, 0.1, 10, 100); });
  };
  EXPECT_THAT(refusal([](ScheduleConfig& c) { c.gamma = -0.5; }), HasSubstr("schedule.gamma: must be > 0, got -0.5"));
  EXPECT_THAT(refusal([](ScheduleConfig& c) { c.pct_start = 1.5; }), HasSubstr("schedule.pct_start: 1.5"));
  EXPECT_THAT(refusal([](ScheduleConfig& c) { c.div_factor = 0.0; }), HasSubstr("schedule.div_factor"));
  EXPECT_THAT(refusal([](ScheduleConfig& c) { c.final_div_factor = -1.0; }), HasSubstr("schedule.final_div_factor"));
  EXPECT_THAT(refusal([](ScheduleConfig& c) { c.min_lr = -0.1; }), HasSubstr("schedule.min_lr"));
  EXPECT_THAT(refusal([](ScheduleConfig& c) { c.warmup_start_factor = 2.0; }),
              HasSubstr("schedule.warmup_start_factor"));
  EXPECT_THAT(test::error_message([] { optim::LrSchedule(schedule("constant"), std::nan(""), 10, 100); }),
              HasSubstr("base learning rate nan"));
  // Each key in its bounds, their rates infinite: refused at once, naming the keys (an epoch trained at an
  // infinite rate before "training diverged" said so, naming none).
  EXPECT_THAT(refusal([](ScheduleConfig& c) { c.div_factor = 1e-320; }),
              AllOf(HasSubstr("schedule.div_factor and schedule.final_div_factor"), HasSubstr("at step 0 is inf")));
  EXPECT_THAT(refusal([](ScheduleConfig& c) { c.final_div_factor = 1e-320; }),
              AllOf(HasSubstr("at step 99"), HasSubstr("not a finite number")));
  ScheduleConfig step = schedule("step");
  step.gamma = 1e300;
  EXPECT_THAT(test::error_message([&] { optim::LrSchedule(step, 0.1, 10, 100); }),
              AllOf(HasSubstr("schedule.gamma"), HasSubstr("at step 99 is inf")));
  step.gamma = 1e30;  // 0.1 x 1e30^9: large and finite, a diverging run's business, not the schedule's
  EXPECT_NO_THROW(optim::LrSchedule(step, 0.1, 10, 100));
}

}  // namespace
}  // namespace sprintnet
