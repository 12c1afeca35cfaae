// Optimizer::load_state's counters against the step count. torch.optim's semantics (the default) let a
// parameter's counters lag, for the steps it had no gradient; a sprintnet run gives every parameter a
// gradient at every step, so its checkpoints are held to the step count (fp16 runs to one count of the
// updates made, as dynamic loss scaling skips whole updates). A checkpoint edited to lag was accepted and
// the resumed run trained differently: its momentum buffers thrown away, Adam's bias correction restarted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <memory>

#include "sprintnet/optim/optimizer.h"
#include "support/error_message.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using optim::UpdateCounts;

constexpr std::string_view kOrigin = "run/state.safetensors";
constexpr std::array kEveryWayOfCounting = {UpdateCounts::kPerParameter, UpdateCounts::kEveryStep,
                                            UpdateCounts::kEveryStepUnlessSkipped};

nn::Parameter random_parameter(const Shape& shape, Generator& gen) {
  return {test::random_uniform(shape, DType::kF64, gen), test::random_uniform(shape, DType::kF64, gen), true};
}

struct Exported {
  optim::NamedTensors state;
  optim::Counters counters;
};

// What `optimizer` exports after `steps` steps, each with every parameter's gradient but those in `without_grad`.
Exported trained(optim::Optimizer& optimizer, int steps, const std::vector<nn::Parameter*>& without_grad = {}) {
  for (int s = 0; s < steps; ++s) {
    for (nn::Parameter* p : without_grad) p->has_grad = false;
    optimizer.step();
  }
  Exported out;
  out.counters = optimizer.counters();
  for (const auto& [name, tensor] : optimizer.state()) out.state.emplace_back(name, tensor.clone());
  return out;
}

// The message of loading `counters` into a fresh copy of `make()`'s optimizer ("" if it loads), and that a refusal
// left the optimizer as it was.
template <typename Make>
std::string load_error(const Make& make, const Exported& exported, const optim::Counters& counters,
                       UpdateCounts updates) {
  auto optimizer = make();
  try {
    optimizer->load_state(exported.state, counters, kOrigin, updates);
  } catch (const Error& e) {
    EXPECT_EQ(optimizer->steps_taken(), 0) << "a rejected state must leave the optimizer as it was";
    return e.what();
  }
  EXPECT_EQ(optimizer->counters(), counters);
  return "";
}

// `counters` with each one whose name ends in `suffix` set to `value`.
optim::Counters with(optim::Counters counters, const std::string& suffix, std::int64_t value) {
  for (auto& [name, v] : counters) {
    if (name.ends_with(suffix)) v = value;
  }
  return counters;
}

TEST(LoadState, SgdMomentumFlagsMustBeSetAfterARunsSteps) {
  Generator gen(test::test_seed());
  nn::Parameter a = random_parameter({2, 3}, gen), b = random_parameter({3}, gen);
  const auto make = [&] {
    return std::make_unique<optim::SGD>(std::vector{&a, &b}, optim::SgdOptions{.lr = 0.1, .momentum = 0.9});
  };
  const Exported run = trained(*make(), 3);
  ASSERT_EQ(run.counters, (optim::Counters{{"steps", 3}, {"0.momentum_started", 1}, {"1.momentum_started", 1}}));
  for (const UpdateCounts updates : kEveryWayOfCounting) {
    EXPECT_EQ(load_error(make, run, run.counters, updates), "");
  }

  // The review's edit: one flag 0 at step 3 threw the buffer away. A run never writes it, fp16 runs neither (a
  // skipped update skips every parameter); torch.optim's semantics allow it (that parameter had no gradient yet).
  optim::Counters one_off = run.counters;
  one_off["0.momentum_started"] = 0;
  EXPECT_THAT(load_error(make, run, one_off, UpdateCounts::kEveryStep),
              AllOf(HasSubstr(kOrigin), HasSubstr("'0.momentum_started' is 0, expected 1"), HasSubstr("took 3 steps")));
  EXPECT_THAT(load_error(make, run, one_off, UpdateCounts::kEveryStepUnlessSkipped),
              AllOf(HasSubstr(kOrigin), HasSubstr("'0.momentum_started' (0) and '1.momentum_started' (1) differ")));
  EXPECT_EQ(load_error(make, run, one_off, UpdateCounts::kPerParameter), "");

  // Every flag 0: an fp16 run whose 3 steps were all skipped, never an fp32 or bf16 one.
  const optim::Counters none = with(run.counters, "momentum_started", 0);
  EXPECT_THAT(load_error(make, run, none, UpdateCounts::kEveryStep),
              HasSubstr("'0.momentum_started' is 0, expected 1"));
  EXPECT_EQ(load_error(make, run, none, UpdateCounts::kEveryStepUnlessSkipped), "");
}

TEST(LoadState, AdamStepCountsMustBeTheRunsStepCount) {
  Generator gen(test::test_seed());
  nn::Parameter a = random_parameter({2, 3}, gen), b = random_parameter({3}, gen);
  const auto make = [&] {
    return std::make_unique<optim::AdamW>(std::vector{&a, &b}, optim::AdamOptions{.lr = 0.01});
  };
  const Exported run = trained(*make(), 3);
  ASSERT_EQ(run.counters, (optim::Counters{{"steps", 3}, {"0.step", 3}, {"1.step", 3}}));
  for (const UpdateCounts updates : kEveryWayOfCounting) {
    EXPECT_EQ(load_error(make, run, run.counters, updates), "");
  }

  // The review's edit: every step count 0 at step 3 restarted bias correction. Alike, they pass the check that the
  // counts agree with each other; only an fp16 run that skipped all 3 updates writes them.
  const optim::Counters restarted = with(run.counters, ".step", 0);
  EXPECT_THAT(load_error(make, run, restarted, UpdateCounts::kEveryStep),
              AllOf(HasSubstr(kOrigin), HasSubstr("'0.step' is 0, expected 3"), HasSubstr("took 3 steps")));
  EXPECT_EQ(load_error(make, run, restarted, UpdateCounts::kEveryStepUnlessSkipped), "");
  EXPECT_EQ(load_error(make, run, restarted, UpdateCounts::kPerParameter), "");

  optim::Counters one_off = run.counters;
  one_off["1.step"] = 2;
  EXPECT_THAT(load_error(make, run, one_off, UpdateCounts::kEveryStep), HasSubstr("'1.step' is 2, expected 3"));
  EXPECT_THAT(load_error(make, run, one_off, UpdateCounts::kEveryStepUnlessSkipped),
              HasSubstr("'0.step' (3) and '1.step' (2) differ"));
  // More updates than steps: no way of counting writes it.
  EXPECT_THAT(load_error(make, run, with(run.counters, ".step", 4), UpdateCounts::kPerParameter),
              AllOf(HasSubstr(kOrigin), HasSubstr("'0.step' is 4, expected a value in [0, 3] after 3 steps")));
}

// Before the first step nothing has started: an SGD flag of 1 at steps = 0 (accepted until now) is refused
// however the counters are read.
TEST(LoadState, NoCounterRunsAheadOfTheFirstStep) {
  Generator gen(test::test_seed());
  nn::Parameter a = random_parameter({2, 3}, gen), b = random_parameter({3}, gen);
  const auto sgd = [&] { return std::make_unique<optim::SGD>(std::vector{&a, &b}, optim::SgdOptions{.lr = 0.1}); };
  const Exported fresh = trained(*sgd(), 0);
  ASSERT_EQ(fresh.counters, (optim::Counters{{"steps", 0}, {"0.momentum_started", 0}, {"1.momentum_started", 0}}));
  for (const UpdateCounts updates : kEveryWayOfCounting) {
    EXPECT_EQ(load_error(sgd, fresh, fresh.counters, updates), "");
    EXPECT_THAT(load_error(sgd, fresh, with(fresh.counters, "momentum_started", 1), updates),
                AllOf(HasSubstr(kOrigin), HasSubstr("'0.momentum_started' is 1, expected a value in [0, 0] after 0 "
                                                    "steps")));
  }
  optim::Counters negative = fresh.counters;
  negative["steps"] = -1;
  EXPECT_THAT(load_error(sgd, fresh, negative, UpdateCounts::kPerParameter),
              AllOf(HasSubstr(kOrigin), HasSubstr("'steps' is -1")));
}

// torch.optim's semantics stay the default: an optimizer whose parameter had no gradient at some steps exports
// counters that lag, and loads them back; a run's checkpoint (every parameter at every step) may not.
TEST(LoadState, CountersOfAParameterWithoutAGradientLoadByDefault) {
  Generator gen(test::test_seed());
  nn::Parameter a = random_parameter({2, 3}, gen), b = random_parameter({3}, gen);
  const auto sgd = [&] {
    return std::make_unique<optim::SGD>(std::vector{&a, &b}, optim::SgdOptions{.lr = 0.1, .momentum = 0.9});
  };
  const Exported sgd_run = trained(*sgd(), 2, {&b});
  ASSERT_EQ(sgd_run.counters, (optim::Counters{{"steps", 2}, {"0.momentum_started", 1}, {"1.momentum_started", 0}}));
  EXPECT_EQ(load_error(sgd, sgd_run, sgd_run.counters, UpdateCounts::kPerParameter), "");
  EXPECT_THAT(load_error(sgd, sgd_run, sgd_run.counters, UpdateCounts::kEveryStep),
              HasSubstr("'1.momentum_started' is 0, expected 1"));

  const auto adam = [&] { return std::make_unique<optim::Adam>(std::vector{&a, &b}, optim::AdamOptions{}); };
  b.has_grad = true;
  auto first = adam();
  trained(*first, 1, {&b});
  b.has_grad = true;
  const Exported adam_run = trained(*first, 1);  // b's first update at the run's second step
  ASSERT_EQ(adam_run.counters, (optim::Counters{{"steps", 2}, {"0.step", 2}, {"1.step", 1}}));
  EXPECT_EQ(load_error(adam, adam_run, adam_run.counters, UpdateCounts::kPerParameter), "");
  EXPECT_THAT(load_error(adam, adam_run, adam_run.counters, UpdateCounts::kEveryStep),
              HasSubstr("'1.step' is 1, expected 2"));
}

}  // namespace
}  // namespace sprintnet
