// Weight initialisation: PyTorch's default bounds, the xavier/kaiming variances,
// and reproducibility from a Generator seed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "support/error_message.h"
#include "sprintnet/nn/init.h"
#include "sprintnet/nn/linear.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

struct Moments {
  double mean = 0.0, variance = 0.0, max_abs = 0.0;
};

Moments moments(const Tensor& t) {
  const auto v = t.to_vector<double>();
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v) {
    m.variance += (x - m.mean) * (x - m.mean);
    m.max_abs = std::max(m.max_abs, std::abs(x));
  }
  m.variance /= static_cast<double>(v.size());
  return m;
}

// With n = 262144 samples the sample variance has a relative standard deviation of
// sqrt((kurtosis - 1) / n): 0.18% for a uniform, 0.28% for a normal distribution.
// 2% is 7 standard deviations or more, while a wrong fan (in vs out, or in+out) or a
// missing factor of 2 or 3 is off by 25% or more.
constexpr double kVarianceRelativeTolerance = 0.02;

// |sample mean| below 6 standard errors of the mean.
void expect_centred(const Moments& m, double variance, std::int64_t n) {
  EXPECT_LT(std::abs(m.mean), 6.0 * std::sqrt(variance / static_cast<double>(n)));
}

std::unique_ptr<nn::Linear> initialised(std::int64_t in, std::int64_t out, nn::Init init, std::uint64_t seed) {
  auto linear = std::make_unique<nn::Linear>(in, out, true, Device::cpu(), DType::kF64);
  Generator gen(seed);
  linear->reset_parameters(gen, init);
  return linear;
}

TEST(Init, PyTorchDefaultBoundsAndVariance) {
  constexpr std::int64_t kFanIn = 512;
  nn::Linear linear(kFanIn, 512, true, Device::cpu(), DType::kF64);
  Generator gen(test::test_seed());
  linear.reset_parameters(gen, nn::Init::kPyTorch);
  const double bound = 1.0 / std::sqrt(static_cast<double>(kFanIn));

  const Moments w = moments(linear.weight().value);
  EXPECT_LE(w.max_abs, bound);
  EXPECT_GT(w.max_abs, 0.999 * bound);  // the whole range is used, not a narrower one
  EXPECT_NEAR(w.variance, bound * bound / 3.0, kVarianceRelativeTolerance * bound * bound / 3.0);
  expect_centred(w, bound * bound / 3.0, 512 * kFanIn);

  // The bias uses the same bound (512 values: the largest lies above 0.95 * bound but for odds of 0.95^512).
  const Moments b = moments(linear.bias().value);
  EXPECT_LE(b.max_abs, bound);
  EXPECT_GT(b.max_abs, 0.95 * bound);
}

TEST(Init, PyTorchDefaultBoundUsesFanIn) {
  // fan_in 100, fan_out 7: the bound is 0.1; a bound from fan_out (0.38) would show within a few draws.
  Generator gen(test::test_seed());
  nn::Linear linear(100, 7, true, Device::cpu(), DType::kF64);
  linear.reset_parameters(gen);
  EXPECT_LE(moments(linear.weight().value).max_abs, 0.1);
  EXPECT_GT(moments(linear.weight().value).max_abs, 0.09);
  EXPECT_LE(moments(linear.bias().value).max_abs, 0.1);
  EXPECT_FALSE(test::all_zero(linear.bias().value));
}

struct VarianceCase {
  nn::Init init;
  double variance;   // of the weights, for fan_in = 256, fan_out = 1024
  double bound;      // 0: unbounded (normal)
};

TEST(Init, XavierAndKaimingVariances) {
  // A non-square layer, so fan_in, fan_out and fan_in + fan_out give different variances.
  constexpr double kFanIn = 256, kFanOut = 1024;
  const VarianceCase cases[] = {
      {nn::Init::kXavierUniform, 2.0 / (kFanIn + kFanOut), std::sqrt(6.0 / (kFanIn + kFanOut))},
      {nn::Init::kXavierNormal, 2.0 / (kFanIn + kFanOut), 0.0},
      {nn::Init::kKaimingUniform, 2.0 / kFanIn, std::sqrt(6.0 / kFanIn)},
      {nn::Init::kKaimingNormal, 2.0 / kFanIn, 0.0},
  };
  for (const VarianceCase& c : cases) {
    SCOPED_TRACE(nn::init_name(c.init));
    const auto linear = initialised(256, 1024, c.init, test::test_seed());
    const Moments w = moments(linear->weight().value);
    EXPECT_NEAR(w.variance, c.variance, kVarianceRelativeTolerance * c.variance);
    expect_centred(w, c.variance, 256 * 1024);
    if (c.bound > 0.0) {
      EXPECT_LE(w.max_abs, c.bound);
      EXPECT_GT(w.max_abs, 0.999 * c.bound);
    } else {
      EXPECT_GT(w.max_abs, 4.0 * std::sqrt(c.variance));  // a normal's tails, not a uniform's edge
    }
    EXPECT_TRUE(test::all_zero(linear->bias().value));  // these schemes leave the bias at 0
  }
}

TEST(Init, DeterministicForASeedAndDifferentForAnother) {
  const std::uint64_t seed = test::test_seed();
  for (nn::Init init : {nn::Init::kPyTorch, nn::Init::kXavierNormal, nn::Init::kKaimingUniform}) {
    SCOPED_TRACE(nn::init_name(init));
    auto a = initialised(20, 30, init, seed), b = initialised(20, 30, init, seed);
    auto c = initialised(20, 30, init, seed + 1);
    EXPECT_EQ(test::max_abs_difference(a->weight().value, b->weight().value), 0.0);
    EXPECT_EQ(test::max_abs_difference(a->bias().value, b->bias().value), 0.0);
    EXPECT_GT(test::max_abs_difference(a->weight().value, c->weight().value), 0.0);
  }
}

TEST(Init, Fp32ParametersDrawTheSameValuesRounded) {
  // The draw happens in double and is rounded once: an fp32 model is the fp64 one, rounded.
  const std::uint64_t seed = test::test_seed();
  nn::Linear l64(20, 30, true, Device::cpu(), DType::kF64), l32(20, 30, true, Device::cpu(), DType::kF32);
  Generator g64(seed), g32(seed);
  l64.reset_parameters(g64);
  l32.reset_parameters(g32);
  EXPECT_EQ(test::max_abs_difference(l32.weight().value, l64.weight().value.to(DType::kF32)), 0.0);
  EXPECT_EQ(test::max_abs_difference(l32.bias().value, l64.bias().value.to(DType::kF32)), 0.0);
}

TEST(Init, NamesRoundTripAndUnknownNamesThrow) {
  for (nn::Init init : {nn::Init::kPyTorch, nn::Init::kXavierUniform, nn::Init::kXavierNormal,
                        nn::Init::kKaimingUniform, nn::Init::kKaimingNormal}) {
    EXPECT_EQ(nn::parse_init(nn::init_name(init)), init);
  }
  EXPECT_THAT(test::error_message([] { nn::parse_init("orthogonal"); }), ::testing::HasSubstr("'orthogonal'"));
}

// As torch's uniform_ and normal_: reversed bounds and a negative std are errors, not silent draws.
TEST(Init, FillsRefuseReversedBoundsAndANegativeStd) {
  Generator gen(1);
  const Tensor t = Tensor::zeros({4}, DType::kF64);
  EXPECT_THAT(test::error_message([&] { nn::fill_uniform(t, gen, 1.0, -1.0); }), ::testing::HasSubstr("[1, -1]"));
  EXPECT_THAT(test::error_message([&] { nn::fill_normal(t, gen, 0.0, -1.0); }), ::testing::HasSubstr("std -1"));
  nn::fill_uniform(t, gen, 0.5, 0.5);
  EXPECT_EQ(t.to_vector<double>(), std::vector<double>(4, 0.5));
}

}  // namespace
}  // namespace sprintnet
