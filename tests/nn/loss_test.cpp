// Losses: values against torch.nn's definitions, gradients against finite differences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/error_message.h"
#include "nn/gradient_check.h"
#include "sprintnet/nn/loss.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kBatch = 3, kClasses = 5;
// fp64 sums of a few logs/exps, in another order than the kernel: agreement to rounding.
constexpr double kFp64Tolerance = 1e-13;

// torch.nn.CrossEntropyLoss(label_smoothing=s), mean reduction:
// mean over rows of -sum_c target_c * log_softmax(x)_c, target = (1-s)*onehot(y) + s/C.
double reference_cross_entropy(const Tensor& logits, const Tensor& labels, double smoothing) {
  const auto x = logits.to_vector<double>();
  const auto y = labels.to_vector<std::int32_t>();
  const std::int64_t rows = logits.size(0), classes = logits.size(1);
  double total = 0.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    double exp_sum = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) exp_sum += std::exp(x[r * classes + c]);
    for (std::int64_t c = 0; c < classes; ++c) {
      const double target = (c == y[r] ? 1.0 - smoothing : 0.0) + smoothing / static_cast<double>(classes);
      total -= target * (x[r * classes + c] - std::log(exp_sum));
    }
  }
  return total / static_cast<double>(rows);
}

// torch.nn.MSELoss against one-hot targets: mean over B*C of (pred - onehot)^2.
double reference_mse(const Tensor& pred, const Tensor& labels) {
  const auto p = pred.to_vector<double>();
  const auto y = labels.to_vector<std::int32_t>();
  const std::int64_t rows = pred.size(0), classes = pred.size(1);
  double total = 0.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < classes; ++c) {
      const double d = p[r * classes + c] - (c == y[r] ? 1.0 : 0.0);
      total += d * d;
    }
  }
  return total / static_cast<double>(rows * classes);
}

// Loss value against its reference, then dloss/dinput against finite differences of the loss.
void check_loss(nn::Loss& loss, double (*reference)(const Tensor&, const Tensor&, double), double smoothing) {
  SCOPED_TRACE(loss.describe());
  Generator gen(test::test_seed());
  const Tensor input = test::random_uniform({kBatch, kClasses}, DType::kF64, gen, -2.0, 2.0);
  const Tensor labels = test::random_labels(kBatch, kClasses, gen);
  const Tensor value = loss.forward(input, labels);
  ASSERT_EQ(value.shape(), (Shape{1}));
  EXPECT_EQ(value.dtype(), DType::kF64);
  const double expected = reference(input, labels, smoothing);
  EXPECT_GT(expected, 0.0);
  EXPECT_NEAR(value.item(), expected, kFp64Tolerance * expected);

  const Tensor analytic = loss.backward().clone();
  const Tensor numerical = test::numerical_gradient(input, [&] { return loss.forward(input, labels).item(); });
  test::expect_gradient_close(analytic, numerical, "input");
}

double mse_reference(const Tensor& x, const Tensor& y, double /*unused*/) { return reference_mse(x, y); }

TEST(Loss, CrossEntropyValueAndGradient) {
  nn::CrossEntropyLoss loss;
  check_loss(loss, reference_cross_entropy, 0.0);
}

TEST(Loss, CrossEntropyWithLabelSmoothingValueAndGradient) {
  nn::CrossEntropyLoss loss(0.2);
  check_loss(loss, reference_cross_entropy, 0.2);
}

TEST(Loss, LabelSmoothingShiftsTheGradientByTheTargetChange) {
  // dloss/dlogits = (softmax - target) / B, so smoothing s moves it by s * (onehot - 1/C) / B:
  // never zero, whatever the logits (a smoothing argument that is accepted and ignored shows here).
  Generator gen(test::test_seed());
  const Tensor logits = test::random_uniform({kBatch, kClasses}, DType::kF64, gen, -2.0, 2.0);
  const Tensor labels = test::random_labels(kBatch, kClasses, gen);
  constexpr double kSmoothing = 0.2;
  nn::CrossEntropyLoss plain, smoothed(kSmoothing);
  plain.forward(logits, labels);
  smoothed.forward(logits, labels);
  const auto d_plain = plain.backward().to_vector<double>(), d_smooth = smoothed.backward().to_vector<double>();
  const auto y = labels.to_vector<std::int32_t>();
  for (std::int64_t r = 0; r < kBatch; ++r) {
    for (std::int64_t c = 0; c < kClasses; ++c) {
      const double onehot = c == y[r] ? 1.0 : 0.0;
      const double shift = kSmoothing * (onehot - 1.0 / kClasses) / kBatch;
      EXPECT_NEAR(d_smooth[r * kClasses + c] - d_plain[r * kClasses + c], shift, 1e-15) << r << ", " << c;
    }
  }
}

TEST(Loss, CrossEntropyIsStableForLargeLogits) {
  // log-sum-exp must subtract the maximum: exp(1000) overflows.
  const Tensor logits = Tensor::from_vector<double>({1000.0, 0.0, -1000.0}, {1, 3});
  const Tensor labels = Tensor::from_vector<std::int32_t>({1}, {1});
  nn::CrossEntropyLoss loss;
  EXPECT_NEAR(loss.forward(logits, labels).item(), 1000.0, 1e-9);
  EXPECT_TRUE(test::all_finite(loss.backward()));
}

TEST(Loss, MseValueAndGradient) {
  nn::MSELoss loss;
  check_loss(loss, mse_reference, 0.0);
}

TEST(Loss, BackwardBeforeForwardAndBadArgumentsThrow) {
  nn::CrossEntropyLoss loss;
  EXPECT_THAT(test::error_message([&] { loss.backward(); }), HasSubstr("before forward"));
  EXPECT_THAT(test::error_message([] { nn::CrossEntropyLoss bad(1.0); }), HasSubstr("label_smoothing"));
  EXPECT_THAT(test::error_message([] { nn::CrossEntropyLoss bad(-0.1); }), HasSubstr("label_smoothing"));
  const Tensor logits = Tensor::zeros({2, 3}, DType::kF64);
  EXPECT_THAT(test::error_message([&] { loss.forward(logits, Tensor::from_vector<std::int32_t>({0, 3}, {2})); }),
              HasSubstr("label 3"));
  EXPECT_THAT(test::error_message([&] { loss.forward(logits, Tensor::from_vector<std::int32_t>({0}, {1})); }),
              HasSubstr("labels"));
}

// The mean over an empty batch is NaN, as torch's; it was 0, a loss that looked trained.
TEST(Loss, AnEmptyBatchsMeanIsNaN) {
  const Tensor labels = Tensor::zeros({0}, DType::kI32);
  for (const char* type : {"cross_entropy", "mse"}) {
    auto loss = nn::make_loss(type, 0.0);
    EXPECT_TRUE(std::isnan(loss->forward(Tensor::zeros({0, 3}, DType::kF64), labels).item())) << type;
    EXPECT_EQ(loss->backward().shape(), (Shape{0, 3})) << type;
  }
}

TEST(Loss, MakeLossAndDescribe) {
  EXPECT_EQ(nn::make_loss("cross_entropy", 0.1)->describe(), "CrossEntropyLoss(label_smoothing=0.1)");
  EXPECT_EQ(nn::make_loss("mse", 0.0)->describe(), "MSELoss()");
  EXPECT_THAT(test::error_message([] { nn::make_loss("hinge", 0.0); }), HasSubstr("'hinge'"));
}

}  // namespace
}  // namespace sprintnet
