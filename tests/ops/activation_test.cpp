// CPU activations: forward against the textbook formulas in double, backward
// against a central finite difference of the forward op itself (fp64).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "ops_test_util.h"
#include "sprintnet/ops/ops.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

inline constexpr Activation kAllActivations[] = {Activation::kIdentity, Activation::kReLU,    Activation::kGELU,
                                                 Activation::kTanh,     Activation::kSigmoid, Activation::kSiLU};

// Written independently of ops/cpu/activation_math.h, from the definitions.
double textbook(Activation act, double x) {
  switch (act) {
    case Activation::kIdentity: return x;
    case Activation::kReLU: return std::max(x, 0.0);
    case Activation::kGELU: return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
    case Activation::kTanh: return std::tanh(x);
    case Activation::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::kSiLU: return x / (1.0 + std::exp(-x));
  }
  return 0.0;
}

class ActivationTest : public testing::TestWithParam<Activation> {};

// Inputs in [-4, 4] with |x| >= 1e-3, so a finite difference never straddles ReLU's kink.
Tensor activation_input(DType dtype, Generator& gen) {
  return test::random_away_from_zero({33, 17}, dtype, gen, -4.0, 4.0, 1e-3);
}

// fp64: the library and the textbook formula may differ by a few roundings (1e-14). fp32: erff/expf/tanhf are
// within 2 ulp, plus a rounding or two of the arithmetic around them: 1e-6.
TEST_P(ActivationTest, ForwardMatchesTextbookFormula) {
  const Activation act = GetParam();
  Generator gen(test::test_seed());
  for (DType dtype : {DType::kF64, DType::kF32}) {
    const Tensor x = activation_input(dtype, gen);
    const Tensor y = test::poisoned(x.shape(), dtype);
    ops::activation_forward(act, x, y);
    std::vector<double> expected;
    for (double v : test::values(x)) expected.push_back(textbook(act, v));
    EXPECT_LE(test::relative_error(test::values(y), expected), dtype == DType::kF32 ? 1e-6 : 1e-14)
        << dtype_name(dtype);
  }
}

TEST_P(ActivationTest, ForwardInPlaceEqualsOutOfPlace) {
  const Activation act = GetParam();
  Generator gen(test::test_seed());
  const Tensor x = activation_input(DType::kF32, gen);
  const Tensor y = test::poisoned(x.shape(), DType::kF32);
  ops::activation_forward(act, x, y);
  ops::activation_forward(act, x, x);
  EXPECT_EQ(test::values(x), test::values(y));
}

// dx = f'(x) dy against ((f(x+h) - f(x-h)) / 2h) dy in fp64 with h = 1e-6: the truncation error is
// ~h^2 |f'''| / 6 ~ 1e-13 and the rounding error ~1e-16 |f| / h ~ 1e-9, so 1e-7 leaves a wide margin
// while any wrong derivative formula is off by far more.
TEST_P(ActivationTest, BackwardMatchesFiniteDifference) {
  const Activation act = GetParam();
  Generator gen(test::test_seed());
  const double h = 1e-6;
  const Tensor x = activation_input(DType::kF64, gen);
  const Tensor dy = test::random_uniform(x.shape(), DType::kF64, gen);
  const Tensor y = test::poisoned(x.shape(), DType::kF64);
  ops::activation_forward(act, x, y);
  const Tensor dx = test::poisoned(x.shape(), DType::kF64);
  ops::activation_backward(act, x, y, dy, dx);

  auto xs = test::values(x);
  std::vector<double> plus = xs, minus = xs;
  for (double& v : plus) v += h;
  for (double& v : minus) v -= h;
  const Tensor x_plus = Tensor::from_vector(plus, x.shape()), x_minus = Tensor::from_vector(minus, x.shape());
  const Tensor y_plus = test::poisoned(x.shape(), DType::kF64), y_minus = test::poisoned(x.shape(), DType::kF64);
  ops::activation_forward(act, x_plus, y_plus);
  ops::activation_forward(act, x_minus, y_minus);
  const auto yp = test::values(y_plus), ym = test::values(y_minus), g = test::values(dy);
  std::vector<double> expected(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) expected[i] = (yp[i] - ym[i]) / (2.0 * h) * g[i];
  ASSERT_FALSE(test::all_zero(expected));
  EXPECT_LE(test::relative_error(test::values(dx), expected), 1e-7);
}

// The fp32 instantiation against the fp64 one on the same values (x, y, dy rounded to fp32 first):
// the derivative formulas are a few fp32 operations, 1e-6.
TEST_P(ActivationTest, BackwardFp32MatchesFp64) {
  const Activation act = GetParam();
  Generator gen(test::test_seed());
  const Tensor x = activation_input(DType::kF32, gen);
  const Tensor dy = test::random_uniform(x.shape(), DType::kF32, gen);
  const Tensor y = test::poisoned(x.shape(), DType::kF32);
  ops::activation_forward(act, x, y);
  const Tensor dx = test::poisoned(x.shape(), DType::kF32);
  ops::activation_backward(act, x, y, dy, dx);
  const Tensor dx64 = test::poisoned(x.shape(), DType::kF64);
  ops::activation_backward(act, x.to(DType::kF64), y.to(DType::kF64), dy.to(DType::kF64), dx64);
  EXPECT_LE(test::relative_error(test::values(dx), test::values(dx64)), 1e-6);
}

// ReLU's gradient is a select (PyTorch's threshold_backward): where x <= 0 it is 0 even when the incoming
// gradient is infinite or NaN, as an fp16 overflow makes it; where x > 0 it passes dy on, NaN included.
// 0 * inf would be NaN and fail the masked entries.
TEST(Activation, ReluGradientIsASelectEvenForNonFiniteGradients) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const DType dtype : {DType::kF32, DType::kF64}) {
    const Tensor x = Tensor::from_vector(std::vector<double>{-2.0, 0.0, -0.5, 1.5, 3.0, 0.25}, {6}).to(dtype);
    const Tensor dy = Tensor::from_vector(std::vector<double>{inf, nan, -inf, 4.0, nan, -inf}, {6}).to(dtype);
    const Tensor y = test::poisoned({6}, dtype), dx = test::poisoned({6}, dtype);
    ops::activation_forward(Activation::kReLU, x, y);
    ops::activation_backward(Activation::kReLU, x, y, dy, dx);
    const auto got = test::values(dx);
    EXPECT_EQ((std::vector<double>{got[0], got[1], got[2], got[3]}), (std::vector<double>{0.0, 0.0, 0.0, 4.0}))
        << dtype_name(dtype);
    EXPECT_TRUE(std::isnan(got[4])) << dtype_name(dtype);
    EXPECT_EQ(got[5], -inf) << dtype_name(dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(All, ActivationTest, testing::ValuesIn(kAllActivations),
                         [](const testing::TestParamInfo<Activation>& param_info) {
                           return std::string(ops::activation_name(param_info.param));
                         });

TEST(Activation, NamesRoundTrip) {
  for (Activation act : kAllActivations) EXPECT_EQ(ops::parse_activation(ops::activation_name(act)), act);
  EXPECT_TRUE(test::throws_error_containing([] { ops::parse_activation("swish"); }, "unknown activation 'swish'"));
}

}  // namespace
}  // namespace sprintnet
