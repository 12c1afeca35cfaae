// make_mlp, Sequential's naming/description/counting, and a softmax regression that learns.
#include <gtest/gtest.h>

#include <cmath>

#include "sprintnet/nn/activation.h"
#include "sprintnet/nn/linear.h"
#include "sprintnet/nn/loss.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/optim/optimizer.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

std::vector<std::string> parameter_names(nn::Module& module) {
  std::vector<std::string> names;
  for (auto& [name, param] : module.named_parameters()) names.push_back(name);
  return names;
}

// Misuse named, not a crash or a foreign exception: an index past the end, parameters in a dtype the modules
// do not compute in, a loss given no logits.
TEST(Modules, MisuseIsANamedError) {
  nn::Sequential empty;
  EXPECT_THROW(empty[3], Error);
  EXPECT_THROW(nn::Linear(4, 2, true, Device::cpu(), DType::kBF16), Error);
  EXPECT_THROW(nn::Linear(4, 2, true, Device::cpu(), DType::kI32), Error);
  nn::CrossEntropyLoss loss;
  EXPECT_THROW(loss.forward(Tensor(), Tensor::zeros({2}, DType::kI32)), Error);
}

TEST(MakeMlp, LayersAndPyTorchSequentialNames) {
  Generator gen(test::test_seed());
  const nn::MlpSpec spec{.inputs = 6, .hidden = {5, 4}, .outputs = 3, .activation = Activation::kTanh};
  auto model = nn::make_mlp(spec, gen, Device::cpu(), DType::kF64);
  ASSERT_EQ(model->size(), 5u);
  EXPECT_EQ(model->describe(),
            "Sequential(\n"
            "  (0): Linear(in=6, out=5, bias=true)\n"
            "  (1): Tanh()\n"
            "  (2): Linear(in=5, out=4, bias=true)\n"
            "  (3): Tanh()\n"
            "  (4): Linear(in=4, out=3, bias=true)\n"
            ")");
  // Activations take indices too, as in torch.nn.Sequential's state_dict.
  EXPECT_EQ(parameter_names(*model),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}));
  EXPECT_EQ(model->parameter_count(), (6 * 5 + 5) + (5 * 4 + 4) + (4 * 3 + 3));
  for (nn::Parameter* p : model->parameters()) {
    EXPECT_EQ(p->value.dtype(), DType::kF64);
    EXPECT_EQ(p->grad.shape(), p->value.shape());
    EXPECT_FALSE(test::all_zero(p->value));
  }
}

TEST(MakeMlp, WithoutBias) {
  Generator gen(test::test_seed());
  const nn::MlpSpec spec{.inputs = 6, .hidden = {5}, .outputs = 3, .activation = Activation::kReLU, .bias = false};
  auto model = nn::make_mlp(spec, gen);
  EXPECT_EQ(parameter_names(*model), (std::vector<std::string>{"0.weight", "2.weight"}));
  EXPECT_EQ(model->parameter_count(), 6 * 5 + 5 * 3);
  EXPECT_EQ((*model)[1].describe(), "ReLU()");
}

TEST(MakeMlp, DrawsLayerByLayerWeightThenBias) {
  // The documented draw order, so a seed gives the same model however it is built.
  const std::uint64_t seed = test::test_seed();
  Generator gen(seed), manual_gen(seed);
  const nn::MlpSpec spec{.inputs = 6, .hidden = {5}, .outputs = 3, .init = nn::Init::kXavierUniform};
  auto model = nn::make_mlp(spec, gen, Device::cpu(), DType::kF64);
  nn::Linear first(6, 5, true, Device::cpu(), DType::kF64), second(5, 3, true, Device::cpu(), DType::kF64);
  first.reset_parameters(manual_gen, nn::Init::kXavierUniform);
  second.reset_parameters(manual_gen, nn::Init::kXavierUniform);
  const auto params = model->parameters();
  EXPECT_EQ(test::max_abs_difference(params[0]->value, first.weight().value), 0.0);
  EXPECT_EQ(test::max_abs_difference(params[2]->value, second.weight().value), 0.0);
  EXPECT_EQ(gen.state().offset, manual_gen.state().offset);
}

TEST(MakeMlp, FirstLayerComputesNoInputGradient) {
  Generator gen(test::test_seed());
  auto model = nn::make_mlp({.inputs = 6, .hidden = {5}, .outputs = 3}, gen, Device::cpu(), DType::kF64);
  EXPECT_FALSE(model->input_requires_grad());
  model->forward(test::random_uniform({4, 6}, DType::kF64, gen));
  EXPECT_FALSE(model->backward(test::random_uniform({4, 3}, DType::kF64, gen)).defined());
  for (auto& [name, p] : model->named_parameters()) {
    EXPECT_TRUE(p->has_grad) << name;
    EXPECT_FALSE(test::all_zero(p->grad)) << name;
  }
}

// Three Gaussian blobs in 4-D, centred at 3 * e_k with standard deviation 0.5: linearly separable
// in practice (a point crosses to another class only beyond ~4 standard deviations).
struct Blobs {
  Tensor x, y;
};

Blobs make_blobs(std::int64_t per_class, Generator& gen) {
  constexpr std::int64_t kClasses = 3, kFeatures = 4;
  std::vector<double> x;
  std::vector<std::int32_t> y;
  for (std::int64_t n = 0; n < per_class * kClasses; ++n) {
    const auto label = static_cast<std::int32_t>(n % kClasses);
    for (std::int64_t f = 0; f < kFeatures; ++f) x.push_back((f == label ? 3.0 : 0.0) + 0.5 * gen.normal());
    y.push_back(label);
  }
  return {Tensor::from_vector(x, {per_class * kClasses, kFeatures}), Tensor::from_vector(y, {per_class * kClasses})};
}

double accuracy(const Tensor& logits, const Tensor& labels) {
  const auto z = logits.to_vector<double>();
  const auto y = labels.to_vector<std::int32_t>();
  const std::int64_t classes = logits.size(1);
  std::int64_t correct = 0;
  for (std::size_t n = 0; n < y.size(); ++n) {
    const auto row = z.begin() + static_cast<std::ptrdiff_t>(n) * classes;
    correct += std::max_element(row, row + classes) - row == y[n] ? 1 : 0;
  }
  return static_cast<double>(correct) / static_cast<double>(y.size());
}

TEST(MakeMlp, NoHiddenLayersIsASoftmaxRegressionThatTrains) {
  Generator gen(test::test_seed());
  auto model = nn::make_mlp({.inputs = 4, .hidden = {}, .outputs = 3}, gen, Device::cpu(), DType::kF64);
  ASSERT_EQ(model->size(), 1u);
  EXPECT_EQ((*model)[0].describe(), "Linear(in=4, out=3, bias=true)");
  EXPECT_EQ(parameter_names(*model), (std::vector<std::string>{"0.weight", "0.bias"}));

  // Start from zero weights: every class equally likely, so the first loss is exactly ln 3.
  for (nn::Parameter* p : model->parameters()) ops::fill(p->value, 0.0);
  const Blobs data = make_blobs(30, gen);
  nn::CrossEntropyLoss loss;
  optim::SGD sgd(model->parameters(), {.lr = 0.5});
  const double initial_loss = loss.forward(model->forward(data.x), data.y).item();
  double final_loss = initial_loss;
  for (int step = 0; step < 100; ++step) {
    sgd.zero_grad();
    final_loss = loss.forward(model->forward(data.x), data.y).item();
    model->backward(loss.backward());
    sgd.step();
  }
  model->eval();
  // 100 full-batch steps on separable blobs take the loss from ln 3 = 1.1 to well below 0.2.
  EXPECT_NEAR(initial_loss, std::log(3.0), 1e-12);
  EXPECT_LT(final_loss, 0.2);
  EXPECT_GE(accuracy(model->forward(data.x), data.y), 0.95);
}

TEST(MlpTrainFlops, MatchesAHandCount) {
  // 4 -> 3 -> 2, batch 5. A GEMM of [5, in] x [in, out] is 2*5*in*out FLOPs.
  // Layer 0: forward + weight gradient (no input gradient for the data): 2 * (2*5*4*3) = 240.
  // Layer 1: forward + weight gradient + input gradient: 3 * (2*5*3*2) = 180.
  EXPECT_DOUBLE_EQ(nn::mlp_train_flops({.inputs = 4, .hidden = {3}, .outputs = 2}, 5), 420.0);
  // Softmax regression 4 -> 2: 2 * (2*5*4*2) = 160.
  EXPECT_DOUBLE_EQ(nn::mlp_train_flops({.inputs = 4, .hidden = {}, .outputs = 2}, 5), 160.0);
}

TEST(Sequential, DescribeAndParameterCount) {
  nn::Sequential model;
  EXPECT_EQ(model.describe(), "Sequential(\n)");
  EXPECT_EQ(model.parameter_count(), 0);
  model.emplace<nn::Linear>(3, 2, false);
  model.emplace<nn::ReLU>();
  model.emplace<nn::Linear>(2, 7);
  model.emplace<nn::SiLU>();
  EXPECT_EQ(model.describe(),
            "Sequential(\n"
            "  (0): Linear(in=3, out=2, bias=false)\n"
            "  (1): ReLU()\n"
            "  (2): Linear(in=2, out=7, bias=true)\n"
            "  (3): SiLU()\n"
            ")");
  EXPECT_EQ(model.parameter_count(), 3 * 2 + 2 * 7 + 7);
  EXPECT_EQ(parameter_names(model), (std::vector<std::string>{"0.weight", "2.weight", "2.bias"}));
  EXPECT_THROW(model.add(nullptr), Error);
}

}  // namespace
}  // namespace sprintnet
