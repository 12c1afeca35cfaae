#pragma once
// Drives an optimizer through three steps with fresh random gradients, so each
// test can state its expected result per element as a closed form of
// (initial value, the three gradients, the three learning rates).
#include <array>
#include <functional>
#include <memory>
#include <vector>

#include "sprintnet/core/random.h"
#include "sprintnet/optim/optimizer.h"

namespace sprintnet::test {

inline constexpr int kSteps = 3;
using PerStep = std::array<double, kSteps>;

using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<nn::Parameter*>)>;
// Expected final value of one element given its initial value p0, its gradient at
// each step and the learning rate of each step.
using ElementRule = std::function<double(double p0, const PerStep& grads, const PerStep& lrs)>;

struct ThreeStepRun {
  std::vector<std::vector<double>> initial;                   // per parameter
  std::vector<std::array<std::vector<double>, kSteps>> grads;  // per parameter, per step
  std::vector<Tensor> final_values;                          // per parameter, after the last step
};

// Two parameters by default (a [2, 3] matrix and a [4] vector, to exercise
// per-parameter state), values and gradients uniform in [-1, 1) and rounded to
// fp32 so an fp32 and an fp64 run start from identical numbers. The optimizer
// is built with `make`; its lr is set to lrs[t] (set_lr) before step t.
ThreeStepRun run_three_steps(const OptimizerFactory& make, const PerStep& lrs, DType dtype, std::uint64_t seed,
                             const std::vector<Shape>& shapes = {{2, 3}, {4}});

// Runs three fp64 steps and checks every element against `rule`, within
// kClosedFormTolerance; also checks that the parameters moved.
void expect_three_steps_match(const OptimizerFactory& make, const PerStep& lrs, const ElementRule& rule);

// fp64 kernel against fp64 closed form: only the order of a few roundings differs (~1e-16).
inline constexpr double kClosedFormTolerance = 1e-12;

}  // namespace sprintnet::test
