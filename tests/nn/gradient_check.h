#pragma once
// Finite-difference gradient checks in fp64, for modules and losses that
// implement their own backward.
//
// Why the tolerance is what it is: a central difference (f(x+h) - f(x-h)) / 2h
// with h = 1e-6 has a truncation error of h^2 * f''' / 6, about 1e-12, and a
// rounding error of about eps * |f| / h = 2.2e-16 * |f| / 1e-6, about 2e-10 * |f|.
// The checked losses are O(1..10) and the gradients O(0.1..1), so a correct
// backward agrees to ~1e-9 relative (measured over 300 seeds: 8e-12 to 8e-9).
// 1e-7 leaves more than an order of margin; a wrong formula (a missing factor,
// a transposed product, a wrong sign or derivative) is off by 1e-3..1.
#include <functional>

#include "sprintnet/core/random.h"
#include "sprintnet/core/tensor.h"
#include "sprintnet/nn/module.h"

namespace sprintnet::test {

inline constexpr double kFiniteDifferenceStep = 1e-6;
inline constexpr double kGradientRelativeTolerance = 1e-7;

// dloss/dx by central differences, for every element of the fp64 CPU tensor x
// (each element is perturbed in place by +-kFiniteDifferenceStep and restored).
Tensor numerical_gradient(const Tensor& x, const std::function<double()>& loss);

// sum(a * b) over all elements, in double.
double dot(const Tensor& a, const Tensor& b);

// Records a failure unless `analytic` matches `numerical` within kGradientRelativeTolerance;
// also fails when `numerical` is all zero (a check of zeros against zeros proves nothing).
void expect_gradient_close(const Tensor& analytic, const Tensor& numerical, std::string_view what);

// With a random fixed `upstream`, checks module.backward(upstream) against the
// numerical gradients of L = sum(upstream * module.forward(input)) w.r.t. the
// input (when the module computes one) and every parameter element. The
// parameter gradients are marked empty and poisoned with NaN first, so the
// check also proves that backward overwrites an empty gradient.
void expect_backward_matches_finite_differences(nn::Module& module, const Tensor& input, Generator& gen);

}  // namespace sprintnet::test
