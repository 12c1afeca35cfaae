// The kernels of the compiled training step (ops/cuda/step_launch.h), each
// against its CPU twin: outputs poisoned first, fresh random inputs, tolerances
// stated where they are used. The loss, the optimizer and the cuBLASLt epilogues
// have files of their own (fused_cross_entropy_gpu_test.cpp,
// flat_optimizer_gpu_test.cpp, gemm_epilogue_gpu_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "gpu_compare.h"
#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/random.h"
#include "sprintnet/ops/cuda/cuda_backend.h"
#include "sprintnet/ops/cuda/step_launch.h"
#include "sprintnet/ops/ops.h"
#include "step_kernel_util.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using test::DeviceValue;
using test::element_type;
using test::gpu;

cudaStream_t stream() { return test::gpu_stream(); }  // the backend's, which the kernels are launched on

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
    const cuda::ElementType element = element_type(type);
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
    const cuda::ElementType element = element_type(type);
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
