#include "optim/three_step_driver.h"

#include <gtest/gtest.h>

#include "sprintnet/ops/ops.h"
#include "support/test_util.h"

namespace sprintnet::test {
namespace {

std::vector<double> draw(std::int64_t n, Generator& gen) {
  std::vector<double> values(static_cast<std::size_t>(n));
  for (double& v : values) v = static_cast<double>(static_cast<float>(gen.uniform(-1.0, 1.0)));
  return values;
}

}  // namespace

ThreeStepRun run_three_steps(const OptimizerFactory& make, const PerStep& lrs, DType dtype, std::uint64_t seed,
                             const std::vector<Shape>& shapes) {
  Generator gen(seed);
  ThreeStepRun run;
  std::vector<nn::Parameter> params(shapes.size());
  std::vector<nn::Parameter*> pointers;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    run.initial.push_back(draw(shape_numel(shapes[i]), gen));
    params[i].value = Tensor::from_vector(run.initial[i], shapes[i]).to(dtype);
    params[i].grad = Tensor::zeros(shapes[i], dtype);
    pointers.push_back(&params[i]);
    run.grads.emplace_back();
    for (int t = 0; t < kSteps; ++t) run.grads[i][t] = draw(shape_numel(shapes[i]), gen);
  }
  auto optimizer = make(pointers);
  for (int t = 0; t < kSteps; ++t) {
    optimizer->zero_grad();
    for (std::size_t i = 0; i < params.size(); ++i) {  // what a backward would write
      ops::copy(params[i].grad, Tensor::from_vector(run.grads[i][t], shapes[i]).to(dtype));
      params[i].has_grad = true;
    }
    optimizer->set_lr(lrs[t]);
    optimizer->step();
  }
  EXPECT_EQ(optimizer->steps_taken(), kSteps);
  for (auto& p : params) run.final_values.push_back(p.value);
  return run;
}

void expect_three_steps_match(const OptimizerFactory& make, const PerStep& lrs, const ElementRule& rule) {
  const ThreeStepRun run = run_three_steps(make, lrs, DType::kF64, test_seed());
  for (std::size_t i = 0; i < run.initial.size(); ++i) {
    std::vector<double> expected(run.initial[i].size());
    for (std::size_t e = 0; e < expected.size(); ++e) {
      const PerStep grads = {run.grads[i][0][e], run.grads[i][1][e], run.grads[i][2][e]};
      expected[e] = rule(run.initial[i][e], grads, lrs);
    }
    const Tensor expected_tensor = Tensor::from_vector(expected, run.final_values[i].shape());
    const Tensor initial_tensor = Tensor::from_vector(run.initial[i], run.final_values[i].shape());
    EXPECT_LT(relative_error(run.final_values[i], expected_tensor), kClosedFormTolerance) << "parameter " << i;
    EXPECT_GT(relative_error(run.final_values[i], initial_tensor), 1e-3) << "parameter " << i << " barely moved";
  }
}

}  // namespace sprintnet::test
