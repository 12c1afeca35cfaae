#include "parity/reference_compare.h"

#include <cmath>
#include <limits>

namespace sprintnet::parity {

std::string ReferenceComparison::describe() const {
  if (!shape_problem.empty()) return fmt::format("{}: {}", name, shape_problem);
  return fmt::format("{}: relative error {:.3g} (max |diff| {:.3g} over max |reference| {:.3g}); worst at flat index "
                     "{}: sprintnet {:.17g}, PyTorch {:.17g}",
                     name, relative_error, max_abs_error, expected_scale, worst_index, actual_at_worst,
                     expected_at_worst);
}

ReferenceComparison compare_to_reference(std::string name, const Tensor& actual, const Tensor& expected) {
  ReferenceComparison out;
  out.name = std::move(name);
  if (actual.shape() != expected.shape()) {
    out.shape_problem = fmt::format("shape {} differs from the reference's {}", shape_str(actual.shape()),
                                    shape_str(expected.shape()));
    out.relative_error = std::numeric_limits<double>::infinity();
    return out;
  }
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (std::size_t i = 0; i < e.size(); ++i) {
    out.expected_scale = std::max(out.expected_scale, std::abs(e[i]));
    // A NaN on either side counts as an infinite difference.
    double diff = a[i] == e[i] ? 0.0 : std::abs(a[i] - e[i]);
    if (std::isnan(diff)) diff = std::numeric_limits<double>::infinity();
    if (out.worst_index < 0 || diff > out.max_abs_error) {
      out.max_abs_error = diff;
      out.worst_index = static_cast<std::int64_t>(i);
      out.actual_at_worst = a[i];
      out.expected_at_worst = e[i];
    }
  }
  out.relative_error = out.max_abs_error == 0.0 ? 0.0 : out.max_abs_error / std::max(out.expected_scale, 1e-300);
  return out;
}

testing::AssertionResult within_tolerance(const ReferenceComparison& comparison, double tolerance) {
  if (comparison.relative_error <= tolerance) return testing::AssertionSuccess();
  return testing::AssertionFailure() << comparison.describe() << " exceeds the tolerance " << tolerance;
}

}  // namespace sprintnet::parity
