// nn::Linear beyond its gradients: forward against a naive product, the
// input_requires_grad switch, eval mode, and errors that name the module and shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/error_message.h"
#include "sprintnet/nn/activation.h"
#include "sprintnet/nn/linear.h"
#include "sprintnet/nn/sequential.h"
#include "sprintnet/ops/ops.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<nn::Linear> random_linear(std::int64_t in, std::int64_t out, bool bias, Generator& gen) {
  auto linear = std::make_unique<nn::Linear>(in, out, bias, Device::cpu(), DType::kF64);
  linear->reset_parameters(gen);
  return linear;
}

// y[n, o] = sum_i x[n, i] * W[o, i] + b[o], in plain loops.
Tensor reference_forward(const Tensor& x, nn::Linear& linear) {
  const std::int64_t batch = x.size(0), in = linear.in_features(), out = linear.out_features();
  const auto xv = x.to_vector<double>(), w = linear.weight().value.to_vector<double>();
  const auto b = linear.has_bias() ? linear.bias().value.to_vector<double>() : std::vector<double>(out, 0.0);
  std::vector<double> y(static_cast<std::size_t>(batch * out));
  for (std::int64_t n = 0; n < batch; ++n) {
    for (std::int64_t o = 0; o < out; ++o) {
      double sum = b[o];
      for (std::int64_t i = 0; i < in; ++i) sum += xv[n * in + i] * w[o * in + i];
      y[n * out + o] = sum;
    }
  }
  return Tensor::from_vector(y, {batch, out});
}

// fp64 dot products of 37 terms: only the summation order differs from the loops above.
constexpr double kFp64Tolerance = 1e-13;

TEST(Linear, ForwardMatchesNaiveProduct) {
  Generator gen(test::test_seed());
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    auto linear = random_linear(37, 11, bias, gen);
    const Tensor x = test::random_uniform({7, 37}, DType::kF64, gen);
    const Tensor y = linear->forward(x);
    EXPECT_EQ(y.shape(), (Shape{7, 11}));
    EXPECT_TRUE(test::all_finite(y));
    EXPECT_FALSE(test::all_zero(y));
    EXPECT_LT(test::relative_error(y, reference_forward(x, *linear)), kFp64Tolerance);
  }
}

TEST(Linear, ForwardInFp32MatchesNaiveProduct) {
  Generator gen(test::test_seed());
  nn::Linear linear32(37, 11, true, Device::cpu(), DType::kF32);
  linear32.reset_parameters(gen);
  const Tensor x = test::random_uniform({7, 37}, DType::kF32, gen);
  const Tensor y32 = linear32.forward(x);
  EXPECT_EQ(y32.dtype(), DType::kF32);
  // The reference reads the same fp32 values in double; fp32 accumulation of 37 products of O(0.1)
  // leaves ~1e-7 relative, so 1e-5 passes with margin while a wrong product is off by O(1).
  EXPECT_LT(test::relative_error(y32, reference_forward(x, linear32)), 1e-5);
}

TEST(Linear, InputNeedingNoGradientStillGetsParameterGradients) {
  Generator gen(test::test_seed());
  auto with_dx = random_linear(5, 4, true, gen);
  nn::Linear without_dx(5, 4, true, Device::cpu(), DType::kF64);
  ops::copy(without_dx.weight().value, with_dx->weight().value);
  ops::copy(without_dx.bias().value, with_dx->bias().value);
  without_dx.set_input_requires_grad(false);
  const Tensor x = test::random_uniform({3, 5}, DType::kF64, gen);
  const Tensor dy = test::random_uniform({3, 4}, DType::kF64, gen);

  with_dx->forward(x);
  EXPECT_TRUE(with_dx->backward(dy).defined());
  without_dx.forward(x);
  EXPECT_FALSE(without_dx.backward(dy).defined());
  EXPECT_TRUE(without_dx.weight().has_grad && without_dx.bias().has_grad);
  EXPECT_FALSE(test::all_zero(without_dx.weight().grad));
  EXPECT_EQ(test::max_abs_difference(without_dx.weight().grad, with_dx->weight().grad), 0.0);
  EXPECT_EQ(test::max_abs_difference(without_dx.bias().grad, with_dx->bias().grad), 0.0);
}

TEST(Linear, ShapeErrorsNameTheModuleAndShapes) {
  nn::Linear linear(5, 4, true, Device::cpu(), DType::kF64);
  const std::string wrong_width = test::error_message([&] { linear.forward(Tensor::zeros({3, 6}, DType::kF64)); });
  EXPECT_THAT(wrong_width, HasSubstr("Linear(5, 4)"));
  EXPECT_THAT(wrong_width, HasSubstr("[3, 6]"));
  EXPECT_THAT(wrong_width, HasSubstr("[B, 5]"));
  EXPECT_THAT(test::error_message([&] { linear.forward(Tensor::zeros({5}, DType::kF64)); }), HasSubstr("[5]"));

  linear.forward(Tensor::zeros({3, 5}, DType::kF64));
  const std::string wrong_grad = test::error_message([&] { linear.backward(Tensor::zeros({3, 5}, DType::kF64)); });
  EXPECT_THAT(wrong_grad, HasSubstr("Linear::backward: grad_output"));
  EXPECT_THAT(wrong_grad, HasSubstr("[3, 5]"));
  EXPECT_THAT(wrong_grad, HasSubstr("[3, 4]"));

  EXPECT_THAT(test::error_message([] { nn::Linear(4, 3).forward(Tensor::zeros({2, 4}, DType::kF64)); }),
              HasSubstr("Linear(4, 3): input is fp64 on cpu, the weights fp32 on cpu"));
  EXPECT_THROW(nn::Linear(0, 4), Error);
  EXPECT_THROW(nn::Linear(4, 0), Error);
}

TEST(Linear, EvalModeSavesNothingSoBackwardThrows) {
  Generator gen(test::test_seed());
  auto linear = random_linear(5, 4, true, gen);
  const Tensor x = test::random_uniform({3, 5}, DType::kF64, gen);
  const Tensor dy = test::random_uniform({3, 4}, DType::kF64, gen);
  const Tensor y_train = linear->forward(x).clone();
  linear->backward(dy);
  EXPECT_THAT(test::error_message([&] { linear->backward(dy); }), HasSubstr("without a forward in training mode"));

  linear->eval();
  EXPECT_FALSE(linear->is_training());
  const Tensor y_eval = linear->forward(x);
  EXPECT_EQ(test::max_abs_difference(y_eval, y_train), 0.0);
  EXPECT_THAT(test::error_message([&] { linear->backward(dy); }), HasSubstr("without a forward in training mode"));

  linear->train();
  linear->forward(x);
  EXPECT_NO_THROW(linear->backward(dy));
}

// An activation alike: its backward after an eval-mode forward returned the gradient of the training input
// before it (ReLU's [0, 1] for the input [1, -1]).
TEST(Activation, EvalModeForwardDropsWhatTrainingSavedSoBackwardThrows) {
  nn::ReLU relu;
  const Tensor dy = Tensor::from_vector(std::vector<float>{1.0F, 1.0F}, {1, 2});
  relu.forward(Tensor::from_vector(std::vector<float>{-1.0F, 1.0F}, {1, 2}));
  relu.eval();
  relu.forward(Tensor::from_vector(std::vector<float>{1.0F, -1.0F}, {1, 2}));
  EXPECT_THAT(test::error_message([&] { relu.backward(dy); }), HasSubstr("ReLU::backward without a forward in training mode"));
  relu.train();
  relu.forward(Tensor::from_vector(std::vector<float>{1.0F, -1.0F}, {1, 2}));
  EXPECT_EQ(relu.backward(dy).to_vector<float>(), (std::vector<float>{1.0F, 0.0F}));
}

TEST(Linear, EvalPropagatesThroughSequential) {
  Generator gen(test::test_seed());
  nn::Sequential model;
  model.add(random_linear(5, 4, true, gen));
  model.emplace<nn::ReLU>();
  model.eval();
  EXPECT_FALSE(model[0].is_training());
  EXPECT_FALSE(model[1].is_training());
  // Added after eval(): a child takes its parent's mode.
  model.emplace<nn::Tanh>();
  EXPECT_FALSE(model[2].is_training());
  model.forward(test::random_uniform({3, 5}, DType::kF64, gen));
  EXPECT_THROW(model.backward(Tensor::zeros({3, 4}, DType::kF64)), Error);
}

TEST(Linear, Describe) {
  EXPECT_EQ(nn::Linear(784, 256).describe(), "Linear(in=784, out=256, bias=true)");
  EXPECT_EQ(nn::Linear(3, 2, false).describe(), "Linear(in=3, out=2, bias=false)");
}

}  // namespace
}  // namespace sprintnet
