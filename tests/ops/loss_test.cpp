// CPU cross-entropy, MSE and the accuracy counter. Losses against a direct
// softmax formula in double and their gradients also against central finite
// differences of the loss op itself (fp64).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops_test_util.h"
#include "sprintnet/ops/ops.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

struct LossAndGradient {
  double loss = 0.0;  // sum over rows
  std::vector<double> grad;
};

// -sum_c target_c log(softmax_c), target = (1-s) onehot + s/C; grad = softmax - target. Written from the
// definition: softmax = exp(x) / sum exp(x) directly (inputs are small, no overflow).
LossAndGradient direct_cross_entropy(const std::vector<double>& x, const std::vector<std::int32_t>& y,
                                     std::int64_t classes, double s) {
  LossAndGradient out{0.0, std::vector<double>(x.size(), 0.0)};
  for (std::size_t r = 0; r < y.size(); ++r) {
    double z = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) z += std::exp(x[r * classes + c]);
    for (std::int64_t c = 0; c < classes; ++c) {
      const double softmax = std::exp(x[r * classes + c]) / z;
      const double target = (c == y[r] ? 1.0 - s : 0.0) + s / static_cast<double>(classes);
      out.loss -= target * std::log(softmax);
      out.grad[r * classes + c] = softmax - target;
    }
  }
  return out;
}

// The loss op's value (loss_scale 1, starting from 0) for logits x, in fp64.
double cross_entropy_value(const std::vector<double>& x, const Tensor& labels, Shape shape, double s) {
  const Tensor loss = Tensor::zeros({1}, DType::kF64);
  ops::cross_entropy(Tensor::from_vector(x, std::move(shape)), labels, s, loss, 1.0, nullptr, 1.0);
  return loss.item();
}

class CrossEntropyTest : public testing::TestWithParam<double> {};  // label smoothing

// fp64: both sides are a handful of exp/log away from the exact value (1e-12). fp32 logits: the CPU
// computes in double and rounds each result to fp32 once (1e-6).
TEST_P(CrossEntropyTest, MatchesDirectSoftmaxFormula) {
  const double smoothing = GetParam();
  Generator gen(test::test_seed());
  const std::int64_t rows = 9, classes = 7;
  for (DType dtype : {DType::kF64, DType::kF32}) {
    const Tensor logits = test::random_uniform({rows, classes}, dtype, gen, -3.0, 3.0);
    const Tensor labels = test::random_labels(rows, classes, gen);
    const auto expected = direct_cross_entropy(test::values(logits), labels.to_vector<std::int32_t>(), classes,
                                               smoothing);
    const Tensor loss = Tensor::full({1}, 0.25, dtype);  // the op adds to what is there
    const Tensor dlogits = test::poisoned(logits.shape(), dtype);
    ops::cross_entropy(logits, labels, smoothing, loss, 1.0 / rows, &dlogits, 0.5);
    const double tolerance = dtype == DType::kF32 ? 1e-6 : 1e-12;
    EXPECT_NEAR(loss.item(), 0.25 + expected.loss / rows, tolerance * expected.loss / rows) << dtype_name(dtype);
    std::vector<double> grad = expected.grad;
    for (double& g : grad) g *= 0.5;
    EXPECT_LE(test::relative_error(test::values(dlogits), grad), tolerance) << dtype_name(dtype);

    // Without dlogits only the loss is computed.
    const Tensor loss_only = Tensor::zeros({1}, dtype);
    ops::cross_entropy(logits, labels, smoothing, loss_only, 1.0, nullptr, 1.0);
    EXPECT_NEAR(loss_only.item(), expected.loss, tolerance * expected.loss) << dtype_name(dtype);
  }
}

// Gradient against ((L(x + h e_i) - L(x - h e_i)) / 2h) for every logit, fp64, h = 1e-6: truncation
// ~h^2 ~ 1e-12, rounding ~1e-16 * |L| / h ~ 1e-9; 1e-7 norm-wise leaves a wide margin.
TEST_P(CrossEntropyTest, GradientMatchesFiniteDifference) {
  const double smoothing = GetParam();
  Generator gen(test::test_seed());
  const std::int64_t rows = 4, classes = 5;
  const Tensor logits = test::random_uniform({rows, classes}, DType::kF64, gen, -3.0, 3.0);
  const Tensor labels = test::random_labels(rows, classes, gen);
  const Tensor loss = Tensor::zeros({1}, DType::kF64);
  const Tensor dlogits = test::poisoned(logits.shape(), DType::kF64);
  ops::cross_entropy(logits, labels, smoothing, loss, 1.0, &dlogits, 1.0);

  const double h = 1e-6;
  const auto x = test::values(logits);
  std::vector<double> numeric(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    auto plus = x, minus = x;
    plus[i] += h;
    minus[i] -= h;
    numeric[i] = (cross_entropy_value(plus, labels, logits.shape(), smoothing) -
                  cross_entropy_value(minus, labels, logits.shape(), smoothing)) /
                 (2.0 * h);
  }
  ASSERT_FALSE(test::all_zero(numeric));
  EXPECT_LE(test::relative_error(test::values(dlogits), numeric), 1e-7);
}

INSTANTIATE_TEST_SUITE_P(Smoothing, CrossEntropyTest, testing::Values(0.0, 0.1),
                         [](const testing::TestParamInfo<double>& param_info) {
                           return param_info.param == 0.0 ? std::string("none") : std::string("s0_1");
                         });

// Logits far from 0, as a diverged model gives: the loss is a sum of gaps to the row's maximum, so magnitude does not
// cancel it. Each row's exact value (10 classes): all logits equal (1e9, or 3e38 near FLT_MAX): log(10), gradient
// 1/10 - target; logits 1e9 + 128 c with the label at the maximum (c = 9): s/10 * 128 * 45 plus log(1 + e^-128 + ...)
// (~1e-56), gradient onehot - target. Summing lse - x_label gave 0 for the first two (lse rounds to the maximum).
// Tolerance 1e-6 of the loss (absolute where it is 0): one fp32 rounding of each gradient, the rest in double.
TEST(CrossEntropy, LogitsOfAnyMagnitudeKeepTheirLoss) {
  struct Row {
    std::vector<float> logits;
    std::int32_t label;
  };
  std::vector<float> ramp;
  for (int c = 0; c < 10; ++c) ramp.push_back(1e9f + 128.0f * static_cast<float>(c));
  const std::vector<Row> rows = {{std::vector<float>(10, 1e9f), 3}, {std::vector<float>(10, 3e38f), 0}, {ramp, 9}};
  for (const double smoothing : {0.0, 0.1}) {
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const bool equal = r < 2;
      const double expected_loss = equal ? std::log(10.0) : smoothing / 10.0 * 128.0 * 45.0;
      const Tensor logits = Tensor::from_vector(rows[r].logits, {1, 10});
      const Tensor labels = Tensor::from_vector<std::int32_t>({rows[r].label}, {1});
      const Tensor loss = Tensor::zeros({1}, DType::kF64);
      const Tensor dlogits = test::poisoned(logits.shape(), DType::kF32);
      ops::cross_entropy(logits, labels, smoothing, loss, 1.0, &dlogits, 1.0);
      const std::string what = fmt::format("row {} smoothing {}", r, smoothing);
      EXPECT_NEAR(loss.item(), expected_loss, 1e-6 * std::max(1.0, expected_loss)) << what;
      const std::vector<double> grad = test::values(dlogits);
      for (std::int32_t c = 0; c < 10; ++c) {
        const double target = (c == rows[r].label ? 1.0 - smoothing : 0.0) + smoothing / 10.0;
        const double softmax = equal ? 0.1 : (c == rows[r].label ? 1.0 : 0.0);
        EXPECT_NEAR(grad[static_cast<std::size_t>(c)], softmax - target, 1e-6) << what << " class " << c;
      }
    }
  }
}

// A -inf logit (a masked class) is a probability of 0: without smoothing PyTorch's loss of [0, -inf] with label 0 is 0
// and its gradient 0; the CPU added 0 x (the inf gap to the maximum), NaN. With smoothing the -inf class has a target
// share, so the loss is inf, as PyTorch's. The GPU row losses skip the term the same way (row_softmax.cuh).
TEST(CrossEntropy, AMinusInfinityLogitWithoutSmoothingKeepsAFiniteLoss) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor logits = Tensor::from_vector<float>({0.0f, -inf, 0.0f, 0.0f}, {2, 2});
  const Tensor labels = Tensor::from_vector<std::int32_t>({0, 1}, {2});
  const Tensor loss = Tensor::zeros({1}, DType::kF64);
  const Tensor dlogits = test::poisoned(logits.shape(), DType::kF32);
  ops::cross_entropy(logits, labels, 0.0, loss, 1.0, &dlogits, 1.0);
  EXPECT_NEAR(loss.item(), std::log(2.0), 1e-12);  // row 0: 0; row 1: log 2
  EXPECT_EQ(test::values(dlogits), (std::vector<double>{0.0, 0.0, 0.5, -0.5}));
  const Tensor smoothed = Tensor::zeros({1}, DType::kF64);
  ops::cross_entropy(logits, labels, 0.1, smoothed, 1.0, nullptr, 1.0);
  EXPECT_EQ(smoothed.item(), inf);
}

TEST(CrossEntropy, LabelOutOfRangeIsAnError) {
  const Tensor logits = Tensor::zeros({3, 4}, DType::kF32);
  const Tensor labels = Tensor::from_vector<std::int32_t>({0, 4, 1}, {3});
  const Tensor loss = Tensor::zeros({1}, DType::kF32);
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::cross_entropy(logits, labels, 0.0, loss, 1.0, nullptr, 1.0); }, "label 4 at row 1"));
}

// fp64: 1e-13 (sums of squares of a few dozen terms). fp32: the CPU sums in double, one final rounding: 1e-6.
TEST(Mse, LossAndGradientMatchDefinition) {
  Generator gen(test::test_seed());
  const std::int64_t rows = 11, classes = 6;
  for (DType dtype : {DType::kF64, DType::kF32}) {
    const Tensor pred = test::random_uniform({rows, classes}, dtype, gen);
    const Tensor labels = test::random_labels(rows, classes, gen);
    const auto p = test::values(pred);
    const auto y = labels.to_vector<std::int32_t>();
    double expected_loss = 0.0;
    std::vector<double> expected_grad(p.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < classes; ++c) {
        const double diff = p[r * classes + c] - (c == y[r] ? 1.0 : 0.0);
        expected_loss += diff * diff;
        expected_grad[r * classes + c] = 0.25 * 2.0 * diff;
      }
    }
    const Tensor loss = Tensor::full({1}, 1.0, dtype);
    const Tensor dpred = test::poisoned(pred.shape(), dtype);
    ops::mse_one_hot(pred, labels, loss, 0.5, &dpred, 0.25);
    const double tolerance = dtype == DType::kF32 ? 1e-6 : 1e-13;
    EXPECT_NEAR(loss.item(), 1.0 + 0.5 * expected_loss, tolerance * (1.0 + expected_loss)) << dtype_name(dtype);
    EXPECT_LE(test::relative_error(test::values(dpred), expected_grad), tolerance) << dtype_name(dtype);
  }
  const Tensor labels = Tensor::from_vector<std::int32_t>({-1}, {1});
  const Tensor loss = Tensor::zeros({1}, DType::kF32);
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::mse_one_hot(Tensor::zeros({1, 3}, DType::kF32), labels, loss, 1.0, nullptr, 1.0); },
      "label -1 at row 0"));
}

TEST(CountCorrect, FirstMaximumWinsTies) {
  // Row 0: max 3 at classes 1 and 2 -> argmax 1. Row 1: all equal -> argmax 0. Row 2: unique max at 2.
  const Tensor logits = Tensor::from_vector<float>({1, 3, 3, 5, 5, 5, -1, -2, 0}, {3, 3});
  const Tensor correct = Tensor::full({1}, 10, DType::kI32);  // the op adds to what is there
  ops::count_correct(logits, Tensor::from_vector<std::int32_t>({1, 0, 2}, {3}), correct);
  EXPECT_EQ(correct.item(), 13);
  ops::count_correct(logits, Tensor::from_vector<std::int32_t>({2, 1, 2}, {3}), correct);
  EXPECT_EQ(correct.item(), 14);
}

// As `(logits.argmax(1) == y).sum()`: a label no class can equal is a miss, not an error or a hit.
TEST(CountCorrect, ALabelOutsideTheClassesIsAMiss) {
  const Tensor logits = Tensor::from_vector<float>({0, 1, 1, 0, 1, 0}, {3, 2});  // argmax 1, 0, 0
  const Tensor correct = Tensor::zeros({1}, DType::kI32);
  ops::count_correct(logits, Tensor::from_vector<std::int32_t>({-1, 2, 0}, {3}), correct);
  EXPECT_EQ(correct.item(), 1);
}

TEST(CountCorrect, MatchesNaiveArgmaxOnRandomTies) {
  Generator gen(test::test_seed());
  const std::int64_t rows = 200, classes = 5;
  const Tensor logits = test::random_integers({rows, classes}, DType::kF64, gen, 0, 2);  // many ties
  const Tensor labels = test::random_labels(rows, classes, gen);
  const auto x = test::values(logits);
  const auto y = labels.to_vector<std::int32_t>();
  int expected = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < classes; ++c) {
      if (x[r * classes + c] > x[r * classes + best]) best = c;
    }
    expected += best == y[r] ? 1 : 0;
  }
  ASSERT_GT(expected, 0);
  const Tensor correct = Tensor::zeros({1}, DType::kI32);
  ops::count_correct(logits, labels, correct);
  EXPECT_EQ(correct.item(), expected);
}

}  // namespace
}  // namespace sprintnet
