#pragma once
// Helpers shared by the op tests: exact-integer inputs, host copies in double,
// norm-wise comparison, and "throws an Error whose message says X".
#include <gtest/gtest.h>

#include <functional>
#include <string_view>
#include <vector>

#include "sprintnet/core/random.h"
#include "sprintnet/core/tensor.h"

namespace sprintnet::test {

// Integers uniform in [low, high] as `dtype`: their products and short sums are exact in fp32,
// so a matrix product can be compared for equality (the CUTLASS testbed idea).
Tensor random_integers(const Shape& shape, DType dtype, Generator& gen, int low, int high);
// Integers in [-max_magnitude, max_magnitude] except 0: even a 1x1 input is not zero.
Tensor random_nonzero_integers(const Shape& shape, DType dtype, Generator& gen, int max_magnitude);
// Uniform values with every |x| >= min_magnitude (keeps finite differences away from ReLU's kink at 0).
Tensor random_away_from_zero(const Shape& shape, DType dtype, Generator& gen, double low, double high,
                             double min_magnitude);

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
// ||actual - expected|| / ||expected||, over all elements.
double relative_error(const std::vector<double>& actual, const std::vector<double>& expected);
bool all_zero(const std::vector<double>& v);

// Success when fn throws sprintnet::Error with `substring` in its message.
testing::AssertionResult throws_error_containing(const std::function<void()>& fn, std::string_view substring);

}  // namespace sprintnet::test
