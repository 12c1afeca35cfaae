// The kernels of the compiled training step (ops/cuda/step_launch.h) and the
// cuBLASLt epilogues it uses, each against its CPU twin: outputs poisoned
// first, fresh random inputs, tolerances stated where they are used.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "adam_fast_probe.h"
#include "gpu_compare.h"
#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/random.h"
#include "sprintnet/ops/cuda/cuda_backend.h"
#include "sprintnet/ops/cuda/gemm.h"
#include "sprintnet/ops/cuda/step_launch.h"
#include "sprintnet/ops/ops.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using test::gpu;

cudaStream_t stream() { return static_cast<cuda::CudaBackend&>(backend_for(gpu())).stream(); }

// 16-bit buffers poisoned on the host and copied over, and results widened there.
Tensor poisoned_bf16(const Shape& shape) { return test::poisoned(shape, DType::kBF16).to(gpu()); }
Tensor widened(const Tensor& bf16) { return bf16.to(Device::cpu()).to(DType::kF32).to(gpu()); }

// A device buffer holding one T (StepState, StepMetrics), read back after the stream drains.
template <typename T>
struct DeviceValue {
  Tensor bytes;
  explicit DeviceValue(const T& value = T{}) {
    bytes = Tensor::empty({static_cast<std::int64_t>(sizeof(T))}, DType::kU8, gpu());
    // On the kernels' stream (non-blocking: a copy on the legacy stream would not be ordered before them).
    SN_CUDA_CHECK(cudaMemcpyAsync(bytes.raw_data(), &value, sizeof(T), cudaMemcpyHostToDevice, stream()));
    SN_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }
  T* get() const { return static_cast<T*>(bytes.raw_data()); }
  T read() const {
    backend_for(gpu()).synchronize();
    T value{};
    SN_CUDA_CHECK(cudaMemcpy(&value, bytes.raw_data(), sizeof(T), cudaMemcpyDeviceToHost));
    return value;
  }
};

// ------------------------------------------------------------------------------------- permutation

TEST(GpuStepKernels, EpochPermutationIsTheCpuPermutation) {
  SN_REQUIRE_GPU();
  for (const std::int64_t n : {1, 7, 1000, 60000}) {
    for (const std::uint64_t epoch : {0u, 3u}) {
      const std::uint64_t seed = test::test_seed() + static_cast<std::uint64_t>(n);
      const std::size_t scratch_bytes = cuda::epoch_permutation_scratch_bytes(n);
      const Tensor scratch = Tensor::empty({static_cast<std::int64_t>(scratch_bytes)}, DType::kU8, gpu());
      const Tensor order = test::poisoned({n}, DType::kI32, gpu());
      SN_CUDA_CHECK(cuda::launch_epoch_permutation(seed, epoch, n, scratch.raw_data(), scratch_bytes,
                                                   order.data<std::int32_t>(), stream()));
      // Exact: the same keys sorted the same way.
      EXPECT_EQ(order.to(Device::cpu()).to_vector<std::int32_t>(), epoch_permutation(seed, epoch, n))
          << "n " << n << " epoch " << epoch;
    }
  }
}

// ----------------------------------------------------------------------------------- cross-entropy

struct CeCase {
  std::int64_t rows, classes;
  double smoothing;
};

TEST(GpuStepKernels, FusedCrossEntropyMatchesTheCpuLossGradientAndCount) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  for (const CeCase c : {CeCase{1, 2, 0.0}, CeCase{7, 13, 0.1}, CeCase{128, 10, 0.0}, CeCase{1000, 10, 0.1},
                         CeCase{33, 1000, 0.0}}) {
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
    SN_CUDA_CHECK(cuda::launch_fused_cross_entropy(args, stream()));
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
  SN_CUDA_CHECK(cuda::launch_fused_cross_entropy(args, stream()));
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
    SN_CUDA_CHECK(cuda::launch_fused_cross_entropy(args, stream()));
    const cuda::StepMetrics got = metrics.read();
    const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.classes);
    // Row sums of O(1) squares in fp32 (up to 1000 terms: ~1e-6 relative), then fp64.
    EXPECT_NEAR(got.loss_sum - 0.5, ref_loss.item(), 1e-5 * (1.0 + std::abs(ref_loss.item()))) << what;
    EXPECT_EQ(got.correct - 3, static_cast<std::int64_t>(ref_correct.item())) << what;
    // 2 (p - t) / (rows * classes) in fp32: a few ulp.
    test::expect_allclose(grad, ref_grad, 1e-6 * per_element, 1e-5, "fused squared-error gradient " + what);
  }
}

// -------------------------------------------------------------------------------------- optimizer

struct OptimizerCase {
  cuda::FlatOptimizerKind kind;
  SgdHyper sgd;
  AdamHyper adam;
  const char* name;
};

// Three steps of the flat update over two "parameters" back to back, against the CPU backend's
// per-tensor update with the same learning rates: fp32 both, same algebra, so equal to a few ulp.
TEST(GpuStepKernels, FlatOptimizerFollowsTheCpuOptimizerAndAdvancesTheStep) {
  SN_REQUIRE_GPU();
  const std::vector<OptimizerCase> cases = {
      {cuda::FlatOptimizerKind::kSgd, {.momentum = 0.9, .weight_decay = 1e-3}, {}, "sgd momentum"},
      {cuda::FlatOptimizerKind::kSgd, {.momentum = 0.9, .nesterov = true}, {}, "sgd nesterov"},
      {cuda::FlatOptimizerKind::kSgd, {.momentum = 0.0, .weight_decay = 1e-2}, {}, "sgd plain"},
      {cuda::FlatOptimizerKind::kAdam, {}, {.weight_decay = 1e-2}, "adam"},
      {cuda::FlatOptimizerKind::kAdamW, {}, {.weight_decay = 1e-2, .decoupled = true}, "adamw"},
  };
  const std::vector<double> lrs = {0.05, 0.03, 0.01};
  const std::int64_t count = 4 * 1000;  // a multiple of 4, like the plan's padded flat buffers
  for (const OptimizerCase& c : cases) {
    Generator gen(test::test_seed() + 7);
    const bool adam = c.kind != cuda::FlatOptimizerKind::kSgd;
    const bool momentum = adam || c.sgd.momentum > 0.0;
    Tensor param = test::random_uniform({count}, DType::kF32, gen);
    Tensor s1 = Tensor::zeros({count}, DType::kF32), s2 = Tensor::zeros({count}, DType::kF32);
    Tensor d_param = param.to(gpu()), d_s1 = s1.to(gpu()), d_s2 = s2.to(gpu());
    const Tensor copy = poisoned_bf16({count});
    const Tensor lr_table = Tensor::from_vector(lrs, {3}, gpu());
    DeviceValue<cuda::StepState> state;
    for (std::size_t step = 0; step < lrs.size(); ++step) {
      const Tensor grad = test::random_uniform({count}, DType::kF32, gen);
      if (adam) {
        AdamHyper h = c.adam;
        h.lr = lrs[step];
        h.step = static_cast<std::int64_t>(step) + 1;
        ops::adam_step(param, grad, s1, s2, h);
      } else {
        SgdHyper h = c.sgd;
        h.lr = lrs[step];
        h.first_step = step == 0;
        ops::sgd_step(param, grad, momentum ? &s1 : nullptr, h);
      }
      const Tensor d_grad = grad.to(gpu());
      const cuda::FlatOptimizerArgs args{
          .kind = c.kind, .master = d_param.data<float>(), .grad = d_grad.data<float>(),
          .state1 = momentum ? d_s1.data<float>() : nullptr, .state2 = adam ? d_s2.data<float>() : nullptr,
          .copy = copy.raw_data(), .copy_type = cuda::ElementType::kBF16, .count = count,
          .lr_table = lr_table.data<double>(), .lr_table_size = 3, .state = state.get(),
          .momentum = static_cast<float>(c.sgd.momentum), .keep = static_cast<float>(1.0 - c.sgd.dampening),
          .weight_decay = static_cast<float>(adam ? c.adam.weight_decay : c.sgd.weight_decay),
          .nesterov = c.sgd.nesterov, .beta1 = static_cast<float>(c.adam.beta1),
          .beta2 = static_cast<float>(c.adam.beta2), .eps = static_cast<float>(c.adam.eps),
          .beta1_d = c.adam.beta1, .beta2_d = c.adam.beta2,
          .weight_decay_d = adam ? c.adam.weight_decay : c.sgd.weight_decay, .check_finite = false,
          .metrics = nullptr};
      SN_CUDA_CHECK(cuda::launch_flat_optimizer(args, stream()));
    }
    const cuda::StepState after = state.read();
    EXPECT_EQ(after.step, 3) << c.name;
    EXPECT_EQ(after.opt_steps, 3) << c.name;
    EXPECT_EQ(after.blocks_done, 0u) << c.name;
    // The same fp32 operations in the same order: the results agree to the last bit or two.
    EXPECT_LT(test::relative_error(d_param.to(Device::cpu()), param), 1e-6) << c.name;
    if (momentum) {
      EXPECT_LT(test::relative_error(d_s1.to(Device::cpu()), s1), 1e-6) << c.name;
    }
    // The bf16 copy is the master weight rounded once (at most 2^-8 relative). Norm-wise, rounding to nearest
    // leaves ~1.5e-3 and truncation ~3e-3 on such values (a review measured both on 4000 uniform draws): 2.2e-3
    // tells them apart.
    EXPECT_LT(test::relative_error(copy.to(Device::cpu()).to(DType::kF32), d_param.to(Device::cpu())), 2.2e-3)
        << c.name;
  }
}

// flat_update.cuh's adam_update_fast (the fused kernels' Adam step: approximate square root and
// reciprocal, no slow paths) against the CPU's exact Adam step, on random values and on the ones the
// exact step takes its slow paths for: v = 0 (a weight that never gets a gradient), denormal v or
// g^2, a huge gradient; a NaN gradient must give a NaN weight. The approximations' relative error is
// below 2^-22, so the weight's change agrees to 1e-5 of itself (plus an ulp of the weight).
TEST(GpuStepKernels, AdamFastStepFollowsTheCpuAdamOnTheSlowPathsToo) {
  SN_REQUIRE_GPU();
  for (const bool decoupled : {false, true}) {
    for (const std::int64_t t : {std::int64_t{1}, std::int64_t{7}}) {
      const AdamHyper h{.lr = 1e-3, .weight_decay = 1e-2, .decoupled = decoupled, .step = t};
      Generator gen(test::test_seed() + 11);
      const std::int64_t n = 2048;
      Tensor p = test::random_uniform({n}, DType::kF32, gen);
      Tensor g = test::random_uniform({n}, DType::kF32, gen);
      Tensor m = test::random_uniform({n}, DType::kF32, gen, -0.1, 0.1);
      Tensor v = test::random_uniform({n}, DType::kF32, gen, 0.0, 0.01);
      float* pg = g.data<float>();
      float* pm = m.data<float>();
      float* pv = v.data<float>();
      const float nan = std::numeric_limits<float>::quiet_NaN();
      float* pp = p.data<float>();
      for (int i = 0; i < 64; ++i) {  // never a gradient: v and m stay 0
        pg[i] = 0.0f, pm[i] = 0.0f, pv[i] = 0.0f;
        // Adam's coupled weight decay adds weight_decay * p to the gradient: only a zero weight gets
        // none there (a random one gets a step, which the tolerance below covers, not bit-equality).
        if (!decoupled) pp[i] = 0.0f;
      }
      for (int i = 64; i < 128; ++i) pg[i] = 0.0f, pv[i] = 1e-40f;    // denormal v
      for (int i = 128; i < 192; ++i) pg[i] = 1e-20f, pv[i] = 0.0f;   // denormal g^2
      for (int i = 192; i < 256; ++i) pg[i] = 1e10f;                   // huge
      pg[256] = nan;
      const Tensor p0 = p.clone(), m0 = m.clone();
      Tensor d_p = p.to(gpu()), d_g = g.to(gpu()), d_m = m.to(gpu()), d_v = v.to(gpu());
      ops::adam_step(p, g, m, v, h);
      const cuda::FlatOptimizerArgs args{
          .kind = decoupled ? cuda::FlatOptimizerKind::kAdamW : cuda::FlatOptimizerKind::kAdam,
          .weight_decay = static_cast<float>(h.weight_decay), .beta1 = static_cast<float>(h.beta1),
          .beta2 = static_cast<float>(h.beta2), .eps = static_cast<float>(h.eps), .beta1_d = h.beta1,
          .beta2_d = h.beta2, .weight_decay_d = h.weight_decay};
      const double beta1_t = std::pow(h.beta1, static_cast<double>(t)), beta2_t = std::pow(h.beta2, static_cast<double>(t));
      test::adam_update_fast_on_gpu(args, h.lr, beta1_t, beta2_t, d_p.data<float>(), d_g.data<float>(),
                                    d_m.data<float>(), d_v.data<float>(), static_cast<int>(n));
      const Tensor gp = d_p.to(Device::cpu()), gm = d_m.to(Device::cpu()), gv = d_v.to(Device::cpu());
      const std::string where = fmt::format("{} t={}", decoupled ? "adamw" : "adam", t);
      EXPECT_TRUE(std::isnan(gp.data<float>()[256])) << where << ": a NaN gradient leaves a NaN weight";
      for (std::int64_t i = 0; i < n; ++i) {
        if (i == 256) continue;
        // m = beta1 m + (1 - beta1) g rounds once (a fused multiply-add) on the GPU, twice on the CPU:
        // they differ by an ulp of the terms, which cancel where m is near zero; that difference
        // reaches the weight through step_size * m / denom.
        const double g_eff = pg[i] + (decoupled ? 0.0 : h.weight_decay * p0.data<float>()[i]);
        const double m_tol = 2.4e-7 * (h.beta1 * std::fabs(m0.data<float>()[i]) + (1.0 - h.beta1) * std::fabs(g_eff));
        const double denom = std::sqrt(v.data<float>()[i]) / std::sqrt(1.0 - beta2_t) + h.eps;
        const double want = p.data<float>()[i], got = gp.data<float>()[i];
        const double change = std::fabs(want - p0.data<float>()[i]);
        const double p_tol = 1e-5 * change + 1.2e-7 * std::fabs(want) + h.lr / (1.0 - beta1_t) * m_tol / denom;
        ASSERT_LE(std::fabs(got - want), p_tol) << where << " element " << i;
        ASSERT_LE(std::fabs(gm.data<float>()[i] - m.data<float>()[i]), m_tol) << where << " m, element " << i;
        ASSERT_LE(std::fabs(gv.data<float>()[i] - v.data<float>()[i]), 2.4e-7 * std::fabs(v.data<float>()[i]) + 1e-44)
            << where << " v, element " << i;
      }
      // No gradient: v = 0 on both sides, the step is exactly zero (AdamW: the weight only decays, by the
      // same float factor), so the weights agree to the bit.
      for (int i = 0; i < 64; ++i) EXPECT_EQ(gp.data<float>()[i], p.data<float>()[i]) << where << ": no gradient";
    }
  }
}

TEST(GpuStepKernels, Fp16LossScalingSkipsANonFiniteStepAndHalvesTheScale) {
  SN_REQUIRE_GPU();
  const std::int64_t count = 64;
  const Tensor param = Tensor::full({count}, 1.0, DType::kF32, gpu());
  std::vector<float> g(static_cast<std::size_t>(count), 512.0f);  // scaled by 256 → 2 after unscaling
  const Tensor grad = Tensor::from_vector(g, {count}, gpu());
  const Tensor lr = Tensor::from_vector(std::vector<double>{0.25}, {1}, gpu());
  DeviceValue<cuda::StepState> state({.loss_scale = 256.0f});
  DeviceValue<cuda::StepMetrics> metrics;
  const auto update = [&] {
    SN_CUDA_CHECK(cuda::launch_check_finite(grad.data<float>(), cuda::ElementType::kF32, count, state.get(), stream()));
    const cuda::FlatOptimizerArgs args{.kind = cuda::FlatOptimizerKind::kSgd, .master = param.data<float>(),
                                       .grad = grad.data<float>(), .count = count, .lr_table = lr.data<double>(),
                                       .lr_table_size = 1, .state = state.get(), .check_finite = true,
                                       .metrics = metrics.get()};
    SN_CUDA_CHECK(cuda::launch_flat_optimizer(args, stream()));
  };
  update();  // finite: p = 1 - 0.25 * 512 / 256 = 0.5
  EXPECT_EQ(param.to(Device::cpu()).to_vector<float>()[5], 0.5f);
  g[17] = INFINITY;
  ops::copy(grad, Tensor::from_vector(g, {count}, gpu()));
  update();  // skipped: p stays, the scale halves
  const cuda::StepState after = state.read();
  EXPECT_EQ(param.to(Device::cpu()).to_vector<float>()[5], 0.5f);
  EXPECT_EQ(after.loss_scale, 128.0f);
  EXPECT_EQ(after.step, 2);
  EXPECT_EQ(after.opt_steps, 1);
  EXPECT_EQ(after.found_inf, 0);
  EXPECT_EQ(metrics.read().skipped, 1);
}

// ------------------------------------------------------------------------------ gather, column sum

// Batches of 1024 rows of 784 or 48 features (whole 16-byte pieces) take the vector kernel, in each
// compute type; rows of 37 features and batches of 32 the element kernel. p * 0.5 - 1 for p < 251
// needs at most 8 significant bits, so every type holds the expected value exactly.
TEST(GpuStepKernels, BatchGatherTakesTheStepsBatchFromTheOrder) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 3);
  for (const auto& [features, batch, type] : std::vector<std::tuple<std::int64_t, std::int64_t, DType>>{
           {37, 32, DType::kF32}, {784, 32, DType::kBF16}, {37, 1024, DType::kF32}, {784, 1024, DType::kF32},
           {784, 1024, DType::kBF16}, {784, 1024, DType::kF16}, {48, 1024, DType::kBF16}}) {
    const std::string what = fmt::format("{} features, batch {}, {}", features, batch, dtype_name(type));
    const std::int64_t n = 2500, steps_per_epoch = n / batch;
    std::vector<std::uint8_t> pixels(static_cast<std::size_t>(n * features));
    for (auto& p : pixels) p = static_cast<std::uint8_t>(gen.below(251));  // exact in bf16 and fp16 after scaling
    const Tensor images = Tensor::from_vector(pixels, {n, features}, gpu());
    const Tensor labels = test::random_labels(n, 10, gen);
    const Tensor d_labels = labels.to(gpu());
    const std::vector<std::int32_t> order = epoch_permutation(test::test_seed(), 1, n);
    const Tensor d_order = Tensor::from_vector(order, {n}, gpu());
    DeviceValue<cuda::StepState> state({.step = 2 * steps_per_epoch + 1});  // epoch 2, batch 1
    const Tensor dst = test::poisoned({batch, features}, type, gpu());
    const Tensor dst_labels = test::poisoned({batch}, DType::kI32, gpu());
    const cuda::ElementType element = type == DType::kBF16  ? cuda::ElementType::kBF16
                                      : type == DType::kF16 ? cuda::ElementType::kF16
                                                            : cuda::ElementType::kF32;
    const cuda::GatherArgs args{.images = images.data<std::uint8_t>(), .labels = d_labels.data<std::int32_t>(),
                                .features = features, .order = d_order.data<std::int32_t>(), .state = state.get(),
                                .steps_per_epoch = steps_per_epoch, .first = 0, .rows = batch, .scale = 0.5f,
                                .shift = -1.0f, .dst = dst.raw_data(), .dst_type = element,
                                .dst_labels = dst_labels.data<std::int32_t>()};
    SN_CUDA_CHECK(cuda::launch_gather_batch(args, stream()));
    const auto got = dst.to(Device::cpu()).to_vector<float>();
    const auto got_labels = dst_labels.to(Device::cpu()).to_vector<std::int32_t>();
    const auto all_labels = labels.to_vector<std::int32_t>();
    for (std::int64_t r = 0; r < batch; ++r) {
      const std::int32_t sample = order[static_cast<std::size_t>(batch + r)];
      ASSERT_EQ(got_labels[static_cast<std::size_t>(r)], all_labels[static_cast<std::size_t>(sample)]) << what << " " << r;
      for (std::int64_t f = 0; f < features; ++f) {
        const float expected = static_cast<float>(pixels[static_cast<std::size_t>(sample * features + f)]) * 0.5f - 1.0f;
        ASSERT_EQ(got[static_cast<std::size_t>(r * features + f)], expected) << what << " " << r << "," << f;
      }
    }
  }
}

// The bias gradient where cuBLASLt fuses none: fp32 sums of x's elements stored in x's type.
TEST(GpuStepKernels, SumRowsIsTheCpuSumOfRowsInEveryElementType) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 4);
  const std::vector<std::pair<DType, cuda::ElementType>> types = {
      {DType::kF32, cuda::ElementType::kF32}, {DType::kBF16, cuda::ElementType::kBF16},
      {DType::kF16, cuda::ElementType::kF16}};
  for (const auto& [dtype, element] : types) {
    for (const auto& [rows, cols] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {128, 784}, {4096, 10}, {33, 70}}) {
      const Tensor x = test::random_uniform({rows, cols}, DType::kF32, gen).to(dtype);
      const Tensor ref = Tensor::empty({cols}, DType::kF64);
      ops::sum_rows(test::oracle_copy(x.to(DType::kF32)), ref);
      const Tensor out = test::poisoned({cols}, dtype, gpu());
      const Tensor d_x = x.to(gpu());
      SN_CUDA_CHECK(cuda::launch_sum_rows(d_x.raw_data(), element, rows, cols, 0.0F, out.raw_data(), stream()));
      // fp32 sums of up to 4096 O(1) terms in 16 ordered lanes: error ~ n * 2^-24 of the terms'
      // magnitude (the absolute part); then one rounding to nearest in the output type: at most
      // 2^-8 relative in bf16, 2^-11 in fp16 (a truncating store errs up to twice that and fails).
      const double relative = dtype == DType::kF32 ? 1e-5 : dtype == DType::kBF16 ? 4.0e-3 : 5.0e-4;
      test::expect_allclose(out.to(DType::kF32), ref, 1e-6 * static_cast<double>(rows), relative,
                            fmt::format("sum_rows {} {}x{}", dtype_name(dtype), rows, cols));
    }
  }
}

// The compiled step applies ReLU's gradient with launch_activation_backward, in place on the product's
// output: a select like the CPU's (ops/cpu/activation_math.h), so an infinite or NaN gradient (an fp16
// overflow) where the activation was 0 gives 0, and everything else passes through unchanged. Exact: the
// result is dy or 0, both representable in every element type; compared by bits after widening.
TEST(GpuStepKernels, ReluGradientIsTheCpusSelectInEveryElementType) {
  SN_REQUIRE_GPU();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Generator gen(test::test_seed() + 5);
  std::vector<float> act = test::random_uniform({4096}, DType::kF32, gen, -1.0, 1.0).to_vector<float>();
  std::vector<float> dy = test::random_uniform({4096}, DType::kF32, gen, -2.0, 2.0).to_vector<float>();
  for (float& a : act) a = std::max(a, 0.0f);  // the layer's output, ~half of it 0
  const std::vector<float> specials = {inf, -inf, nan};
  for (std::size_t i = 0; i < 96; ++i) dy[i * 41] = specials[i % 3];  // on masked and unmasked entries alike
  const std::vector<std::pair<DType, cuda::ElementType>> types = {
      {DType::kF32, cuda::ElementType::kF32}, {DType::kBF16, cuda::ElementType::kBF16},
      {DType::kF16, cuda::ElementType::kF16}};
  for (const auto& [dtype, element] : types) {
    const Tensor a = Tensor::from_vector(act, {4096}).to(dtype), g = Tensor::from_vector(dy, {4096}).to(dtype);
    const Tensor ref = test::poisoned({4096}, DType::kF32);
    ops::activation_backward(Activation::kReLU, a.to(DType::kF32), a.to(DType::kF32), g.to(DType::kF32), ref);
    const Tensor d_a = a.to(gpu()), d_g = g.to(gpu());  // in place, as the step runs it
    SN_CUDA_CHECK(cuda::launch_activation_backward(cuda::ActivationKind::kReLU, element, d_a.raw_data(),
                                                   d_a.raw_data(), d_g.raw_data(), d_g.raw_data(), 4096, stream()));
    const std::vector<float> got = d_g.to(Device::cpu()).to(DType::kF32).to_vector<float>();
    const std::vector<float> want = ref.to_vector<float>();
    int masked_specials = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      masked_specials += !std::isfinite(dy[i]) && act[i] == 0.0f;
      const bool same = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
      ASSERT_TRUE(same) << dtype_name(dtype) << " entry " << i << ": " << got[i] << " against the CPU's " << want[i];
    }
    EXPECT_GT(masked_specials, 10) << "the case must put infinities and NaNs where ReLU masks";
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (act[i] == 0.0f) {
        EXPECT_EQ(got[i], 0.0f) << dtype_name(dtype) << " masked entry " << i;
      }
    }
  }
}

// The activations the compiled step applies by kernel (GELU, tanh, sigmoid, SiLU, and identity and ReLU through the
// same code), in bf16 and fp16, against the CPU in fp64 on the same rounded inputs. Each kernel computes in fp32 and
// rounds once to its type: |error| <= 2^-8 |y| in bf16, 2^-11 in fp16 (rtol 4.5e-3, 6e-4 with fp32's own error),
// plus 2e-6 for fp32's erf/exp near zero and fp16's subnormals. The forward runs out of place and in place, the
// backward (from x and the kernel's own y, as the step calls it) out of place into a poisoned buffer and in place
// over dy: the two must agree bit for bit. (fp32: GpuOps' activation tests.)
TEST(GpuStepKernels, ActivationKernelsMatchTheCpuInBf16AndFp16) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 8);
  const std::int64_t n = 5000;  // not a multiple of any vector width
  for (const auto& [dtype, element, rtol] : std::vector<std::tuple<DType, cuda::ElementType, double>>{
           {DType::kBF16, cuda::ElementType::kBF16, 4.5e-3}, {DType::kF16, cuda::ElementType::kF16, 6e-4}}) {
    for (const Activation act : {Activation::kIdentity, Activation::kReLU, Activation::kGELU, Activation::kTanh,
                                 Activation::kSigmoid, Activation::kSiLU}) {
      const std::string what = fmt::format("{} {}", ops::activation_name(act), dtype_name(dtype));
      const auto kind = static_cast<cuda::ActivationKind>(act);
      const Tensor x = test::random_uniform({n}, DType::kF32, gen, -5.0, 5.0).to(dtype);
      const Tensor dy = test::random_uniform({n}, DType::kF32, gen, -2.0, 2.0).to(dtype);
      const Tensor d_x = x.to(gpu()), d_dy = dy.to(gpu());

      const Tensor y = test::poisoned({n}, dtype).to(gpu());
      SN_CUDA_CHECK(cuda::launch_activation_forward(kind, element, d_x.raw_data(), y.raw_data(), n, stream()));
      Tensor ref_y = Tensor::empty({n}, DType::kF64);
      ops::activation_forward(act, test::oracle_copy(x), ref_y);
      test::expect_allclose(y, ref_y, 2e-6, rtol, "forward " + what);
      const Tensor in_place = d_x.clone();
      SN_CUDA_CHECK(
          cuda::launch_activation_forward(kind, element, in_place.raw_data(), in_place.raw_data(), n, stream()));
      test::expect_bit_identical(in_place, y, "forward in place " + what);

      const Tensor dx = test::poisoned({n}, dtype).to(gpu());
      SN_CUDA_CHECK(cuda::launch_activation_backward(kind, element, d_x.raw_data(), y.raw_data(), d_dy.raw_data(),
                                                     dx.raw_data(), n, stream()));
      Tensor ref_dx = Tensor::empty({n}, DType::kF64);
      ops::activation_backward(act, test::oracle_copy(x), test::oracle_copy(y), test::oracle_copy(dy), ref_dx);
      test::expect_allclose(dx, ref_dx, 2e-6, rtol, "backward " + what);
      const Tensor dx_in_place = d_dy.clone();
      SN_CUDA_CHECK(cuda::launch_activation_backward(kind, element, d_x.raw_data(), y.raw_data(),
                                                     dx_in_place.raw_data(), dx_in_place.raw_data(), n, stream()));
      test::expect_bit_identical(dx_in_place, dx, "backward in place " + what);
    }
  }
}

// ---------------------------------------------------------------------------- cuBLASLt epilogues

// The three products of a hidden layer in bf16, as the compiled step runs them, against fp64 on
// the same bf16-rounded inputs: Y = relu(X W^T + b) with its mask, dX = (dY W) * mask(below), and
// dW = dY^T X with the bias gradient sum(dY) fused.
TEST(GpuStepKernels, Bf16EpiloguesMatchTheCpu) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 5);
  const std::int64_t batch = 128, in = 784, out = 256;
  const auto bf16 = [&](const Shape& s) { return test::random_uniform(s, DType::kF32, gen).to(DType::kBF16); };
  const Tensor x = bf16({batch, in}), w = bf16({out, in}), b = bf16({out}), dy = bf16({batch, out});
  const auto f64 = [](const Tensor& t) { return test::oracle_copy(t.to(DType::kF32)); };
  cuda::CublasLtGemm gemm;

  // Forward with bias + ReLU + mask.
  const Tensor y = poisoned_bf16({batch, out});
  const Tensor mask = Tensor::zeros({static_cast<std::int64_t>(cuda::relu_mask_bytes(batch, out))}, DType::kU8, gpu());
  const Tensor dx_ = x.to(gpu()), dw_ = w.to(gpu()), db_ = b.to(gpu()), ddy = dy.to(gpu());
  gemm.run({.m = batch, .n = out, .k = in, .trans_a = false, .trans_b = true, .precision = cuda::GemmPrecision::kBF16,
            .epilogue = cuda::GemmEpilogue::kReluAuxBias},
           {.a = dx_.raw_data(), .b = dw_.raw_data(), .c = y.raw_data(), .bias = db_.raw_data(), .aux = mask.raw_data()},
           stream());
  Tensor ref_z = Tensor::empty({batch, out}, DType::kF64);
  ops::gemm(f64(x), false, f64(w), true, ref_z);
  ops::add_bias(ref_z, f64(b));
  Tensor ref_y = Tensor::empty({batch, out}, DType::kF64);
  ops::activation_forward(Activation::kReLU, ref_z, ref_y);
  // |z| ~ sqrt(784)/3 ~ 10; fp32 accumulation then one bf16 rounding (at most 2^-8 relative).
  test::expect_allclose(widened(y), ref_y, 1e-2, 4e-3, "relu(x w^T + b) bf16");

  // Backward of the layer below through the mask: dX = (dY W) * (z > 0), here with the mask of Y.
  const Tensor dz = poisoned_bf16({batch, out});
  const Tensor w_sq = bf16({out, out});
  const Tensor dw_sq = w_sq.to(gpu());
  gemm.run({.m = batch, .n = out, .k = out, .precision = cuda::GemmPrecision::kBF16,
            .epilogue = cuda::GemmEpilogue::kDRelu},
           {.a = ddy.raw_data(), .b = dw_sq.raw_data(), .c = dz.raw_data(), .aux = mask.raw_data()}, stream());
  Tensor ref_dz = Tensor::empty({batch, out}, DType::kF64);
  ops::gemm(f64(dy), false, f64(w_sq), false, ref_dz);
  // The kink where the forward put it: the mask holds the GPU's z > 0 (z accumulated in fp32), and where
  // |z| is within rounding of 0 the oracle's fp64 z can have the other sign (seed 55380740316 met one:
  // 4.3 against 0). So the oracle masks with the GPU's y, which is > 0 exactly where its z was.
  const Tensor gpu_y = f64(y.to(Device::cpu()));
  Tensor ref_masked = Tensor::empty({batch, out}, DType::kF64);
  ops::activation_backward(Activation::kReLU, gpu_y, gpu_y, ref_dz, ref_masked);
  test::expect_allclose(widened(dz), ref_masked, 1e-2, 4e-3, "(dY W) * relu' bf16");

  // Weight gradient in fp32 with the bias gradient fused.
  const Tensor dw = test::poisoned({out, in}, DType::kF32, gpu());
  const Tensor dbias = test::poisoned({out}, DType::kF32, gpu());
  const cuda::GemmDesc wgrad{.m = out, .n = in, .k = batch, .trans_a = true, .trans_b = false,
                             .precision = cuda::GemmPrecision::kBF16, .c_f32 = true,
                             .epilogue = cuda::GemmEpilogue::kBiasGradA};
  if (!gemm.supported(wgrad)) GTEST_SKIP() << "cuBLASLt has no BGRADB kernel here (the plan falls back to sum_rows)";
  gemm.run(wgrad, {.a = ddy.raw_data(), .b = dx_.raw_data(), .c = dw.raw_data(), .bias = dbias.raw_data()}, stream());
  Tensor ref_dw = Tensor::empty({out, in}, DType::kF64);
  ops::gemm(f64(dy), true, f64(x), false, ref_dw);
  Tensor ref_db = Tensor::empty({out}, DType::kF64);
  ops::sum_rows(f64(dy), ref_db);
  // fp32 output: sums of 128 products of O(1) bf16 values, accumulated in fp32.
  test::expect_allclose(dw, ref_dw, 1e-4, 1e-5, "dW = dY^T X");
  test::expect_allclose(dbias, ref_db, 1e-4, 1e-5, "bias gradient fused (BGRADB)");
}

// ------------------------------------------------------------------------------ skinny output layer

// The fused output layer against the CPU: logits = x w^T + b, then the same loss, gradient and count
// as the CPU cross-entropy; then dW, the bias gradient and dX (with the ReLU gradient) from the
// gradient it wrote. fp32 inputs: sums of up to 2048 products in fp32 (~1e-6 relative). The wide
// shapes take the four-at-a-time loads (in % 4 == 0) or not (1030), and the weight gradient runs
// whole and in slices of rows (with scratch; twice, as its counters must reset themselves).
// fp32, bf16 and fp16, on shapes that take every kernel variant: the narrow ones (few elements, or
// rows whose length is no whole number of vectors: 1030), and the wide ones, which in 16 bits run on
// the tensor cores from 1024 rows with 1, 2 and 4 tiles of 8 classes (5, 10, 20), a partial block of
// 16 rows (1500, 4097) and a partial chunk of 32 inputs (520), and below 1024 rows on the FMA kernel.
TEST(GpuStepKernels, SkinnyOutputLayerMatchesTheCpu) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 6);
  for (const DType type : {DType::kF32, DType::kBF16, DType::kF16}) {
    const bool bf16 = type != DType::kF32;  // 16 bits: bf16 or fp16
    const bool fp16 = type == DType::kF16;  // 2^-11 relative a rounding where bf16 has 2^-8
    const cuda::ElementType element = type == DType::kBF16  ? cuda::ElementType::kBF16
                                      : type == DType::kF16 ? cuda::ElementType::kF16
                                                            : cuda::ElementType::kF32;
    for (const auto& [rows, in, classes] : std::vector<std::tuple<std::int64_t, std::int64_t, int>>{
             {1, 3, 2}, {128, 784, 10}, {1000, 256, 10}, {37, 100, 32}, {2048, 1030, 10}, {1000, 784, 10},
             {3000, 784, 10}, {3000, 2048, 10}, {4097, 2048, 10}, {2048, 512, 20}, {1500, 520, 5}}) {
      for (const float smoothing : {0.0f, 0.1f}) {  // label smoothing: the default model's output layer runs it
        const std::string what =
            fmt::format("{}x{}x{} {} smoothing {}", rows, in, classes, dtype_name(type), smoothing);
        // The inputs in the kernels' type; the reference takes the same (rounded) values in f64.
        const Tensor x = test::random_uniform({rows, in}, DType::kF32, gen, 0.0, 1.0).to(type);  // post-ReLU-like
        const Tensor w = test::random_uniform({classes, in}, DType::kF32, gen, -0.1, 0.1).to(type);
        const Tensor b = test::random_uniform({classes}, DType::kF32, gen).to(type);
        const Tensor labels = test::random_labels(rows, classes, gen);
        const double weight = 1.0 / static_cast<double>(rows);

        Tensor ref_logits = Tensor::empty({rows, classes}, DType::kF64);
        ops::gemm(test::oracle_copy(x), false, test::oracle_copy(w), true, ref_logits);
        ops::add_bias(ref_logits, test::oracle_copy(b));
        // The 16-bit kernels round the logits to their type, as cuBLAS's output would be.
        if (bf16) ref_logits = test::oracle_copy(ref_logits.to(type));
        const Tensor ref_loss = Tensor::zeros({1}, DType::kF64);
        const Tensor ref_dlogits = Tensor::empty({rows, classes}, DType::kF64);
        ops::cross_entropy(ref_logits, labels, smoothing, ref_loss, weight, &ref_dlogits, weight);
        const Tensor ref_correct = Tensor::zeros({1}, DType::kI32);
        ops::count_correct(ref_logits, labels, ref_correct);

        const Tensor dx_ = x.to(gpu()), dw_ = w.to(gpu()), db_ = b.to(gpu()), dl_ = labels.to(gpu());
        const Tensor dlogits = test::poisoned({rows, classes}, DType::kF32, gpu());
        const std::int64_t blocks = cuda::skinny_forward_blocks(rows);
        const Tensor block_loss = Tensor::empty({blocks}, DType::kF64, gpu());
        const Tensor block_correct = Tensor::empty({blocks * 8}, DType::kU8, gpu());
        const Tensor blocks_done = Tensor::zeros({4}, DType::kU8, gpu());
        DeviceValue<cuda::StepMetrics> metrics;
        const cuda::SkinnyForwardArgs args{.x = dx_.raw_data(), .w = dw_.raw_data(), .bias = db_.raw_data(),
                                           .type = element, .rows = rows, .in = in, .classes = classes,
                                           .labels = dl_.data<std::int32_t>(), .smoothing = smoothing,
                                           .dlogits = dlogits.data<float>(), .grad_scale = static_cast<float>(weight),
                                           .state = nullptr, .block_loss = block_loss.data<double>(),
                                           .block_correct = static_cast<long long*>(block_correct.raw_data()),
                                           .blocks_done = static_cast<std::uint32_t*>(blocks_done.raw_data()),
                                           .metrics = metrics.get(), .loss_weight = weight};
        for (int run = 0; run < 2; ++run) {  // twice: the block counter must reset itself
          SN_CUDA_CHECK(cuda::launch_skinny_forward_cross_entropy(args, stream()));
        }
        const cuda::StepMetrics got = metrics.read();
        // fp32: only the order of the fp32 sums differs from the f64 reference. bf16: the same, but a
        // sum that lands within its fp32 error of a bf16 rounding boundary rounds the other way: one
        // bf16 step (2^-8 relative) in a logit of |logit| < 4 moves its softmax term by < 0.016 p, and
        // may swap a near tie in the hits. fp16's step is 8x finer: its bounds are bf16's over 8, with room.
        const double loss_tolerance = fp16 ? 2e-4 : bf16 ? 1e-3 : 1e-5;
        EXPECT_NEAR(got.loss_sum, 2.0 * ref_loss.item(), loss_tolerance * ref_loss.item()) << what;
        EXPECT_NEAR(static_cast<double>(got.correct), 2.0 * ref_correct.item(),
                    bf16 ? 2.0 * (1.0 + static_cast<double>(rows) / 500.0) : 0.0)
            << what;
        test::expect_allclose(dlogits, ref_dlogits, (fp16 ? 0.004 : bf16 ? 0.02 : 1e-6) * weight, bf16 ? 1e-3 : 1e-4,
                              "skinny dlogits " + what);

        // Gradients from the GPU's dlogits (the same values the step uses); bf16 stores them rounded.
        // One rounding of an fp32 sum to the type: at most 2^-8 relative in bf16 (5e-3 with the sum's own error; a
        // truncating store, up to 2^-7, fails it), 2^-11 in fp16 (1e-3).
        const double rounding = fp16 ? 1e-3 : bf16 ? 5e-3 : 1e-4;
        const Tensor g = test::oracle_copy(dlogits);
        Tensor ref_dw = Tensor::empty({classes, in}, DType::kF64);
        ops::gemm(g, true, test::oracle_copy(x), false, ref_dw);
        Tensor ref_db = Tensor::empty({classes}, DType::kF64);
        ops::sum_rows(g, ref_db);
        Tensor ref_dx = Tensor::empty({rows, in}, DType::kF64);
        ops::gemm(g, false, test::oracle_copy(w), false, ref_dx);
        Tensor relu_out = test::random_uniform({rows, in}, DType::kF32, gen, -1.0, 1.0);  // ~half masked
        relu_out.data<float>()[0] = 0.5f;  // at least one unit passes: the dX check below always has something to see
        relu_out = relu_out.to(type);
        Tensor ref_masked = Tensor::empty({rows, in}, DType::kF64);
        ops::activation_backward(Activation::kReLU, test::oracle_copy(relu_out), test::oracle_copy(relu_out), ref_dx,
                                 ref_masked);

        const cuda::SkinnySplit split = cuda::skinny_weight_grad_split(rows, in);
        if (rows >= 2048) {
          EXPECT_GT(split.splits, 1) << what << ": the wide shapes must run in slices";
        }
        const Tensor partials = Tensor::empty({std::max<std::int64_t>(split.scratch_floats, 1)}, DType::kF32, gpu());
        const Tensor counters = Tensor::zeros({split.groups}, DType::kI32, gpu());
        for (const bool sliced : {false, true}) {
          const std::string how = what + (sliced ? " in slices" : " whole");
          const cuda::SkinnyScratch scratch{
              .partials = sliced ? partials.data<float>() : nullptr,
              .counters = sliced ? static_cast<std::uint32_t*>(counters.raw_data()) : nullptr};
          const Tensor dw = test::poisoned({classes, in}, type, gpu());
          const Tensor db = test::poisoned({classes}, type, gpu());
          for (int run = 0; run < (sliced ? 2 : 1); ++run) {
            SN_CUDA_CHECK(cuda::launch_skinny_weight_grad(dlogits.data<float>(), classes, dx_.raw_data(), element, rows,
                                                          in, dw.raw_data(), db.raw_data(), stream(), nullptr, nullptr,
                                                          nullptr, scratch));
          }
          const double scale = weight * static_cast<double>(rows);  // sums of `rows` terms of size ~weight
          test::expect_allclose(dw, ref_dw, 1e-6 * scale, rounding, "skinny dW " + how);
          test::expect_allclose(db, ref_db, 1e-6 * scale, rounding, "skinny bias gradient " + how);
        }
        const Tensor dxg = test::poisoned({rows, in}, type, gpu());
        const Tensor d_relu = relu_out.to(gpu());
        SN_CUDA_CHECK(cuda::launch_skinny_input_grad(dlogits.data<float>(), classes, dw_.raw_data(), element, rows, in,
                                                     d_relu.raw_data(), dxg.raw_data(), stream()));
        ASSERT_FALSE(test::all_zero(ref_masked)) << what;
        test::expect_allclose(dxg, ref_masked, 1e-7, rounding, "skinny dX * relu' " + what);
      }
    }
  }
}

}  // namespace
}  // namespace sprintnet
