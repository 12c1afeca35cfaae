// The compiled step's loss (ops/cuda/fused_cross_entropy.cu: softmax cross-entropy or squared error of a
// whole batch in one block, with its gradient, the step's loss sum and correct count) against the CPU
// backend in fp64: every element type, fp16's loss scale, the evaluation launch (no gradient), and batches
// up to the largest the step takes. Outputs poisoned first, fresh random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sprintnet/ops/ops.h"
#include "step_kernel_util.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using test::DeviceValue;
using test::gpu;
using test::gpu_stream;

// 16-bit buffers poisoned on the host and copied over, and results widened there.
Tensor poisoned_bf16(const Shape& shape) { return test::poisoned(shape, DType::kBF16).to(gpu()); }
Tensor widened(const Tensor& half) { return half.to(Device::cpu()).to(DType::kF32).to(gpu()); }

struct CeCase {
  std::int64_t rows, classes;
  double smoothing;
};

TEST(GpuStepKernels, FusedCrossEntropyMatchesTheCpuLossGradientAndCount) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  // Up to the largest batch the step takes (65535 rows, 2048 a warp in the one block).
  for (const CeCase c : {CeCase{1, 2, 0.0}, CeCase{7, 13, 0.1}, CeCase{128, 10, 0.0}, CeCase{1000, 10, 0.1},
                         CeCase{33, 1000, 0.0}, CeCase{4096, 10, 0.1}, CeCase{65535, 37, 0.0}}) {
    const Tensor logits = test::random_uniform({c.rows, c.classes}, DType::kF32, gen, -4.0, 4.0);
    const Tensor labels = test::random_labels(c.rows, c.classes, gen);
    // CPU twin in fp64: loss sum, gradient (scaled by 1/rows as the step does), correct count.
    const Tensor ref_logits = test::oracle_copy(logits);
    const Tensor ref_loss = Tensor::zeros({1}, DType::kF64);
    const Tensor ref_grad = Tensor::empty({c.rows, c.classes}, DType::kF64);
    const double weight = 1.0 / static_cast<double>(c.rows);
    ops::cross_entropy(ref_logits, labels, c.smoothing, ref_loss, weight, &ref_grad, weight);
    const Tensor ref_correct = Tensor::zeros({1}, DType::kI32);
    ops::count_correct(ref_logits, labels, ref_correct);

    DeviceValue<cuda::StepMetrics> metrics({.loss_sum = 0.5, .correct = 3, .skipped = 0});  // sums accumulate
    const Tensor d_logits = logits.to(gpu());
    const Tensor d_labels = labels.to(gpu());
    const Tensor grad = test::poisoned({c.rows, c.classes}, DType::kF32, gpu());
    const cuda::CrossEntropyArgs args{.logits = d_logits.raw_data(), .type = cuda::ElementType::kF32,
                                      .labels = d_labels.data<std::int32_t>(), .rows = c.rows, .classes = c.classes,
                                      .smoothing = static_cast<float>(c.smoothing), .dlogits = grad.raw_data(),
                                      .grad_scale = static_cast<float>(weight), .state = nullptr,
                                      .metrics = metrics.get(), .loss_weight = weight};
    SN_CUDA_CHECK(cuda::launch_fused_cross_entropy(args, gpu_stream()));
    const cuda::StepMetrics got = metrics.read();
    const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.classes);
    // fp32 log-sum-exp per row: ~1e-7 absolute per row of an O(1) loss, averaged over the rows.
    EXPECT_NEAR(got.loss_sum - 0.5, ref_loss.item(), 1e-6 * (1.0 + std::abs(ref_loss.item()))) << what;
    EXPECT_EQ(got.correct - 3, static_cast<std::int64_t>(ref_correct.item())) << what;
    // softmax - target in fp32, O(1) values times 1/rows: a few ulp of 1/rows.
    test::expect_allclose(grad, ref_grad, 1e-6 * weight, 1e-5, "fused cross-entropy gradient " + what);
  }
}

TEST(GpuStepKernels, FusedCrossEntropyReadsAndWritesBf16) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 1);
  const std::int64_t rows = 128, classes = 10;
  const Tensor logits = test::random_uniform({rows, classes}, DType::kF32, gen, -4.0, 4.0).to(DType::kBF16);
  const Tensor labels = test::random_labels(rows, classes, gen);
  const Tensor ref_logits = test::oracle_copy(logits.to(DType::kF32));  // the bf16 values exactly
  const Tensor ref_loss = Tensor::zeros({1}, DType::kF64);
  const Tensor ref_grad = Tensor::empty({rows, classes}, DType::kF64);
  ops::cross_entropy(ref_logits, labels, 0.0, ref_loss, 1.0, &ref_grad, 1.0);

  DeviceValue<cuda::StepMetrics> metrics;
  const Tensor d_logits = logits.to(gpu());
  const Tensor d_labels = labels.to(gpu());
  const Tensor grad = poisoned_bf16({rows, classes});
  const cuda::CrossEntropyArgs args{.logits = d_logits.raw_data(), .type = cuda::ElementType::kBF16,
                                    .labels = d_labels.data<std::int32_t>(), .rows = rows, .classes = classes,
                                    .smoothing = 0.0f, .dlogits = grad.raw_data(), .grad_scale = 1.0f,
                                    .state = nullptr, .metrics = metrics.get(), .loss_weight = 1.0};
  SN_CUDA_CHECK(cuda::launch_fused_cross_entropy(args, gpu_stream()));
  EXPECT_NEAR(metrics.read().loss_sum, ref_loss.item(), 1e-6 * ref_loss.item());
  // The gradient is rounded to bf16 once: at most 2^-8 relative, plus fp32 noise far below it.
  test::expect_allclose(widened(grad), ref_grad, 1e-6, 4e-3, "bf16 gradient");
}

// loss.type = "mse" through the same kernel: the squared error against one-hot targets, mean over
// the batch's elements as the step weights it (1/rows per row, 1/classes inside the row).
TEST(GpuStepKernels, FusedSquaredErrorMatchesTheCpuMseAndCount) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 2);
  for (const CeCase c : {CeCase{1, 2, 0.0}, CeCase{7, 13, 0.0}, CeCase{128, 10, 0.0}, CeCase{33, 1000, 0.0}}) {
    const Tensor pred = test::random_uniform({c.rows, c.classes}, DType::kF32, gen, -2.0, 2.0);
    const Tensor labels = test::random_labels(c.rows, c.classes, gen);
    const Tensor ref_pred = test::oracle_copy(pred);
    const Tensor ref_loss = Tensor::zeros({1}, DType::kF64);
    const Tensor ref_grad = Tensor::empty({c.rows, c.classes}, DType::kF64);
    const double per_element = 1.0 / static_cast<double>(c.rows * c.classes);
    ops::mse_one_hot(ref_pred, labels, ref_loss, per_element, &ref_grad, per_element);
    const Tensor ref_correct = Tensor::zeros({1}, DType::kI32);
    ops::count_correct(ref_pred, labels, ref_correct);

    DeviceValue<cuda::StepMetrics> metrics({.loss_sum = 0.5, .correct = 3, .skipped = 0});
    const Tensor d_pred = pred.to(gpu());
    const Tensor d_labels = labels.to(gpu());
    const Tensor grad = test::poisoned({c.rows, c.classes}, DType::kF32, gpu());
    const double per_row = 1.0 / static_cast<double>(c.rows);
    const cuda::CrossEntropyArgs args{.logits = d_pred.raw_data(), .type = cuda::ElementType::kF32,
                                      .labels = d_labels.data<std::int32_t>(), .rows = c.rows, .classes = c.classes,
                                      .smoothing = 0.0f, .dlogits = grad.raw_data(),
                                      .grad_scale = static_cast<float>(per_row), .state = nullptr,
                                      .metrics = metrics.get(), .loss_weight = per_row, .squared_error = true};
    SN_CUDA_CHECK(cuda::launch_fused_cross_entropy(args, gpu_stream()));
    const cuda::StepMetrics got = metrics.read();
    const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.classes);
    // Row sums of O(1) squares in fp32 (up to 1000 terms: ~1e-6 relative), then fp64.
    EXPECT_NEAR(got.loss_sum - 0.5, ref_loss.item(), 1e-5 * (1.0 + std::abs(ref_loss.item()))) << what;
    EXPECT_EQ(got.correct - 3, static_cast<std::int64_t>(ref_correct.item())) << what;
    // 2 (p - t) / (rows * classes) in fp32: a few ulp.
    test::expect_allclose(grad, ref_grad, 1e-6 * per_element, 1e-5, "fused squared-error gradient " + what);
  }
}

struct LossCase {
  std::int64_t rows, classes;
  double smoothing;
  bool squared_error;
};

// The fp16 step: logits and their gradient in fp16, the gradient times the loss scale the kernel reads from
// the StepState (1024 here), as the fp16 backward needs it; the loss itself unscaled. The reference is the
// CPU's in fp64 on the same fp16 logits, its gradient weighted by 1024 more. Cross-entropy over the class
// counts the step sends here rather than to the skinny kernels (> 32), and squared error; 4096 rows, whose
// gradient (1024 / 4096 (softmax - target)) falls partly among fp16's subnormals.
TEST(GpuStepKernels, FusedLossWritesTheFp16GradientTimesTheLossScale) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 9);
  constexpr double kLossScale = 1024.0;
  for (const LossCase c : {LossCase{128, 10, 0.0, false}, LossCase{4096, 100, 0.1, false},
                           LossCase{33, 1000, 0.0, false}, LossCase{4096, 100, 0.0, true}}) {
    const std::string what = fmt::format("{} {}x{} smoothing {}", c.squared_error ? "squared error" : "cross-entropy",
                                         c.rows, c.classes, c.smoothing);
    const Tensor logits = test::random_uniform({c.rows, c.classes}, DType::kF32, gen, -4.0, 4.0).to(DType::kF16);
    const Tensor labels = test::random_labels(c.rows, c.classes, gen);
    const Tensor ref_logits = test::oracle_copy(logits);  // the fp16 values exactly
    const Tensor ref_loss = Tensor::zeros({1}, DType::kF64);
    const Tensor ref_grad = Tensor::empty({c.rows, c.classes}, DType::kF64);
    const double per_row = 1.0 / static_cast<double>(c.rows);
    if (c.squared_error) {
      const double per_element = per_row / static_cast<double>(c.classes);
      ops::mse_one_hot(ref_logits, labels, ref_loss, per_element, &ref_grad, per_element * kLossScale);
    } else {
      ops::cross_entropy(ref_logits, labels, c.smoothing, ref_loss, per_row, &ref_grad, per_row * kLossScale);
    }
    const Tensor ref_correct = Tensor::zeros({1}, DType::kI32);
    ops::count_correct(ref_logits, labels, ref_correct);

    DeviceValue<cuda::StepState> state({.loss_scale = static_cast<float>(kLossScale)});
    DeviceValue<cuda::StepMetrics> metrics;
    const Tensor d_logits = logits.to(gpu());
    const Tensor d_labels = labels.to(gpu());
    const Tensor grad = test::poisoned({c.rows, c.classes}, DType::kF16, gpu());
    const cuda::CrossEntropyArgs args{.logits = d_logits.raw_data(), .type = cuda::ElementType::kF16,
                                      .labels = d_labels.data<std::int32_t>(), .rows = c.rows, .classes = c.classes,
                                      .smoothing = static_cast<float>(c.smoothing), .dlogits = grad.raw_data(),
                                      .grad_scale = static_cast<float>(per_row), .state = state.get(),
                                      .metrics = metrics.get(), .loss_weight = per_row,
                                      .squared_error = c.squared_error};
    SN_CUDA_CHECK(cuda::launch_fused_cross_entropy(args, gpu_stream()));
    const cuda::StepMetrics got = metrics.read();
    // The loss as in fp32 (FusedCrossEntropyMatchesTheCpu…, FusedSquaredError…): the scale must not reach it.
    EXPECT_NEAR(got.loss_sum, ref_loss.item(), (c.squared_error ? 1e-5 : 1e-6) * (1.0 + ref_loss.item())) << what;
    // Exact: the same fp16 values compared, ties going to the first maximum on both sides.
    EXPECT_EQ(got.correct, static_cast<std::int64_t>(ref_correct.item())) << what;
    // fp32's own error (the fp32 tests' 1e-5 relative, 1e-6 of the scale absolute), then one rounding to
    // nearest fp16: 2^-11 relative among normal values, 2^-25 absolute among subnormals (below 2^-14). A
    // truncating store (up to 2^-10) or one that flushed subnormals to zero (up to 2^-14) fails.
    const double scale = kLossScale * per_row;
    test::expect_allclose(widened(grad), ref_grad, std::ldexp(1.0, -25) + 1e-6 * scale, std::ldexp(1.0, -11) + 1e-5,
                          "fp16 gradient " + what);
  }
}

// The evaluation launch (cuda_train_plan.cpp's enqueue_loss, training = false): no gradient (dlogits null),
// no state, no smoothing, loss_weight 1 (a sum of per-sample losses); loss and hits added to what the
// metrics hold, the rest of them untouched. Every element type, cross-entropy and squared error, up to the
// largest evaluation batch (65535 rows).
TEST(GpuStepKernels, FusedLossEvaluationAddsTheLossAndHitsOnly) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 10);
  for (const DType type : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const bool squared_error : {false, true}) {
      for (const auto& [rows, classes] : std::vector<std::pair<std::int64_t, std::int64_t>>{{4096, 10}, {65535, 37}}) {
        const std::string what = fmt::format("{} {} {}x{}", squared_error ? "squared error" : "cross-entropy",
                                             dtype_name(type), rows, classes);
        const Tensor logits = test::random_uniform({rows, classes}, DType::kF32, gen, -4.0, 4.0).to(type);
        const Tensor labels = test::random_labels(rows, classes, gen);
        const Tensor ref_logits = test::oracle_copy(logits);
        const Tensor ref_loss = Tensor::zeros({1}, DType::kF64);
        if (squared_error) {
          ops::mse_one_hot(ref_logits, labels, ref_loss, 1.0 / static_cast<double>(classes), nullptr, 0.0);
        } else {
          ops::cross_entropy(ref_logits, labels, 0.0, ref_loss, 1.0, nullptr, 0.0);
        }
        const Tensor ref_correct = Tensor::zeros({1}, DType::kI32);
        ops::count_correct(ref_logits, labels, ref_correct);

        DeviceValue<cuda::StepMetrics> metrics({.loss_sum = 0.5, .correct = 3, .skipped = 7});
        const Tensor d_logits = logits.to(gpu());
        const Tensor d_labels = labels.to(gpu());
        const cuda::CrossEntropyArgs args{.logits = d_logits.raw_data(), .type = test::element_type(type),
                                          .labels = d_labels.data<std::int32_t>(), .rows = rows, .classes = classes,
                                          .smoothing = 0.0f, .dlogits = nullptr, .grad_scale = 1.0f, .state = nullptr,
                                          .metrics = metrics.get(), .loss_weight = 1.0,
                                          .squared_error = squared_error};
        SN_CUDA_CHECK(cuda::launch_fused_cross_entropy(args, gpu_stream()));
        const cuda::StepMetrics got = metrics.read();
        // Per row, fp32 sums of at most 37 terms (log-sum-exp, or squares): ~1e-7 relative, 1e-6 with room
        // (squared error, 1e-5 as in FusedSquaredError…); rows added in fp64.
        EXPECT_NEAR(got.loss_sum - 0.5, ref_loss.item(), (squared_error ? 1e-5 : 1e-6) * ref_loss.item()) << what;
        EXPECT_EQ(got.correct - 3, static_cast<std::int64_t>(ref_correct.item())) << what;
        EXPECT_EQ(got.skipped, 7) << what;
      }
    }
  }
}

}  // namespace
}  // namespace sprintnet
