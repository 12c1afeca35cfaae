// CPU axpy, add_bias and sum_rows against loops in double. fp64 results must
// agree to rounding (1e-14); fp32 ones within a stated number of roundings.
#include <gtest/gtest.h>

#include <cmath>

#include "ops_test_util.h"
#include "sprintnet/ops/ops.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

// Norm-wise tolerance of a result that is a few roundings away from the exact value:
// fp32 rounds to 2^-24 ~ 6e-8 relative, so a few roundings stay below 1e-6; fp64 below 1e-14.
double few_roundings(DType dtype) { return dtype == DType::kF32 ? 1e-6 : 1e-14; }

class ElementwiseTest : public testing::TestWithParam<DType> {};

TEST_P(ElementwiseTest, Axpy) {
  const DType dtype = GetParam();
  Generator gen(test::test_seed());
  const Tensor y = test::random_uniform({37, 11}, dtype, gen);
  const Tensor x = test::random_uniform({37, 11}, dtype, gen);
  auto expected = test::values(y);
  const auto xs = test::values(x);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += -0.75 * xs[i];
  ops::axpy(y, x, -0.75);
  EXPECT_LE(test::relative_error(test::values(y), expected), few_roundings(dtype));
}

TEST_P(ElementwiseTest, AddBias) {
  const DType dtype = GetParam();
  Generator gen(test::test_seed());
  const Tensor y = test::random_uniform({23, 19}, dtype, gen);
  const Tensor bias = test::random_uniform({19}, dtype, gen);
  auto expected = test::values(y);
  const auto b = test::values(bias);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += b[i % 19];
  ops::add_bias(y, bias);
  EXPECT_LE(test::relative_error(test::values(y), expected), few_roundings(dtype));
}

// 300 rows summed in fp32: the worst case is 300 roundings (2e-5), the norm-wise typical error
// ~sqrt(300) * 6e-8 ~ 1e-6; 1e-5 for fp32. fp64: 1e-13.
TEST_P(ElementwiseTest, SumRowsWithBeta) {
  const DType dtype = GetParam();
  Generator gen(test::test_seed());
  const std::int64_t rows = 300, cols = 29;
  const Tensor x = test::random_uniform({rows, cols}, dtype, gen);
  const Tensor out = test::random_uniform({cols}, dtype, gen);
  const auto xs = test::values(x);
  auto expected = test::values(out);
  for (std::int64_t c = 0; c < cols; ++c) {
    double sum = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) sum += xs[r * cols + c];
    expected[c] = sum + 0.5 * expected[c];
  }
  ops::sum_rows(x, out, 0.5);
  EXPECT_LE(test::relative_error(test::values(out), expected), dtype == DType::kF32 ? 1e-5 : 1e-13);
}

TEST_P(ElementwiseTest, SumRowsBetaZeroIgnoresNaN) {
  const DType dtype = GetParam();
  Generator gen(test::test_seed());
  const Tensor x = test::random_integers({40, 7}, dtype, gen, -5, 5);  // integer sums: exact
  const Tensor out = test::poisoned({7}, dtype);
  const auto xs = test::values(x);
  std::vector<double> expected(7, 0.0);
  for (std::size_t i = 0; i < xs.size(); ++i) expected[i % 7] += xs[i];
  ops::sum_rows(x, out, 0.0);
  EXPECT_EQ(test::values(out), expected);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ElementwiseTest, testing::Values(DType::kF32, DType::kF64),
                         [](const testing::TestParamInfo<DType>& param_info) { return std::string(dtype_name(param_info.param)); });

TEST(Fill, EveryDtype) {
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kU8}) {
    const Tensor t = Tensor::empty({5}, dtype);
    ops::fill(t, 3.0);
    EXPECT_EQ(test::values(t), std::vector<double>(5, 3.0)) << dtype_name(dtype);
  }
}

// An integer tensor cannot hold NaN, 300 as uint8 or 3e9 as int32: errors, where a cast's undefined behaviour
// used to write whatever the compiler made of it. Floats keep a cast's meaning (1e300 as fp32 is inf).
TEST(Fill, RefusesValuesAnIntegerDtypeCannotHold) {
  const Tensor u8 = Tensor::zeros({3}, DType::kU8), i32 = Tensor::zeros({3}, DType::kI32);
  EXPECT_TRUE(test::throws_error_containing([&] { ops::fill(u8, 300.0); }, "fill: 300 is outside the range of uint8 ([0, 255])"));
  EXPECT_THROW(ops::fill(u8, -1.0), Error);
  EXPECT_THROW(ops::fill(i32, std::nan("")), Error);
  EXPECT_THROW(ops::fill(i32, 3e9), Error);
  EXPECT_THROW(Tensor::full({2}, 256.0, DType::kU8), Error);
  EXPECT_EQ(test::values(u8), std::vector<double>(3, 0.0));  // untouched by the refused fills
  ops::fill(u8, 255.0);
  ops::fill(i32, -2147483648.0);
  EXPECT_EQ(test::values(u8), std::vector<double>(3, 255.0));
  EXPECT_EQ(test::values(i32), std::vector<double>(3, -2147483648.0));
  const Tensor f32 = Tensor::zeros({1}, DType::kF32);
  ops::fill(f32, 1e300);
  EXPECT_TRUE(std::isinf(test::values(f32)[0]));
}

}  // namespace
}  // namespace sprintnet
