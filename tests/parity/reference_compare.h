#pragma once
// Comparing a sprintnet tensor with PyTorch's, llm.c-style: one error per
// tensor, judged against a tolerance stated (with its reason) by the caller.
//
// The error is max_i |actual_i - expected_i| / max_i |expected_i|: relative to
// the tensor's scale rather than to each element, because an element that is a
// near-cancelling sum (a gradient close to zero) carries the rounding of its
// large terms, not of its small result. A perturbation of 1e-3 relative on any
// element at least 1 % of the largest shows as >= 1e-5.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "sprintnet/core/tensor.h"

namespace sprintnet::parity {

struct ReferenceComparison {
  std::string name;
  double relative_error = 0.0;  // infinite on a shape mismatch or a NaN on either side
  double max_abs_error = 0.0;
  double expected_scale = 0.0;  // max_i |expected_i|
  std::int64_t worst_index = -1;
  double actual_at_worst = 0.0, expected_at_worst = 0.0;
  std::string shape_problem;  // set when the shapes differ

  std::string describe() const;
};

ReferenceComparison compare_to_reference(std::string name, const Tensor& actual, const Tensor& expected);

// For EXPECT_TRUE(...): success when relative_error <= tolerance; the failure message names the
// tensor, the flat index of the worst element, both values and the errors.
testing::AssertionResult within_tolerance(const ReferenceComparison& comparison, double tolerance);

}  // namespace sprintnet::parity
