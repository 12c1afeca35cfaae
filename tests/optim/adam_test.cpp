// torch.optim.Adam and AdamW, three steps against the algorithm as torch's
// documentation writes it (bias-corrected moments, eps outside the square root).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/error_message.h"
#include "optim/three_step_driver.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using ::testing::HasSubstr;
using test::PerStep;

constexpr PerStep kLrs = {1e-2, 2e-2, 5e-3};

test::OptimizerFactory adam(const optim::AdamOptions& options, bool decoupled) {
  return [options, decoupled](std::vector<nn::Parameter*> params) -> std::unique_ptr<optim::Optimizer> {
    if (decoupled) return std::make_unique<optim::AdamW>(std::move(params), options);
    return std::make_unique<optim::Adam>(std::move(params), options);
  };
}

// torch.optim.Adam(W)'s documented algorithm for one element, steps t = 1..3:
//   AdamW: p <- p * (1 - lr * wd)          Adam: g <- g + wd * p
//   m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
//   m_hat = m / (1 - b1^t);  v_hat = v / (1 - b2^t)
//   p <- p - lr * m_hat / (sqrt(v_hat) + eps)
test::ElementRule documented_adam(const optim::AdamOptions& o, bool decoupled) {
  return [o, decoupled](double p, const PerStep& grads, const PerStep& lrs) {
    double m = 0.0, v = 0.0;
    for (int t = 1; t <= test::kSteps; ++t) {
      const double lr = lrs[t - 1];
      double g = grads[t - 1];
      if (decoupled) {
        p *= 1.0 - lr * o.weight_decay;
      } else {
        g += o.weight_decay * p;
      }
      m = o.beta1 * m + (1.0 - o.beta1) * g;
      v = o.beta2 * v + (1.0 - o.beta2) * g * g;
      const double m_hat = m / (1.0 - std::pow(o.beta1, t));
      const double v_hat = v / (1.0 - std::pow(o.beta2, t));
      p -= lr * m_hat / (std::sqrt(v_hat) + o.eps);
    }
    return p;
  };
}

// Non-default values, so each hyperparameter's place in the formula shows: with |g| ~ 0.5,
// eps = 1e-3 moves the result by ~1e-3 relative, far above the 1e-12 tolerance.
constexpr optim::AdamOptions kOptions{.beta1 = 0.8, .beta2 = 0.95, .eps = 1e-3, .weight_decay = 0.5};

TEST(Adam, DefaultHyperparameters) {
  const optim::AdamOptions defaults{};
  test::expect_three_steps_match(adam(defaults, false), kLrs, documented_adam(defaults, false));
}

TEST(Adam, L2WeightDecay) {
  test::expect_three_steps_match(adam(kOptions, false), kLrs, documented_adam(kOptions, false));
}

TEST(AdamW, DecoupledWeightDecay) {
  test::expect_three_steps_match(adam(kOptions, true), kLrs, documented_adam(kOptions, true));
}

TEST(AdamW, DiffersFromAdamWithTheSameWeightDecay) {
  const std::uint64_t seed = test::test_seed();
  const auto with_l2 = test::run_three_steps(adam(kOptions, false), kLrs, DType::kF64, seed);
  const auto decoupled = test::run_three_steps(adam(kOptions, true), kLrs, DType::kF64, seed);
  for (std::size_t i = 0; i < with_l2.final_values.size(); ++i) {
    EXPECT_GT(test::relative_error(decoupled.final_values[i], with_l2.final_values[i]), 1e-4) << "parameter " << i;
  }
  // Without weight decay the two are the same algorithm.
  const optim::AdamOptions no_decay{.beta1 = 0.8, .beta2 = 0.95, .eps = 1e-3};
  const auto a = test::run_three_steps(adam(no_decay, false), kLrs, DType::kF64, seed);
  const auto b = test::run_three_steps(adam(no_decay, true), kLrs, DType::kF64, seed);
  for (std::size_t i = 0; i < a.final_values.size(); ++i) {
    EXPECT_EQ(test::max_abs_difference(a.final_values[i], b.final_values[i]), 0.0);
  }
}

TEST(Adam, Fp32StepsMatchFp64) {
  const std::uint64_t seed = test::test_seed();
  const std::vector<Shape> shapes = {{200, 200}, {7}};
  const auto run32 = test::run_three_steps(adam(kOptions, true), kLrs, DType::kF32, seed, shapes);
  const auto run64 = test::run_three_steps(adam(kOptions, true), kLrs, DType::kF64, seed, shapes);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    // Identical fp32-representable inputs; a few fp32 roundings per step on values of O(1).
    EXPECT_LT(test::relative_error(run32.final_values[i], run64.final_values[i]), 1e-6) << "parameter " << i;
  }
}

TEST(Adam, BadHyperparametersAreNamed) {
  nn::Parameter p{Tensor::zeros({2}, DType::kF64), Tensor::zeros({2}, DType::kF64)};
  const auto build = [&](const optim::AdamOptions& options) { return optim::Adam({&p}, options); };
  const std::string beta1 = test::error_message([&] { build({.beta1 = 1.0}); });
  EXPECT_THAT(beta1, HasSubstr("beta1"));
  EXPECT_THAT(beta1, HasSubstr("1"));
  EXPECT_THAT(test::error_message([&] { build({.beta2 = -0.1}); }), HasSubstr("beta2"));
  EXPECT_THAT(test::error_message([&] { build({.eps = 0.0}); }), HasSubstr("eps"));
  EXPECT_THAT(test::error_message([&] { build({.weight_decay = -1.0}); }), HasSubstr("weight_decay"));
  EXPECT_THAT(test::error_message([&] { build({.lr = std::nan("")}); }), HasSubstr("learning rate"));
}

}  // namespace
}  // namespace sprintnet
