#pragma once
// The backend comparison of ops_gpu_test: the CPU backend in fp64 is the
// oracle. Inputs are drawn in fp32 on the host, so the oracle's fp64 copy holds
// exactly the values the GPU sees, and the measured error is the GPU's own.
//
// Two ways to compare, because a norm-wise relative error is ill-conditioned
// when the result cancels to nearly zero (a 1x1 tanh' of a saturated input, a
// confident softmax row minus its one-hot target): where results are O(1) by
// construction, elementwise |gpu - ref| <= atol + rtol * |ref| (numpy.allclose).
#include <string_view>

#include "sprintnet/core/tensor.h"
#include "support/gpu.h"

namespace sprintnet::test {

inline Device gpu() { return Device::cuda(0); }

// The oracle's copy: on the CPU, floating tensors widened to fp64 (integers unchanged).
Tensor oracle_copy(const Tensor& t);
// Expects every element of the GPU result written and finite, the reference not all zero (so the comparison
// means something), and ||gpu - reference|| / ||scale|| <= tolerance, where scale is the reference itself
// unless given (for a matrix product, the magnitude of the terms summed).
void expect_matches_oracle(const Tensor& gpu_result, const Tensor& reference, double tolerance, std::string_view what,
                           const Tensor* scale = nullptr);
// The same first checks, then |gpu - reference| <= atol + rtol * |reference| for every element.
void expect_allclose(const Tensor& gpu_result, const Tensor& reference, double atol, double rtol,
                     std::string_view what);
// Expects the two tensors to hold the same bytes (an op run twice on the same inputs must).
void expect_bit_identical(const Tensor& a, const Tensor& b, std::string_view what);

}  // namespace sprintnet::test
