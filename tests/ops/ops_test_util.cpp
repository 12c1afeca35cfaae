#include "ops_test_util.h"

#include <cmath>
#include <limits>
#include <string>

namespace sprintnet::test {

Tensor random_integers(const Shape& shape, DType dtype, Generator& gen, int low, int high) {
  std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
  const auto span = static_cast<std::uint64_t>(high - low + 1);
  for (double& x : v) x = static_cast<double>(low + static_cast<int>(gen.below(span)));
  return Tensor::from_vector(v, shape).to(dtype);
}

Tensor random_nonzero_integers(const Shape& shape, DType dtype, Generator& gen, int max_magnitude) {
  std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
  for (double& x : v) {
    const double magnitude = 1.0 + static_cast<double>(gen.below(static_cast<std::uint64_t>(max_magnitude)));
    x = gen.below(2) == 0 ? magnitude : -magnitude;
  }
  return Tensor::from_vector(v, shape).to(dtype);
}

Tensor random_away_from_zero(const Shape& shape, DType dtype, Generator& gen, double low, double high,
                             double min_magnitude) {
  std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
  for (double& x : v) {
    do {
      x = gen.uniform(low, high);
    } while (std::abs(x) < min_magnitude);
  }
  return Tensor::from_vector(v, shape).to(dtype);
}

double relative_error(const std::vector<double>& actual, const std::vector<double>& expected) {
  if (actual.size() != expected.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, ref = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (!std::isfinite(actual[i])) return std::numeric_limits<double>::infinity();
    diff += (actual[i] - expected[i]) * (actual[i] - expected[i]);
    ref += expected[i] * expected[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(ref), 1e-300);
}

bool all_zero(const std::vector<double>& v) {
  for (double x : v) {
    if (x != 0.0) return false;
  }
  return true;
}

testing::AssertionResult throws_error_containing(const std::function<void()>& fn, std::string_view substring) {
  try {
    fn();
  } catch (const Error& e) {
    if (std::string_view(e.what()).find(substring) != std::string_view::npos) return testing::AssertionSuccess();
    return testing::AssertionFailure() << "message \"" << e.what() << "\" does not contain \"" << substring << "\"";
  }
  return testing::AssertionFailure() << "no sprintnet::Error thrown (expected one containing \"" << substring << "\")";
}

}  // namespace sprintnet::test
