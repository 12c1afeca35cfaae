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

// Shapes, not only element counts: a [3, 2] was copied into a [2, 3] without a word.
TEST(OpChecks, CopyNeedsEqualShapes) {
  EXPECT_TRUE(test::throws_error_containing([] { ops::copy(f32({2, 3}), f32({3, 2})); },
                                            "copy: fp32 [3, 2] into fp32 [2, 3]: dtypes and shapes must match"));
  EXPECT_NO_THROW(ops::copy(f32({2, 3}), f32({3, 2}).view({2, 3})));  // a reshaping copy views one side
}

// A partial overlap reads elements the op has already overwritten: axpy of t[0:3] into t[1:4] of [1, 2, 3, 4] gave
// the prefix sums 1 3 6 10, not 1 3 5 7. Refused, as torch refuses it, before anything is written.
TEST(OpChecks, ElementwiseOpsRefuseAPartialOverlap) {
  const Tensor t = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  const Tensor head = t.slice_rows(0, 3), tail = t.slice_rows(1, 4), other = f32({3});
  EXPECT_TRUE(test::throws_error_containing([&] { ops::axpy(tail, head); },
                                            "axpy: the output y partially overlaps the input x"));
  EXPECT_TRUE(test::throws_error_containing([&] { ops::activation_forward(Activation::kReLU, head, tail); },
                                            "activation_forward: the output y partially overlaps the input x"));
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::activation_backward(Activation::kReLU, other, other, head, tail); },
      "activation_backward: the output dx partially overlaps the input dy"));
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::activation_backward(Activation::kReLU, head, other, other, tail); },
      "activation_backward: the output dx partially overlaps the input x"));
  EXPECT_TRUE(test::throws_error_containing([&] { ops::copy(tail, head); },
                                            "copy: the output dst partially overlaps the input src"));
  EXPECT_EQ(test::values(t), (std::vector<double>{1, 2, 3, 4}));
}

// The very same tensor stays allowed, as in torch: each element is read before it is written, so in place gives
// what a separate output would (the library itself runs none of these in place, a user may).
TEST(OpChecks, ElementwiseOpsRunInPlace) {
  const Tensor t = Tensor::from_vector<double>({-1, 2, -3, 4}, {4});
  ops::axpy(t, t, 2.0);
  EXPECT_EQ(test::values(t), (std::vector<double>{-3, 6, -9, 12}));
  ops::activation_forward(Activation::kReLU, t, t);
  EXPECT_EQ(test::values(t), (std::vector<double>{0, 6, 0, 12}));
  const Tensor x = Tensor::from_vector<double>({1, -1, 1, 1}, {4});
  ops::activation_backward(Activation::kReLU, x, x, t, t);  // dx = dy where x > 0
  EXPECT_EQ(test::values(t), (std::vector<double>{0, 0, 0, 12}));
  ops::copy(t, t);
  EXPECT_EQ(test::values(t), (std::vector<double>{0, 0, 0, 12}));
}

// The other ops are not elementwise (a reduction or a gather reads other elements than the one it writes; an
// optimizer step reads grad after it writes param): any overlap is refused, even the very same tensor.
TEST(OpChecks, OpsThatAreNotElementwiseRefuseAnyOverlap) {
  const Tensor m = f32({3, 2}), loss = f32({1});
  const Tensor labels = Tensor::zeros({3}, DType::kI32);
  EXPECT_TRUE(test::throws_error_containing([&] { ops::add_bias(m, m.slice_rows(0, 1).view({2})); },
                                            "add_bias: the output y overlaps the input bias"));
  EXPECT_TRUE(test::throws_error_containing([&] { ops::sum_rows(m, m.slice_rows(2, 3).view({2})); },
                                            "sum_rows: the output out overlaps the input x"));
  EXPECT_TRUE(test::throws_error_containing([&] { ops::cross_entropy(m, labels, 0.0, loss, 1.0, &m, 1.0); },
                                            "cross_entropy: the output dlogits overlaps the input logits"));
  const Tensor first_logit = m.view({6}).slice_rows(0, 1);
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::cross_entropy(m, labels, 0.0, first_logit, 1.0, nullptr, 0.0); },
      "cross_entropy: the output loss_sum overlaps the input logits"));
  EXPECT_TRUE(test::throws_error_containing([&] { ops::mse_one_hot(m, labels, loss, 1.0, &m, 1.0); },
                                            "mse: the output dpred overlaps the input pred"));
  EXPECT_TRUE(test::throws_error_containing([&] { ops::count_correct(m, labels, labels.slice_rows(0, 1)); },
                                            "count_correct: the counter overlaps the input labels"));
  EXPECT_TRUE(test::throws_error_containing(
      [&] { ops::gather_labels(labels, labels.slice_rows(0, 2), labels.slice_rows(1, 3)); },
      "gather_labels: the output dst overlaps the input labels"));
  const Tensor p = f32({3}), g = f32({3}), state = f32({3});
  EXPECT_TRUE(test::throws_error_containing([&] { ops::sgd_step(p, p, nullptr, SgdHyper{}); },
                                            "sgd_step: the output param overlaps the input grad"));
  EXPECT_TRUE(test::throws_error_containing([&] { ops::sgd_step(p, g, &p, SgdHyper{.momentum = 0.9}); },
                                            "sgd_step: the output momentum buffer overlaps the output param"));
  EXPECT_TRUE(test::throws_error_containing([&] { ops::adam_step(p, g, state, state, AdamHyper{}); },
                                            "adam_step: the output exp_avg overlaps the output exp_avg_sq"));
  EXPECT_TRUE(test::throws_error_containing([&] { ops::adam_step(p, g, g, state, AdamHyper{}); },
                                            "adam_step: the output exp_avg overlaps the input grad"));
}

}  // namespace
}  // namespace sprintnet
