// CPU batch gathers: rows of uint8 images converted to floats, and labels.
#include <gtest/gtest.h>

#include "ops_test_util.h"
#include "sprintnet/ops/ops.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

Tensor random_bytes(std::int64_t rows, std::int64_t cols, Generator& gen) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(rows * cols));
  for (auto& b : v) b = static_cast<std::uint8_t>(gen.below(256));
  return Tensor::from_vector(v, {rows, cols});
}

Tensor random_indices(std::int64_t count, std::int64_t bound, Generator& gen) {
  return test::random_labels(count, bound, gen);  // uniform in [0, bound), repeats included
}

// fp64: one multiply-add (1e-15). fp32: scale and shift are rounded to fp32, then two roundings: 1e-6.
TEST(GatherRowsU8, ConvertsAndScalesSelectedRows) {
  Generator gen(test::test_seed());
  const double scale = 1.0 / 255.0, shift = -0.1307;
  for (std::int64_t cols : {13, 16}) {  // odd and vector-friendly widths
    const Tensor src = random_bytes(50, cols, gen);
    const Tensor indices = random_indices(21, 50, gen);
    const auto s = src.to_vector<std::uint8_t>();
    const auto idx = indices.to_vector<std::int32_t>();
    std::vector<double> expected;
    for (std::int32_t i : idx) {
      for (std::int64_t c = 0; c < cols; ++c) expected.push_back(s[i * cols + c] * scale + shift);
    }
    for (DType dtype : {DType::kF64, DType::kF32}) {
      const Tensor dst = test::poisoned({21, cols}, dtype);
      ops::gather_rows_u8(src, indices, dst, scale, shift);
      EXPECT_LE(test::relative_error(test::values(dst), expected), dtype == DType::kF32 ? 1e-6 : 1e-15)
          << dtype_name(dtype) << " cols=" << cols;
    }
  }
}

TEST(GatherRowsU8, IndexOutOfRangeIsAnError) {
  const Tensor src = Tensor::zeros({4, 3}, DType::kU8);
  const Tensor dst = Tensor::zeros({2, 3}, DType::kF32);
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::gather_rows_u8(src, Tensor::from_vector<std::int32_t>({1, 4}, {2}), dst, 1.0, 0.0); },
      "index 4 outside [0, 4)"));
}

TEST(GatherLabels, SelectsByIndex) {
  Generator gen(test::test_seed());
  const Tensor labels = test::random_labels(30, 10, gen);
  const Tensor indices = random_indices(17, 30, gen);
  const Tensor dst = test::poisoned({17}, DType::kI32);
  ops::gather_labels(labels, indices, dst);
  const auto l = labels.to_vector<std::int32_t>();
  std::vector<std::int32_t> expected;
  for (std::int32_t i : indices.to_vector<std::int32_t>()) expected.push_back(l[static_cast<std::size_t>(i)]);
  EXPECT_EQ(dst.to_vector<std::int32_t>(), expected);
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::gather_labels(labels, Tensor::from_vector<std::int32_t>({-3}, {1}), Tensor::zeros({1}, DType::kI32)); },
      "index -3 outside [0, 30)"));
  // A matrix of labels would be read as one flat vector: refused, naming the shapes.
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::gather_labels(labels.view({3, 10}), indices, test::poisoned({17}, DType::kI32)); },
      "labels and indices must be vectors, have shapes [3, 10] and [17]"));
}

}  // namespace
}  // namespace sprintnet
