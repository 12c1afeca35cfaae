// The public entry points (ops/ops.h) reject bad operands with messages that
// name the op and the operand, before any backend runs.
#include <gtest/gtest.h>

#include "ops_test_util.h"
#include "sprintnet/ops/ops.h"

namespace sprintnet {
namespace {

Tensor f32(Shape shape) { return Tensor::zeros(std::move(shape), DType::kF32); }

TEST(OpChecks, GemmNamesTheOperand) {
  EXPECT_TRUE(test::throws_error_containing([] { ops::gemm(f32({2, 3}), false, f32({4, 5}), false, f32({2, 5})); },
                                            "gemm: inner dimensions differ: op(a) is [2, 3], op(b) is [4, 5]"));
  EXPECT_TRUE(test::throws_error_containing([] { ops::gemm(f32({2, 3}), false, f32({3, 5}), false, f32({5, 2})); },
                                            "gemm: c has shape [5, 2], expected [2, 5]"));
  EXPECT_TRUE(test::throws_error_containing([] { ops::gemm(f32({6}), false, f32({3, 5}), false, f32({2, 5})); },
                                            "gemm: a must be a matrix"));
  EXPECT_TRUE(test::throws_error_containing(
      [] { ops::gemm(f32({2, 3}), false, Tensor::zeros({3, 5}, DType::kF64), false, f32({2, 5})); },
      "gemm: dtypes differ"));
  // The output overlapping an input would be read while written (a silent wrong result before).
  const Tensor square = f32({2, 2}), other = f32({2, 2});
  EXPECT_TRUE(test::throws_error_containing([&] { ops::gemm(square, false, other, false, square); },
                                            "gemm: the output c overlaps the input a"));
  EXPECT_TRUE(test::throws_error_containing([&] { ops::gemm(other, false, square, false, square); },
                                            "gemm: the output c overlaps the input b"));
}

TEST(OpChecks, ElementwiseNamesTheOperand) {
  EXPECT_TRUE(test::throws_error_containing([] { ops::add_bias(f32({4, 3}), f32({4})); }, "add_bias: bias has shape"));
  EXPECT_TRUE(test::throws_error_containing([] { ops::sum_rows(f32({4, 3}), f32({4})); }, "sum_rows: out has shape"));
  EXPECT_TRUE(test::throws_error_containing(
      [] { ops::activation_forward(Activation::kReLU, Tensor::zeros({3}, DType::kI32), Tensor::zeros({3}, DType::kI32)); },
      "activation_forward: x must be fp32 or fp64, is int32"));
}

TEST(OpChecks, LossesNameTheOperand) {
  const Tensor loss = f32({1});
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::cross_entropy(f32({2, 3}), f32({2}), 0.0, loss, 1.0, nullptr, 1.0); },
      "cross_entropy: labels must be int32"));
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::cross_entropy(f32({2, 3}), Tensor::zeros({3}, DType::kI32), 0.0, loss, 1.0, nullptr, 1.0); },
      "cross_entropy: labels has shape [3], expected [2]"));
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::cross_entropy(f32({2, 3}), Tensor::zeros({2}, DType::kI32), 1.5, loss, 1.0, nullptr, 1.0); },
      "label_smoothing 1.5 not in [0, 1]"));
  const Tensor wrong_grad = f32({3, 2});
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::cross_entropy(f32({2, 3}), Tensor::zeros({2}, DType::kI32), 0.0, loss, 1.0, &wrong_grad, 1.0); },
      "cross_entropy: dlogits has shape [3, 2]"));
  EXPECT_TRUE(test::throws_error_containing(
      [] { ops::count_correct(f32({2, 3}), Tensor::zeros({2}, DType::kI32), f32({1})); },
      "count_correct: counter must be int32"));
  EXPECT_TRUE(test::throws_error_containing(  // MSE's scores are predictions, not logits
      [&] { ops::mse_one_hot(f32({2}), Tensor::zeros({2}, DType::kI32), loss, 1.0, nullptr, 0.0); },
      "mse: pred must be a matrix"));
}

TEST(OpChecks, OptimizersNameTheOperand) {
  EXPECT_TRUE(test::throws_error_containing(
      [] { ops::sgd_step(f32({3}), f32({3}), nullptr, SgdHyper{.momentum = 0.9}); }, "needs a momentum buffer"));
  EXPECT_TRUE(test::throws_error_containing([] { ops::sgd_step(f32({3}), f32({4}), nullptr, SgdHyper{}); },
                                            "sgd_step: grad has shape [4], expected [3]"));
  EXPECT_TRUE(test::throws_error_containing(
      [] { ops::adam_step(f32({3}), f32({3}), f32({3}), f32({3}), AdamHyper{.step = 0}); }, "step counts from 1"));
}

TEST(OpChecks, DataOpsAndDevicesNameTheOperand) {
  EXPECT_TRUE(test::throws_error_containing(
      [] { ops::gather_rows_u8(f32({4, 3}), Tensor::zeros({2}, DType::kI32), f32({2, 3}), 1.0, 0.0); },
      "gather_rows_u8: src must be uint8"));
  EXPECT_TRUE(test::throws_error_containing([] { ops::copy(Tensor(), f32({2})); }, "copy: dst is undefined"));
  EXPECT_TRUE(test::throws_error_containing([] { ops::copy(f32({3}), f32({2})); }, "copy: fp32 [2] into fp32 [3]"));
  // No machine has 100 GPUs: with or without CUDA in the build, the message names the device asked for.
  EXPECT_TRUE(test::throws_error_containing([] { Tensor::empty({2}, DType::kF32, Device::cuda(99)); }, "cuda:99"));
}

}  // namespace
}  // namespace sprintnet
