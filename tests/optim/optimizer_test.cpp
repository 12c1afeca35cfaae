// What every optimizer shares: named state, skipping parameters without a
// gradient, zero_grad, make_optimizer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/error_message.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/optim/make_optimizer.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using ::testing::HasSubstr;

nn::Parameter random_parameter(const Shape& shape, Generator& gen) {
  return {test::random_uniform(shape, DType::kF64, gen), test::random_uniform(shape, DType::kF64, gen), true};
}

std::vector<std::string> names(const optim::NamedTensors& state) {
  std::vector<std::string> out;
  for (const auto& [name, tensor] : state) out.push_back(name);
  return out;
}

// fp64 against a one-line formula: rounding only.
constexpr double kFp64Tolerance = 1e-14;

TEST(OptimizerState, SgdNamesItsMomentumBuffers) {
  Generator gen(test::test_seed());
  nn::Parameter a = random_parameter({2, 3}, gen), b = random_parameter({4}, gen);
  optim::SGD plain({&a, &b}, {.lr = 0.1});
  EXPECT_TRUE(plain.state().empty());  // no momentum, no state

  optim::SGD momentum({&a, &b}, {.lr = 0.1, .momentum = 0.9});
  const auto state = momentum.state();
  EXPECT_EQ(names(state), (std::vector<std::string>{"0.momentum_buffer", "1.momentum_buffer"}));
  EXPECT_EQ(state[0].second.shape(), (Shape{2, 3}));
  EXPECT_EQ(state[1].second.shape(), (Shape{4}));
  momentum.step();
  // The state tensors are the live buffers (a checkpoint reads and restores through them).
  EXPECT_EQ(test::max_abs_difference(state[1].second, b.grad), 0.0);
}

TEST(OptimizerState, AdamNamesItsMomentsAndHoldsThem) {
  Generator gen(test::test_seed());
  nn::Parameter a = random_parameter({2, 3}, gen), b = random_parameter({4}, gen);
  const optim::AdamOptions options{.beta1 = 0.8, .beta2 = 0.95};
  optim::Adam adam({&a, &b}, options);
  const auto state = adam.state();
  EXPECT_EQ(names(state), (std::vector<std::string>{"0.exp_avg", "1.exp_avg", "0.exp_avg_sq", "1.exp_avg_sq"}));
  adam.step();
  EXPECT_EQ(adam.steps_taken(), 1);
  // After one step from zero: exp_avg = (1 - b1) g, exp_avg_sq = (1 - b2) g^2.
  const auto g = b.grad.to_vector<double>();
  const auto m = state[1].second.to_vector<double>(), v = state[3].second.to_vector<double>();
  for (std::size_t i = 0; i < g.size(); ++i) {
    EXPECT_NEAR(m[i], 0.2 * g[i], kFp64Tolerance);
    EXPECT_NEAR(v[i], 0.05 * g[i] * g[i], kFp64Tolerance);
  }
  EXPECT_FALSE(test::all_zero(state[3].second));
}

// A parameter whose gradient is empty (PyTorch: grad is None) is left exactly as it was,
// even though its stale gradient buffer holds garbage (poisoned with NaN here).
void expect_empty_gradient_skipped(optim::Optimizer& optimizer, nn::Parameter& live, nn::Parameter& skipped) {
  SCOPED_TRACE(optimizer.describe());
  const Tensor live_before = live.value.clone(), skipped_before = skipped.value.clone();
  ops::fill(skipped.grad, std::nan(""));
  skipped.has_grad = false;
  for (int step = 0; step < 2; ++step) optimizer.step();
  EXPECT_EQ(test::max_abs_difference(skipped.value, skipped_before), 0.0);
  EXPECT_GT(test::max_abs_difference(live.value, live_before), 0.0);
  EXPECT_TRUE(test::all_finite(live.value));
  for (const auto& [name, tensor] : optimizer.state()) {
    if (name.starts_with("1.")) {
      EXPECT_TRUE(test::all_zero(tensor)) << name;
    }
  }
}

TEST(OptimizerState, ParametersWithoutGradientAreNotUpdated) {
  Generator gen(test::test_seed());
  {
    nn::Parameter live = random_parameter({3}, gen), skipped = random_parameter({3}, gen);
    optim::SGD sgd({&live, &skipped}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1});
    expect_empty_gradient_skipped(sgd, live, skipped);
  }
  {
    nn::Parameter live = random_parameter({3}, gen), skipped = random_parameter({3}, gen);
    optim::AdamW adamw({&live, &skipped}, {.weight_decay = 0.1});
    expect_empty_gradient_skipped(adamw, live, skipped);
  }
}

TEST(OptimizerState, ZeroGradMarksEveryGradientEmpty) {
  Generator gen(test::test_seed());
  nn::Parameter a = random_parameter({3}, gen), b = random_parameter({2}, gen);
  optim::Adam adam({&a, &b}, {});
  adam.zero_grad();
  EXPECT_FALSE(a.has_grad || b.has_grad);
  const Tensor a_before = a.value.clone();
  adam.step();  // nothing has a gradient: nothing moves
  EXPECT_EQ(test::max_abs_difference(a.value, a_before), 0.0);
}

// torch.optim keeps optimizer state per parameter, created on the first step *that parameter*
// has a gradient: a parameter skipped on the first step(s) starts its momentum buffer as its
// own first gradient (SGD) and bias-corrects with its own step count (Adam).
TEST(OptimizerState, SgdMomentumBufferStartsOnTheParametersOwnFirstStep) {
  Generator gen(test::test_seed());
  nn::Parameter early = random_parameter({3}, gen), late = random_parameter({3}, gen);
  constexpr double kLr = 0.1, kMomentum = 0.9, kDampening = 0.5;
  optim::SGD sgd({&early, &late}, {.lr = kLr, .momentum = kMomentum, .dampening = kDampening});
  late.has_grad = false;
  sgd.step();  // step 1: only `early` has a gradient
  const auto p0 = late.value.to_vector<double>(), g = late.grad.to_vector<double>();
  late.has_grad = true;
  sgd.step();  // `late`'s first step: torch sets its buffer to g (no dampening), so p -= lr * g
  const auto p1 = late.value.to_vector<double>();
  for (std::size_t i = 0; i < p0.size(); ++i) EXPECT_NEAR(p1[i], p0[i] - kLr * g[i], kFp64Tolerance) << i;
}

TEST(OptimizerState, AdamBiasCorrectionCountsTheParametersOwnSteps) {
  Generator gen(test::test_seed());
  nn::Parameter early = random_parameter({3}, gen), late = random_parameter({3}, gen);
  const optim::AdamOptions o{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-3};
  optim::Adam adam({&early, &late}, o);
  late.has_grad = false;
  adam.step();
  const auto p0 = late.value.to_vector<double>(), g = late.grad.to_vector<double>();
  late.has_grad = true;
  adam.step();
  // `late`'s own step 1: m_hat = g, v_hat = g^2, so p -= lr * g / (|g| + eps).
  const auto p1 = late.value.to_vector<double>();
  for (std::size_t i = 0; i < p0.size(); ++i) {
    EXPECT_NEAR(p1[i], p0[i] - o.lr * g[i] / (std::abs(g[i]) + o.eps), kFp64Tolerance) << i;
  }
}

TEST(MakeOptimizer, BuildsEachTypeFromTheConfig) {
  Generator gen(test::test_seed());
  nn::Parameter p = random_parameter({3}, gen);
  OptimConfig config;
  config.type = "sgd";
  config.lr = 0.05;
  config.momentum = 0.9;
  auto sgd = optim::make_optimizer(config, {&p});
  EXPECT_EQ(sgd->describe(), "SGD(lr=0.05, momentum=0.9, dampening=0, weight_decay=0, nesterov=false)");
  EXPECT_EQ(names(sgd->state()), (std::vector<std::string>{"0.momentum_buffer"}));

  config.type = "adam";
  config.weight_decay = 0.01;
  EXPECT_EQ(optim::make_optimizer(config, {&p})->describe(),
            "Adam(lr=0.05, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.01)");
  config.type = "adamw";
  EXPECT_THAT(optim::make_optimizer(config, {&p})->describe(), HasSubstr("AdamW("));

  config.type = "lamb";
  const std::string unknown = test::error_message([&] { optim::make_optimizer(config, {&p}); });
  EXPECT_THAT(unknown, HasSubstr("optim.type"));
  EXPECT_THAT(unknown, HasSubstr("'lamb'"));
}

}  // namespace
}  // namespace sprintnet

namespace sprintnet {
namespace {

// As PyTorch: an empty list, a null parameter or one listed twice (updated twice a step) is refused, named.
TEST(Optimizer, RefusesAnEmptyANullOrARepeatedParameter) {
  Generator gen(test::test_seed());
  nn::Parameter p = random_parameter({3}, gen);
  EXPECT_THAT(test::error_message([] { optim::SGD({}, {.lr = 0.1}); }), HasSubstr("empty parameter list"));
  EXPECT_THAT(test::error_message([&] { optim::SGD({&p, nullptr}, {.lr = 0.1}); }), HasSubstr("parameter 1 is null"));
  EXPECT_THAT(test::error_message([&] { optim::Adam({&p, &p}, {}); }), HasSubstr("parameter 1 appears twice"));
}

// A copy of a Parameter shares its value's storage: listed beside the original it passed the pointer check and
// the tensor was updated twice a step. Overlapping views of one buffer are the same mistake; disjoint views of
// one buffer (a flat parameter buffer) are not.
TEST(Optimizer, RefusesParametersThatShareMemory) {
  Generator gen(test::test_seed());
  nn::Parameter p = random_parameter({3}, gen);
  nn::Parameter copy = p;
  EXPECT_THAT(test::error_message([&] { optim::SGD({&p, &copy}, {.lr = 0.1}); }),
              HasSubstr("optimizer parameters 0 and 1 share memory"));
  const Tensor flat = test::random_uniform({6}, DType::kF64, gen);
  const Tensor flat_grad = test::random_uniform({6}, DType::kF64, gen);
  const auto part = [&](std::int64_t begin, std::int64_t end) {
    return nn::Parameter{flat.slice_rows(begin, end), flat_grad.slice_rows(begin, end), true};
  };
  nn::Parameter low = part(0, 4), high = part(2, 6), rest = part(4, 6);
  EXPECT_THAT(test::error_message([&] { optim::Adam({&low, &rest, &high}, {}); }),
              HasSubstr("optimizer parameters 0 and 2 share memory"));
  EXPECT_NO_THROW(optim::Adam({&low, &rest}, {}));
}

}  // namespace
}  // namespace sprintnet
