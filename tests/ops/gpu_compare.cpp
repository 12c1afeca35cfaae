#include "gpu_compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "support/test_util.h"

namespace sprintnet::test {
namespace {

void expect_written_and_meaningful(const Tensor& gpu_result, const Tensor& reference, std::string_view what) {
  EXPECT_TRUE(gpu_result.device().is_cuda()) << what;
  EXPECT_EQ(gpu_result.numel(), reference.numel()) << what;
  EXPECT_TRUE(all_finite(gpu_result)) << what << ": an element was not written (still NaN) or is not finite";
  EXPECT_FALSE(all_zero(reference)) << what << ": the reference is all zero, the comparison would prove nothing";
}

}  // namespace

Tensor oracle_copy(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  return is_floating(host.dtype()) ? host.to(DType::kF64) : host;
}

void expect_matches_oracle(const Tensor& gpu_result, const Tensor& reference, double tolerance, std::string_view what,
                           const Tensor* scale) {
  expect_written_and_meaningful(gpu_result, reference, what);
  const auto x = gpu_result.to_vector<double>(), y = reference.to_vector<double>();
  const auto s = scale != nullptr ? scale->to_vector<double>() : y;
  ASSERT_EQ(s.size(), y.size()) << what;
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
    diff += (x[i] - y[i]) * (x[i] - y[i]);
    norm += s[i] * s[i];
  }
  const double error = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-300);
  EXPECT_LE(error, tolerance) << what << ": relative error " << error << " above " << tolerance;
}

void expect_allclose(const Tensor& gpu_result, const Tensor& reference, double atol, double rtol,
                     std::string_view what) {
  expect_written_and_meaningful(gpu_result, reference, what);
  const auto x = gpu_result.to_vector<double>(), y = reference.to_vector<double>();
  std::size_t worst = 0;
  double worst_ratio = 0.0;  // |x - y| / (atol + rtol |y|): the element must stay <= 1
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
    const double ratio = std::abs(x[i] - y[i]) / (atol + rtol * std::abs(y[i]));
    if (ratio > worst_ratio) {  // NaN in the result is caught by the all_finite check above
      worst_ratio = ratio;
      worst = i;
    }
  }
  EXPECT_LE(worst_ratio, 1.0) << what << ": element " << worst << " is " << (worst < x.size() ? x[worst] : 0.0)
                              << ", the oracle says " << (worst < y.size() ? y[worst] : 0.0) << " (atol " << atol
                              << ", rtol " << rtol << ")";
}

void expect_bit_identical(const Tensor& a, const Tensor& b, std::string_view what) {
  const Tensor x = a.to(Device::cpu()), y = b.to(Device::cpu());
  ASSERT_EQ(x.nbytes(), y.nbytes()) << what;
  EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()), 0) << what << ": two runs differ (not deterministic)";
}

}  // namespace sprintnet::test
