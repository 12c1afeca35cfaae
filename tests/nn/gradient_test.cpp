// Every module's backward against finite differences (fp64, CPU), and the
// accumulate/overwrite semantics of parameter gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "nn/gradient_check.h"
#include "sprintnet/nn/activation.h"
#include "sprintnet/nn/linear.h"
#include "sprintnet/nn/sequential.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/optim/optimizer.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

constexpr std::int64_t kBatch = 3, kIn = 5, kOut = 4;

std::unique_ptr<nn::Linear> random_linear(std::int64_t in, std::int64_t out, bool bias, Generator& gen) {
  auto linear = std::make_unique<nn::Linear>(in, out, bias, Device::cpu(), DType::kF64);
  linear->reset_parameters(gen);
  return linear;
}

TEST(GradientCheck, LinearWithBias) {
  Generator gen(test::test_seed());
  auto linear = random_linear(kIn, kOut, true, gen);
  test::expect_backward_matches_finite_differences(*linear, test::random_uniform({kBatch, kIn}, DType::kF64, gen),
                                                   gen);
}

TEST(GradientCheck, LinearWithoutBias) {
  Generator gen(test::test_seed());
  auto linear = random_linear(kIn, kOut, false, gen);
  ASSERT_EQ(linear->named_parameters().size(), 1u);
  test::expect_backward_matches_finite_differences(*linear, test::random_uniform({kBatch, kIn}, DType::kF64, gen),
                                                   gen);
}

// Inputs whose magnitude is at least kReluKinkMargin, so x +- h never crosses ReLU's kink at 0.
constexpr double kReluKinkMargin = 1e-3;

Tensor inputs_away_from_zero(const Shape& shape, Generator& gen) {
  std::vector<double> values(static_cast<std::size_t>(shape_numel(shape)));
  for (double& v : values) v = (gen.uniform_double() < 0.5 ? -1.0 : 1.0) * gen.uniform(kReluKinkMargin, 2.0);
  return Tensor::from_vector(values, shape);
}

template <typename Act>
void check_activation() {
  Generator gen(test::test_seed());
  Act act;
  // [-2, 2] covers the curved parts of tanh/sigmoid/GELU/SiLU; for ReLU both signs appear.
  test::expect_backward_matches_finite_differences(act, inputs_away_from_zero({kBatch, kIn}, gen), gen);
}

TEST(GradientCheck, ReLU) { check_activation<nn::ReLU>(); }
TEST(GradientCheck, GELU) { check_activation<nn::GELU>(); }
TEST(GradientCheck, Tanh) { check_activation<nn::Tanh>(); }
TEST(GradientCheck, Sigmoid) { check_activation<nn::Sigmoid>(); }
TEST(GradientCheck, SiLU) { check_activation<nn::SiLU>(); }

TEST(Activation, ForwardMatchesPyTorchDefinitions) {
  // The finite differences only prove backward consistent with forward; this pins forward to
  // PyTorch's definitions (GELU is the exact erf form), in fp64 to rounding (1e-14).
  const std::vector<double> xs = {-2.5, -0.7, -1e-3, 0.4, 1.9};
  const Tensor x = Tensor::from_vector(xs, {1, 5});
  auto expect_values = [&](nn::Module&& act, double (*f)(double)) {
    SCOPED_TRACE(act.describe());
    const auto y = act.forward(x).to_vector<double>();
    for (std::size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(y[i], f(xs[i]), 1e-14) << "x = " << xs[i];
  };
  expect_values(nn::ReLU(), [](double v) { return v > 0.0 ? v : 0.0; });
  expect_values(nn::GELU(), [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); });
  expect_values(nn::Tanh(), [](double v) { return std::tanh(v); });
  expect_values(nn::Sigmoid(), [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  expect_values(nn::SiLU(), [](double v) { return v / (1.0 + std::exp(-v)); });
}

TEST(GradientCheck, SequentialChainEndToEnd) {
  Generator gen(test::test_seed());
  nn::Sequential model;
  model.add(random_linear(kIn, 6, true, gen));
  model.emplace<nn::Tanh>();
  model.add(random_linear(6, kOut, true, gen));
  model.emplace<nn::GELU>();
  model.add(random_linear(kOut, 3, true, gen));
  ASSERT_EQ(model.named_parameters().size(), 6u);
  test::expect_backward_matches_finite_differences(model, test::random_uniform({kBatch, kIn}, DType::kF64, gen), gen);
}

// Naive references for one backward of a Linear: dW = dy^T x, db = sum over the batch of dy.
Tensor reference_weight_grad(const Tensor& x, const Tensor& dy) {
  const std::int64_t batch = x.size(0), in = x.size(1), out = dy.size(1);
  const auto xv = x.to_vector<double>(), dyv = dy.to_vector<double>();
  std::vector<double> dw(static_cast<std::size_t>(out * in), 0.0);
  for (std::int64_t o = 0; o < out; ++o) {
    for (std::int64_t i = 0; i < in; ++i) {
      for (std::int64_t n = 0; n < batch; ++n) dw[o * in + i] += dyv[n * out + o] * xv[n * in + i];
    }
  }
  return Tensor::from_vector(dw, {out, in});
}

Tensor reference_bias_grad(const Tensor& dy) {
  const std::int64_t batch = dy.size(0), out = dy.size(1);
  const auto dyv = dy.to_vector<double>();
  std::vector<double> db(static_cast<std::size_t>(out), 0.0);
  for (std::int64_t n = 0; n < batch; ++n) {
    for (std::int64_t o = 0; o < out; ++o) db[o] += dyv[n * out + o];
  }
  return Tensor::from_vector(db, {out});
}

Tensor scaled(const Tensor& t, double factor) {
  auto values = t.to_vector<double>();
  for (double& v : values) v *= factor;
  return Tensor::from_vector(values, t.shape());
}

// fp64 products of a few terms: only summation order differs from the naive loops.
constexpr double kExactishTolerance = 1e-13;

TEST(GradientAccumulation, TwoBackwardsAddAndZeroGradMakesTheNextOverwrite) {
  Generator gen(test::test_seed());
  auto linear = random_linear(kIn, kOut, true, gen);
  const Tensor x = test::random_uniform({kBatch, kIn}, DType::kF64, gen);
  const Tensor dy1 = test::random_uniform({kBatch, kOut}, DType::kF64, gen);
  const Tensor dy2 = test::random_uniform({kBatch, kOut}, DType::kF64, gen);
  nn::Parameter& w = linear->weight();
  nn::Parameter& b = linear->bias();
  ASSERT_FALSE(w.has_grad);

  linear->forward(x);
  linear->backward(dy1);
  EXPECT_TRUE(w.has_grad && b.has_grad);
  const Tensor dw1 = reference_weight_grad(x, dy1), db1 = reference_bias_grad(dy1);
  ASSERT_FALSE(test::all_zero(dw1));
  EXPECT_LT(test::relative_error(w.grad, dw1), kExactishTolerance);
  EXPECT_LT(test::relative_error(b.grad, db1), kExactishTolerance);

  // No zero_grad: the second backward adds (PyTorch's accumulation).
  linear->forward(x);
  linear->backward(dy1);
  EXPECT_LT(test::relative_error(w.grad, scaled(dw1, 2.0)), kExactishTolerance);
  EXPECT_LT(test::relative_error(b.grad, scaled(db1, 2.0)), kExactishTolerance);

  // zero_grad through an optimizer marks the gradients empty; their stale contents (poisoned
  // here) must not leak into the next backward, which overwrites.
  optim::SGD sgd(linear->parameters(), {});
  sgd.zero_grad();
  EXPECT_FALSE(w.has_grad || b.has_grad);
  ops::fill(w.grad, std::nan(""));
  ops::fill(b.grad, std::nan(""));
  linear->forward(x);
  linear->backward(dy2);
  EXPECT_TRUE(w.has_grad && b.has_grad);
  EXPECT_LT(test::relative_error(w.grad, reference_weight_grad(x, dy2)), kExactishTolerance);
  EXPECT_LT(test::relative_error(b.grad, reference_bias_grad(dy2)), kExactishTolerance);
}

TEST(GradientAccumulation, SequentialAccumulatesEveryLayer) {
  Generator gen(test::test_seed());
  nn::Sequential model;
  model.add(random_linear(kIn, 6, true, gen));
  model.emplace<nn::SiLU>();
  model.add(random_linear(6, kOut, true, gen));
  const Tensor x = test::random_uniform({kBatch, kIn}, DType::kF64, gen);
  const Tensor dy = test::random_uniform({kBatch, kOut}, DType::kF64, gen);

  model.forward(x);
  model.backward(dy);
  std::vector<Tensor> once;
  for (nn::Parameter* p : model.parameters()) once.push_back(p->grad.clone());
  model.forward(x);
  model.backward(dy);
  const auto params = model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_FALSE(test::all_zero(once[i])) << model.named_parameters()[i].first;
    EXPECT_LT(test::relative_error(params[i]->grad, scaled(once[i], 2.0)), kExactishTolerance)
        << model.named_parameters()[i].first;
  }
}

}  // namespace
}  // namespace sprintnet
