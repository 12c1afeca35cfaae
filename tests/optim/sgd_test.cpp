// torch.optim.SGD semantics, each variant against its closed form over three
// steps with changing gradients (and changing learning rates, as a schedule sets them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/error_message.h"
#include "optim/three_step_driver.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using ::testing::HasSubstr;
using test::PerStep;

constexpr PerStep kLrs = {0.1, 0.05, 0.2};

test::OptimizerFactory sgd(const optim::SgdOptions& options) {
  return [options](std::vector<nn::Parameter*> params) {
    return std::make_unique<optim::SGD>(std::move(params), options);
  };
}

TEST(SGD, Plain) {
  // p3 = p0 - sum_t lr_t * g_t
  test::expect_three_steps_match(sgd({}), kLrs, [](double p0, const PerStep& g, const PerStep& lr) {
    return p0 - lr[0] * g[0] - lr[1] * g[1] - lr[2] * g[2];
  });
}

TEST(SGD, Momentum) {
  // The first step's buffer is the gradient itself: b0 = g0, b1 = m g0 + g1, b2 = m^2 g0 + m g1 + g2.
  constexpr double m = 0.9;
  test::expect_three_steps_match(sgd({.momentum = m}), kLrs, [](double p0, const PerStep& g, const PerStep& lr) {
    const double b0 = g[0], b1 = m * g[0] + g[1], b2 = m * m * g[0] + m * g[1] + g[2];
    return p0 - lr[0] * b0 - lr[1] * b1 - lr[2] * b2;
  });
}

TEST(SGD, MomentumWithDampening) {
  // Dampening scales the new gradient from the second step on; the first buffer is the undamped gradient.
  constexpr double m = 0.9, d = 0.3;
  test::expect_three_steps_match(sgd({.momentum = m, .dampening = d}), kLrs,
                                 [](double p0, const PerStep& g, const PerStep& lr) {
                                   const double b0 = g[0];
                                   const double b1 = m * g[0] + (1 - d) * g[1];
                                   const double b2 = m * m * g[0] + m * (1 - d) * g[1] + (1 - d) * g[2];
                                   return p0 - lr[0] * b0 - lr[1] * b1 - lr[2] * b2;
                                 });
}

TEST(SGD, Nesterov) {
  // The update is g_t + m * b_t, with b_t the momentum buffer after step t.
  constexpr double m = 0.9;
  test::expect_three_steps_match(sgd({.momentum = m, .nesterov = true}), kLrs,
                                 [](double p0, const PerStep& g, const PerStep& lr) {
                                   const double b0 = g[0], b1 = m * g[0] + g[1], b2 = m * m * g[0] + m * g[1] + g[2];
                                   return p0 - lr[0] * (g[0] + m * b0) - lr[1] * (g[1] + m * b1) -
                                          lr[2] * (g[2] + m * b2);
                                 });
}

TEST(SGD, WeightDecay) {
  // L2 added to the gradient: p_{t+1} = p_t - lr_t * (g_t + wd * p_t).
  constexpr double wd = 0.3;
  test::expect_three_steps_match(sgd({.weight_decay = wd}), kLrs, [](double p0, const PerStep& g, const PerStep& lr) {
    const double p1 = p0 - lr[0] * (g[0] + wd * p0);
    const double p2 = p1 - lr[1] * (g[1] + wd * p1);
    return p2 - lr[2] * (g[2] + wd * p2);
  });
}

TEST(SGD, WeightDecayWithMomentum) {
  // The decayed gradient d_t = g_t + wd * p_t is what enters the buffer.
  constexpr double wd = 0.3, m = 0.5;
  test::expect_three_steps_match(sgd({.momentum = m, .weight_decay = wd}), kLrs,
                                 [](double p0, const PerStep& g, const PerStep& lr) {
                                   const double b0 = g[0] + wd * p0;
                                   const double p1 = p0 - lr[0] * b0;
                                   const double b1 = m * b0 + g[1] + wd * p1;
                                   const double p2 = p1 - lr[1] * b1;
                                   const double b2 = m * b1 + g[2] + wd * p2;
                                   return p2 - lr[2] * b2;
                                 });
}

TEST(SGD, Fp32MomentumStepsMatchFp64) {
  // 40000 elements: above the CPU kernels' threshold for going parallel, so that path runs too.
  const optim::SgdOptions options{.momentum = 0.9, .weight_decay = 1e-2, .nesterov = true};
  const std::uint64_t seed = test::test_seed();
  const std::vector<Shape> shapes = {{200, 200}, {7}};
  const auto run32 = test::run_three_steps(sgd(options), kLrs, DType::kF32, seed, shapes);
  const auto run64 = test::run_three_steps(sgd(options), kLrs, DType::kF64, seed, shapes);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_EQ(run32.final_values[i].dtype(), DType::kF32);
    // Identical fp32-representable inputs; each step rounds a handful of fp32 operations
    // (6e-8 relative each) on values of O(1), so three steps stay well below 1e-6.
    EXPECT_LT(test::relative_error(run32.final_values[i], run64.final_values[i]), 1e-6) << "parameter " << i;
    EXPECT_GT(test::relative_error(run64.final_values[i], Tensor::from_vector(run64.initial[i], shapes[i])), 1e-2);
  }
}

TEST(SGD, BadHyperparametersAreNamed) {
  nn::Parameter p{Tensor::zeros({2}, DType::kF64), Tensor::zeros({2}, DType::kF64)};
  const auto build = [&](const optim::SgdOptions& options) { return optim::SGD({&p}, options); };

  const std::string momentum = test::error_message([&] { build({.momentum = -0.5}); });
  EXPECT_THAT(momentum, HasSubstr("momentum"));
  EXPECT_THAT(momentum, HasSubstr("-0.5"));
  const std::string nesterov = test::error_message([&] { build({.momentum = 0.9, .dampening = 0.1, .nesterov = true}); });
  EXPECT_THAT(nesterov, HasSubstr("Nesterov"));
  EXPECT_THAT(nesterov, HasSubstr("dampening"));
  EXPECT_THAT(test::error_message([&] { build({.nesterov = true}); }), HasSubstr("Nesterov"));
  EXPECT_THAT(test::error_message([&] { build({.weight_decay = -1e-4}); }), HasSubstr("weight_decay"));
  EXPECT_THAT(test::error_message([&] { build({.dampening = 1.5}); }), HasSubstr("dampening"));
  EXPECT_THAT(test::error_message([&] { build({.lr = -0.1}); }), HasSubstr("learning rate"));

  optim::SGD ok({&p}, {.lr = 0.1});
  const std::string nan_lr = test::error_message([&] { ok.set_lr(std::numeric_limits<double>::quiet_NaN()); });
  EXPECT_THAT(nan_lr, HasSubstr("learning rate"));
  EXPECT_THAT(nan_lr, HasSubstr("nan"));
  EXPECT_THAT(test::error_message([&] { ok.set_lr(std::numeric_limits<double>::infinity()); }),
              HasSubstr("learning rate"));
  EXPECT_EQ(ok.lr(), 0.1);  // a rejected value leaves the old one
}

}  // namespace
}  // namespace sprintnet
