// Every CUDA op against the CPU backend in fp64 (the oracle), on fresh random
// inputs and shapes from 1x1 to many thousands of blocks, in the spirit of
// ggml's test-backend-ops. Each comparison also checks that every output
// element was written (outputs start as NaN) and that running the op twice
// gives bit-identical results. Each tolerance (norm-wise or elementwise, see
// gpu_compare.h) is stated with its reason where it is defined.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpu_compare.h"
#include "ops_test_util.h"
#include "sprintnet/ops/ops.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using test::gpu;

struct Dims {
  std::int64_t rows, cols;
};
std::string str(Dims d) { return std::to_string(d.rows) + "x" + std::to_string(d.cols); }

// 1x1 and odd sizes for edge handling, MNIST's shapes, and enough rows for thousands of blocks.
inline const std::vector<Dims> kShapes = {{1, 1},     {7, 13},     {128, 784}, {1000, 10},
                                          {33, 1000}, {70000, 10}, {2000, 1000}};
// Elementwise grids are capped at 2^16 blocks of 256 threads (16.8M elements): this shape takes the grid-stride
// loop. Only axpy runs it (the loop is the same in every elementwise kernel): 20M elements cost seconds of host time.
inline constexpr Dims kGridStrideShape{5000, 4000};
// Row ops (losses, accuracy) need at least 2 classes for a non-trivial softmax.
inline const std::vector<Dims> kRowShapes = {{1, 2}, {7, 13}, {128, 784}, {1000, 10}, {33, 1000}, {70000, 10}};

// Norm-wise, for results that are sums or single roundings of their inputs: one fp32 rounding is 2^-24 ~ 6e-8
// relative; 1e-6 leaves margin for a few.
inline constexpr double kElementwiseTolerance = 1e-6;
// fp32 sums of up to 70000 terms in a fixed tree of partial sums: the error grows like sqrt(n) * 2^-24
// relative to the result (~1e-6 for 4096 terms in one partial); 1e-5 leaves margin. A wrong kernel is off by
// far more (a missing row or column is ~1e-2 or worse).
inline constexpr double kReductionTolerance = 1e-5;
// Elementwise (allclose) for activations, whose inputs and outputs are O(1) here: expf/erff/tanhf are within
// 2 ulp (CUDA C Programming Guide, "Mathematical Functions"), plus a few roundings around them, so every
// element is within ~5e-7 absolute of the exact value; 2e-6 leaves margin. (Norm-wise would be
// ill-conditioned: tanh'(4) = 1 - y*y cancels, GELU(-5) = 0.5x(1 + erf) cancels, harmlessly in absolute terms.)
inline constexpr double kActivationTolerance = 2e-6;
// cuBLASLt fp32 (no TF32) against the fp64 product, measured against the magnitude of the terms summed,
// |alpha| |op(A)| |op(B)| + |beta| |C|, which is what rounding errors are proportional to: fp32 accumulation
// gives ~3e-8 of it whatever K is (and a cancelled element of C does not blow the ratio up), so 1e-6 leaves
// margin while TF32 (2^-11 per product, ~1e-5 of it at K = 4096) or a missing term would fail.
inline constexpr double kGemmTolerance = 1e-6;

// ---------------------------------------------------------------------------------------------- gemm

struct GemmCase {
  std::int64_t m, n, k;
};
inline const std::vector<GemmCase> kGemmCases = {{1, 1, 1},     {7, 13, 5},     {128, 784, 256}, {1000, 10, 784},
                                                 {64, 64, 4096}, {513, 257, 129}, {256, 1024, 784}};

std::string str(GemmCase g, bool ta, bool tb) {
  return "m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
         (ta ? " a^T" : " a") + (tb ? " b^T" : " b");
}

// |x| elementwise, of an fp64 CPU tensor.
Tensor absolute(const Tensor& t) {
  auto v = t.to_vector<double>();
  for (double& x : v) x = std::abs(x);
  return Tensor::from_vector(v, t.shape());
}

TEST(GpuOps, GemmMatchesOracleForAllTransposes) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  for (const GemmCase g : kGemmCases) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const std::string what = str(g, ta, tb);
        const Tensor a = test::random_uniform(ta ? Shape{g.k, g.m} : Shape{g.m, g.k}, DType::kF32, gen);
        const Tensor b = test::random_uniform(tb ? Shape{g.n, g.k} : Shape{g.k, g.n}, DType::kF32, gen);
        const Tensor c = test::random_uniform({g.m, g.n}, DType::kF32, gen);
        const Tensor a_gpu = a.to(gpu()), b_gpu = b.to(gpu());

        // alpha and beta both in play.
        const Tensor ref = test::oracle_copy(c);
        ops::gemm(test::oracle_copy(a), ta, test::oracle_copy(b), tb, ref, 0.75, -0.5);
        const Tensor magnitude = absolute(test::oracle_copy(c));
        ops::gemm(absolute(test::oracle_copy(a)), ta, absolute(test::oracle_copy(b)), tb, magnitude, 0.75, 0.5);
        const Tensor c1 = c.to(gpu()), c2 = c.to(gpu());
        ops::gemm(a_gpu, ta, b_gpu, tb, c1, 0.75, -0.5);
        ops::gemm(a_gpu, ta, b_gpu, tb, c2, 0.75, -0.5);
        test::expect_matches_oracle(c1, ref, kGemmTolerance, what + " beta=-0.5", &magnitude);
        test::expect_bit_identical(c1, c2, what);

        // beta = 0 must not read C: poisoned with NaN.
        const Tensor ref0 = Tensor::zeros({g.m, g.n}, DType::kF64);
        ops::gemm(test::oracle_copy(a), ta, test::oracle_copy(b), tb, ref0, 1.0, 0.0);
        const Tensor magnitude0 = Tensor::zeros({g.m, g.n}, DType::kF64);
        ops::gemm(absolute(test::oracle_copy(a)), ta, absolute(test::oracle_copy(b)), tb, magnitude0, 1.0, 0.0);
        const Tensor c0 = test::poisoned({g.m, g.n}, DType::kF32, gpu());
        ops::gemm(a_gpu, ta, b_gpu, tb, c0, 1.0, 0.0);
        test::expect_matches_oracle(c0, ref0, kGemmTolerance, what + " beta=0", &magnitude0);
      }
    }
  }
}

// Row slices of matrices with an odd number of columns start 4 bytes off any vector boundary:
// cuBLASLt must be told (a kernel chosen for 16-byte alignment would fault or read wrong data).
TEST(GpuOps, GemmOnMisalignedRowSlices) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  const std::int64_t m = 37, n = 29, k = 53;
  const Tensor a_big = test::random_uniform({m + 1, k}, DType::kF32, gen);
  const Tensor b_big = test::random_uniform({k + 1, n}, DType::kF32, gen);
  const Tensor a = a_big.slice_rows(1, m + 1), b = b_big.slice_rows(1, k + 1);
  const Tensor ref = Tensor::zeros({m, n}, DType::kF64);
  ops::gemm(test::oracle_copy(a), false, test::oracle_copy(b), false, ref, 1.0, 0.0);
  const Tensor c_big = test::poisoned({m + 1, n}, DType::kF32, gpu());
  const Tensor c = c_big.slice_rows(1, m + 1);
  const Tensor magnitude = Tensor::zeros({m, n}, DType::kF64);
  ops::gemm(absolute(test::oracle_copy(a)), false, absolute(test::oracle_copy(b)), false, magnitude, 1.0, 0.0);
  ops::gemm(a_big.to(gpu()).slice_rows(1, m + 1), false, b_big.to(gpu()).slice_rows(1, k + 1), false, c, 1.0, 0.0);
  test::expect_matches_oracle(c, ref, kGemmTolerance, "misaligned gemm", &magnitude);
  EXPECT_FALSE(test::all_finite(c_big.slice_rows(0, 1))) << "row 0 lies outside c and must stay untouched (NaN)";
}

TEST(GpuOps, GemmWithEmptyInnerDimensionScalesC) {
  SN_REQUIRE_GPU();
  const Tensor a = Tensor::empty({3, 0}, DType::kF32, gpu()), b = Tensor::empty({0, 4}, DType::kF32, gpu());
  const Tensor c = test::poisoned({3, 4}, DType::kF32, gpu());
  ops::gemm(a, false, b, false, c, 1.0, 0.0);
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(12, 0.0f));
  ops::fill(c, 2.0);
  ops::gemm(a, false, b, false, c, 1.0, -1.5);
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(12, -3.0f));
}

// ---------------------------------------------------------------------------------------------- elementwise

TEST(GpuOps, AxpyMatchesOracle) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  std::vector<Dims> shapes = kShapes;
  shapes.push_back(kGridStrideShape);
  for (const Dims d : shapes) {
    const Tensor y = test::random_uniform({d.rows, d.cols}, DType::kF32, gen);
    const Tensor x = test::random_uniform({d.rows, d.cols}, DType::kF32, gen);
    const Tensor ref = test::oracle_copy(y);
    ops::axpy(ref, test::oracle_copy(x), -0.75);
    const Tensor x_gpu = x.to(gpu()), y1 = y.to(gpu()), y2 = y.to(gpu());
    ops::axpy(y1, x_gpu, -0.75);
    ops::axpy(y2, x_gpu, -0.75);
    test::expect_matches_oracle(y1, ref, kElementwiseTolerance, "axpy " + str(d));
    test::expect_bit_identical(y1, y2, "axpy " + str(d));
  }
}

TEST(GpuOps, AddBiasMatchesOracle) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  for (const Dims d : kShapes) {
    const Tensor y = test::random_uniform({d.rows, d.cols}, DType::kF32, gen);
    const Tensor bias = test::random_uniform({d.cols}, DType::kF32, gen);
    const Tensor ref = test::oracle_copy(y);
    ops::add_bias(ref, test::oracle_copy(bias));
    const Tensor y_gpu = y.to(gpu());
    ops::add_bias(y_gpu, bias.to(gpu()));
    test::expect_matches_oracle(y_gpu, ref, kElementwiseTolerance, "add_bias " + str(d));
  }
}

TEST(GpuOps, SumRowsMatchesOracleAndIsDeterministic) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  for (const Dims d : kShapes) {
    const Tensor x = test::random_uniform({d.rows, d.cols}, DType::kF32, gen);
    const Tensor out = test::random_uniform({d.cols}, DType::kF32, gen);
    const Tensor x_gpu = x.to(gpu());
    // beta = 0.5 accumulates into out; beta = 0 must ignore the NaN there.
    const Tensor ref = test::oracle_copy(out);
    ops::sum_rows(test::oracle_copy(x), ref, 0.5);
    const Tensor out1 = out.to(gpu()), out2 = out.to(gpu());
    ops::sum_rows(x_gpu, out1, 0.5);
    ops::sum_rows(x_gpu, out2, 0.5);
    test::expect_matches_oracle(out1, ref, kReductionTolerance, "sum_rows beta=0.5 " + str(d));
    test::expect_bit_identical(out1, out2, "sum_rows " + str(d));

    const Tensor ref0 = Tensor::zeros({d.cols}, DType::kF64);
    ops::sum_rows(test::oracle_copy(x), ref0, 0.0);
    const Tensor out0 = test::poisoned({d.cols}, DType::kF32, gpu());
    ops::sum_rows(x_gpu, out0, 0.0);
    test::expect_matches_oracle(out0, ref0, kReductionTolerance, "sum_rows beta=0 " + str(d));
  }
}

class GpuActivationTest : public testing::TestWithParam<Activation> {};

// Uniform in [-5, 5], except that the first element is positive: a 1x1 ReLU of a negative input would give an
// all-zero reference, which proves nothing.
Tensor activation_input(Dims d, Generator& gen) {
  auto v = test::random_uniform({d.rows, d.cols}, DType::kF64, gen, -5.0, 5.0).to_vector<double>();
  v[0] = std::abs(v[0]) + 0.25;
  return Tensor::from_vector(v, {d.rows, d.cols}).to(DType::kF32);
}

TEST_P(GpuActivationTest, ForwardAndBackwardMatchOracle) {
  SN_REQUIRE_GPU();
  const Activation act = GetParam();
  Generator gen(test::test_seed());
  for (const Dims d : kShapes) {
    const std::string what = std::string(ops::activation_name(act)) + " " + str(d);
    const Tensor x = activation_input(d, gen);
    const Tensor dy = test::random_uniform({d.rows, d.cols}, DType::kF32, gen);
    const Tensor x_gpu = x.to(gpu()), dy_gpu = dy.to(gpu());

    const Tensor y_ref = Tensor::zeros(x.shape(), DType::kF64);
    ops::activation_forward(act, test::oracle_copy(x), y_ref);
    const Tensor y1 = test::poisoned(x.shape(), DType::kF32, gpu()), y2 = test::poisoned(x.shape(), DType::kF32, gpu());
    ops::activation_forward(act, x_gpu, y1);
    ops::activation_forward(act, x_gpu, y2);
    test::expect_allclose(y1, y_ref, kActivationTolerance, kActivationTolerance, "forward " + what);
    test::expect_bit_identical(y1, y2, "forward " + what);
    const Tensor in_place = x_gpu.clone();
    ops::activation_forward(act, in_place, in_place);
    test::expect_bit_identical(in_place, y1, "in-place forward " + what);

    // Backward on the GPU's own forward output; the oracle gets exactly those values.
    const Tensor dx_ref = Tensor::zeros(x.shape(), DType::kF64);
    ops::activation_backward(act, test::oracle_copy(x), test::oracle_copy(y1), test::oracle_copy(dy), dx_ref);
    const Tensor dx1 = test::poisoned(x.shape(), DType::kF32, gpu()), dx2 = test::poisoned(x.shape(), DType::kF32, gpu());
    ops::activation_backward(act, x_gpu, y1, dy_gpu, dx1);
    ops::activation_backward(act, x_gpu, y1, dy_gpu, dx2);
    test::expect_allclose(dx1, dx_ref, kActivationTolerance, kActivationTolerance, "backward " + what);
    test::expect_bit_identical(dx1, dx2, "backward " + what);
  }
}

INSTANTIATE_TEST_SUITE_P(All, GpuActivationTest,
                         testing::Values(Activation::kIdentity, Activation::kReLU, Activation::kGELU,
                                         Activation::kTanh, Activation::kSigmoid, Activation::kSiLU),
                         [](const testing::TestParamInfo<Activation>& param_info) {
                           return std::string(ops::activation_name(param_info.param));
                         });

// ---------------------------------------------------------------------------------------------- losses

// Cross-entropy, in absolute terms (a confident row's loss and gradient cancel to ~0, so relative errors are
// ill-conditioned): a row's log of the exps' sum is in fp32 after a sum of up to 1000 exps in fp32 (relative
// ~1e-6 at worst, so ~1e-6 on the log), the gaps to the maximum (|gap| <= 10) summed in fp32, so each row's loss is
// within ~2e-6 and so is their mean; softmax = exp(x - max) / sum is within ~1e-6 of itself (<= 1). 1e-5 in units of
// the mean loss (loss_scale = 1/rows) and of grad_scale leaves margin; a wrong kernel is off by ~1e-2 or more.
inline constexpr double kCrossEntropyTolerance = 1e-5;

TEST(GpuOps, CrossEntropyMatchesOracleAndIsDeterministic) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  for (const double smoothing : {0.0, 0.1}) {
    for (const DType sum_dtype : {DType::kF32, DType::kF64}) {
      for (const Dims d : kRowShapes) {
        const std::string what = "cross_entropy " + str(d) + " smoothing=" + std::to_string(smoothing) + " sum " +
                                 std::string(dtype_name(sum_dtype));
        const Tensor logits = test::random_uniform({d.rows, d.cols}, DType::kF32, gen, -5.0, 5.0);
        const Tensor labels = test::random_labels(d.rows, d.cols, gen);
        const double loss_scale = 1.0 / static_cast<double>(d.rows), grad_scale = 0.5 / static_cast<double>(d.rows);

        const Tensor loss_ref = Tensor::full({1}, 0.5, DType::kF64);
        const Tensor grad_ref = Tensor::zeros(logits.shape(), DType::kF64);
        ops::cross_entropy(test::oracle_copy(logits), labels, smoothing, loss_ref, loss_scale, &grad_ref, grad_scale);

        const Tensor logits_gpu = logits.to(gpu()), labels_gpu = labels.to(gpu());
        Tensor loss[2], grad[2];
        for (int run = 0; run < 2; ++run) {
          loss[run] = Tensor::full({1}, 0.5, sum_dtype, gpu());
          grad[run] = test::poisoned(logits.shape(), DType::kF32, gpu());
          ops::cross_entropy(logits_gpu, labels_gpu, smoothing, loss[run], loss_scale, &grad[run], grad_scale);
        }
        test::expect_allclose(loss[0], loss_ref, kCrossEntropyTolerance, 0.0, "loss of " + what);
        test::expect_allclose(grad[0], grad_ref, kCrossEntropyTolerance * grad_scale, 0.0, "gradient of " + what);
        test::expect_bit_identical(loss[0], loss[1], "loss of " + what);
        test::expect_bit_identical(grad[0], grad[1], "gradient of " + what);

        // Loss only: the same value.
        const Tensor loss_only = Tensor::full({1}, 0.5, sum_dtype, gpu());
        ops::cross_entropy(logits_gpu, labels_gpu, smoothing, loss_only, loss_scale, nullptr, grad_scale);
        test::expect_bit_identical(loss_only, loss[0], "loss without gradient of " + what);
      }
    }
  }
}

// Logits far from 0 (a diverged model's): the CPU twin's exact cases (loss_test.cpp, LogitsOfAnyMagnitudeKeepTheirLoss),
// against the CPU op. lse - x_label rounded these losses to 0 and softmax = exp(x - lse) to 1 for equal logits near
// FLT_MAX. Without smoothing for 3e38: its fp32 gaps overflow where smoothing would use them (the CPU sums them in
// double). Tolerance: kCrossEntropyTolerance, absolute where the loss is 0.
TEST(GpuOps, CrossEntropyOfLogitsOfAnyMagnitude) {
  SN_REQUIRE_GPU();
  std::vector<float> ramp;
  for (int c = 0; c < 10; ++c) ramp.push_back(1e9f + 128.0f * static_cast<float>(c));
  const std::vector<std::pair<std::vector<float>, std::int32_t>> rows = {
      {std::vector<float>(10, 1e9f), 3}, {std::vector<float>(10, 3e38f), 0}, {ramp, 9}};
  for (const double smoothing : {0.0, 0.1}) {
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const std::string what = "row " + std::to_string(r) + " smoothing " + std::to_string(smoothing);
      const Tensor logits = Tensor::from_vector(rows[r].first, {1, 10});
      const Tensor labels = Tensor::from_vector<std::int32_t>({rows[r].second}, {1});
      const Tensor loss_ref = Tensor::zeros({1}, DType::kF64), grad_ref = Tensor::zeros({1, 10}, DType::kF64);
      ops::cross_entropy(test::oracle_copy(logits), labels, smoothing, loss_ref, 1.0, &grad_ref, 1.0);
      const Tensor loss = Tensor::zeros({1}, DType::kF64, gpu());
      const Tensor grad = test::poisoned({1, 10}, DType::kF32, gpu());
      ops::cross_entropy(logits.to(gpu()), labels.to(gpu()), smoothing, loss, 1.0, &grad, 1.0);
      EXPECT_NEAR(loss.to(Device::cpu()).item(), loss_ref.item(),
                  kCrossEntropyTolerance * std::max(1.0, loss_ref.item())) << what;
      test::expect_allclose(grad, grad_ref, kCrossEntropyTolerance, 0.0, "gradient of " + what);
    }
  }
}

TEST(GpuOps, MseMatchesOracle) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  for (const Dims d : kRowShapes) {
    const std::string what = "mse " + str(d);
    const Tensor pred = test::random_uniform({d.rows, d.cols}, DType::kF32, gen);
    const Tensor labels = test::random_labels(d.rows, d.cols, gen);
    const double loss_scale = 1.0 / static_cast<double>(d.rows), grad_scale = 1.0 / static_cast<double>(d.rows);
    const Tensor loss_ref = Tensor::full({1}, 0.25, DType::kF64);
    const Tensor grad_ref = Tensor::zeros(pred.shape(), DType::kF64);
    ops::mse_one_hot(test::oracle_copy(pred), labels, loss_ref, loss_scale, &grad_ref, grad_scale);

    const Tensor pred_gpu = pred.to(gpu()), labels_gpu = labels.to(gpu());
    Tensor loss[2], grad[2];
    for (int run = 0; run < 2; ++run) {
      loss[run] = Tensor::full({1}, 0.25, DType::kF32, gpu());
      grad[run] = test::poisoned(pred.shape(), DType::kF32, gpu());
      ops::mse_one_hot(pred_gpu, labels_gpu, loss[run], loss_scale, &grad[run], grad_scale);
    }
    test::expect_matches_oracle(loss[0], loss_ref, kReductionTolerance, "loss of " + what);
    test::expect_matches_oracle(grad[0], grad_ref, kElementwiseTolerance, "gradient of " + what);
    test::expect_bit_identical(loss[0], loss[1], "loss of " + what);
    test::expect_bit_identical(grad[0], grad[1], "gradient of " + what);
    // The loss alone (evaluation: no gradient, its own path in mse.cu), into an fp64 sum as evaluate() keeps it:
    // the same loss as the run with the gradient.
    const Tensor loss_only = Tensor::full({1}, 0.25, DType::kF64, gpu());
    ops::mse_one_hot(pred_gpu, labels_gpu, loss_only, loss_scale, nullptr, grad_scale);
    test::expect_matches_oracle(loss_only, loss_ref, kReductionTolerance, "loss alone of " + what);
  }
}

// Labels built so the count is known: in one pass the even rows, in a second the odd rows, are labelled with
// their first maximum (hits); every other row gets a later tied maximum where the row has one (a miss, since
// the first index wins) or else a class below the maximum (a miss). Each pass then adds a known number strictly
// between 0 and rows (rows >= 2), so a kernel that writes nothing, counts every row, drops a partial warp or
// block, or breaks ties the other way is caught; with one row the two passes expect 1 and 0.
TEST(GpuOps, CountCorrectMatchesOracleWithTies) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  constexpr int kStart = 7;  // the counter accumulates: it starts non-zero on both sides
  for (const Dims d : kRowShapes) {
    // Integer logits in [0, 3]: many rows have tied maxima, which the first index must win.
    const Tensor logits = test::random_integers({d.rows, d.cols}, DType::kF32, gen, 0, 3);
    const auto x = logits.to_vector<float>();
    for (const std::int64_t hit_parity : {0, 1}) {
      std::vector<std::int32_t> y(static_cast<std::size_t>(d.rows));
      std::int64_t hits = 0;
      for (std::int64_t r = 0; r < d.rows; ++r) {
        const float* row = x.data() + r * d.cols;
        const auto first_max = static_cast<std::int32_t>(std::max_element(row, row + d.cols) - row);
        std::int32_t label = first_max;
        if (r % 2 == hit_parity) {
          ++hits;
        } else {
          // The last tied maximum after the first, or else a class below the maximum (with no later tie,
          // every other class is below it, and cols >= 2).
          label = -1;
          for (std::int32_t c = first_max + 1; c < d.cols; ++c) {
            if (row[c] == row[first_max]) label = c;
          }
          for (std::int32_t c = 0; label < 0 && c < d.cols; ++c) {
            if (row[c] < row[first_max]) label = c;
          }
          ASSERT_GE(label, 0) << "row " << r << " of " << str(d);
        }
        y[static_cast<std::size_t>(r)] = label;
      }
      const Tensor labels = Tensor::from_vector(y, {d.rows});
      const std::string what = "count_correct " + str(d) + " hits on rows of parity " + std::to_string(hit_parity);
      const Tensor ref = Tensor::full({1}, kStart, DType::kI32);
      ops::count_correct(logits, labels, ref);
      ASSERT_EQ(ref.item(), static_cast<double>(kStart + hits)) << what << ": the oracle disagrees with the labels";
      if (d.rows >= 2) {  // neither "nothing counted" nor "every row counted" can pass
        EXPECT_GT(ref.item(), kStart) << what;
        EXPECT_LT(ref.item(), static_cast<double>(kStart + d.rows)) << what;
      }
      const Tensor correct = Tensor::full({1}, kStart, DType::kI32, gpu());
      ops::count_correct(logits.to(gpu()), labels.to(gpu()), correct);
      EXPECT_EQ(correct.item(), ref.item()) << what;
    }
  }
}

// ---------------------------------------------------------------------------------------------- optimizers

inline const std::vector<std::int64_t> kParamSizes = {1, 91, 100352, 1000000};
// Elementwise (allclose): parameters, gradients and buffers are O(1) here; an update is a few fp32 operations
// (sqrtf and the division correctly rounded, no fast math), each within 2^-24 ~ 6e-8 of its operands'
// magnitude, so ~3e-7 absolute at worst; 1e-6 leaves margin. (Norm-wise would be ill-conditioned for n = 1,
// where p - lr * d may cancel.)
inline constexpr double kOptimizerTolerance = 1e-6;

TEST(GpuOps, SgdMatchesOracle) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  const std::vector<SgdHyper> configs = {
      SgdHyper{.lr = 0.1},
      SgdHyper{.lr = 0.05, .momentum = 0.9, .first_step = true},
      SgdHyper{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-2, .nesterov = true,
               .first_step = false},
      SgdHyper{.lr = 0.02, .momentum = 0.5, .weight_decay = 5e-4, .first_step = false}};
  for (std::size_t ci = 0; ci < configs.size(); ++ci) {
    const SgdHyper& h = configs[ci];
    for (const std::int64_t n : kParamSizes) {
      const std::string what = "sgd config " + std::to_string(ci) + " n=" + std::to_string(n);
      const Tensor param = test::random_uniform({n}, DType::kF32, gen);
      const Tensor grad = test::random_uniform({n}, DType::kF32, gen);
      // On a first step the buffer must not be read: NaN.
      const Tensor buf = h.first_step ? test::poisoned({n}, DType::kF32) : test::random_uniform({n}, DType::kF32, gen);
      const bool momentum = h.momentum != 0.0;

      const Tensor p_ref = test::oracle_copy(param), b_ref = test::oracle_copy(buf);
      ops::sgd_step(p_ref, test::oracle_copy(grad), momentum ? &b_ref : nullptr, h);
      const Tensor p_gpu = param.to(gpu()), b_gpu = buf.to(gpu());
      ops::sgd_step(p_gpu, grad.to(gpu()), momentum ? &b_gpu : nullptr, h);
      test::expect_allclose(p_gpu, p_ref, kOptimizerTolerance, kOptimizerTolerance, "param of " + what);
      if (momentum) test::expect_allclose(b_gpu, b_ref, kOptimizerTolerance, kOptimizerTolerance, "buffer of " + what);
    }
  }
}

TEST(GpuOps, AdamMatchesOracle) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  const std::vector<AdamHyper> configs = {
      AdamHyper{.lr = 1e-3, .step = 1},
      AdamHyper{.lr = 1e-3, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 1e-2, .step = 3},
      AdamHyper{.lr = 3e-3, .weight_decay = 0.1, .decoupled = true, .step = 7}};
  for (std::size_t ci = 0; ci < configs.size(); ++ci) {
    const AdamHyper& h = configs[ci];
    for (const std::int64_t n : kParamSizes) {
      const std::string what = "adam config " + std::to_string(ci) + " n=" + std::to_string(n);
      const Tensor param = test::random_uniform({n}, DType::kF32, gen);
      const Tensor grad = test::random_uniform({n}, DType::kF32, gen);
      const Tensor m = test::random_uniform({n}, DType::kF32, gen, -0.1, 0.1);
      const Tensor v = test::random_uniform({n}, DType::kF32, gen, 0.0, 0.1);
      const Tensor p_ref = test::oracle_copy(param), m_ref = test::oracle_copy(m), v_ref = test::oracle_copy(v);
      ops::adam_step(p_ref, test::oracle_copy(grad), m_ref, v_ref, h);
      const Tensor p_gpu = param.to(gpu()), m_gpu = m.to(gpu()), v_gpu = v.to(gpu());
      ops::adam_step(p_gpu, grad.to(gpu()), m_gpu, v_gpu, h);
      test::expect_allclose(p_gpu, p_ref, kOptimizerTolerance, kOptimizerTolerance, "param of " + what);
      test::expect_allclose(m_gpu, m_ref, kOptimizerTolerance, kOptimizerTolerance, "exp_avg of " + what);
      test::expect_allclose(v_gpu, v_ref, kOptimizerTolerance, kOptimizerTolerance, "exp_avg_sq of " + what);
    }
  }
}

// ---------------------------------------------------------------------------------------------- data

TEST(GpuOps, GatherRowsMatchesOracle) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  for (const std::int64_t cols : {784, 13, 4}) {  // vectorised (cols % 4 == 0) and scalar paths
    for (const std::int64_t count : {1, 128, 10000}) {
      const std::int64_t rows = 1000;
      std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * cols));
      for (auto& b : bytes) b = static_cast<std::uint8_t>(gen.below(256));
      const Tensor src = Tensor::from_vector(bytes, {rows, cols});
      const Tensor indices = test::random_labels(count, rows, gen);
      const Tensor ref = Tensor::zeros({count, cols}, DType::kF64);
      ops::gather_rows_u8(src, indices, ref, 1.0 / 255.0, -0.5);
      const Tensor dst = test::poisoned({count, cols}, DType::kF32, gpu());
      ops::gather_rows_u8(src.to(gpu()), indices.to(gpu()), dst, 1.0 / 255.0, -0.5);
      test::expect_matches_oracle(dst, ref, kElementwiseTolerance,
                                  "gather_rows_u8 cols=" + std::to_string(cols) + " count=" + std::to_string(count));
    }
  }
}

TEST(GpuOps, GatherLabelsMatchesOracle) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  for (const std::int64_t count : {1, 128, 100000}) {
    const Tensor labels = test::random_labels(60000, 10, gen);
    const Tensor indices = test::random_labels(count, 60000, gen);
    const Tensor ref = Tensor::zeros({count}, DType::kI32);
    ops::gather_labels(labels, indices, ref);
    const Tensor dst = test::poisoned({count}, DType::kI32, gpu());
    ops::gather_labels(labels.to(gpu()), indices.to(gpu()), dst);
    EXPECT_EQ(dst.to_vector<std::int32_t>(), ref.to_vector<std::int32_t>()) << "count=" << count;
  }
}

// ---------------------------------------------------------------------------------------------- errors

// A bad label cannot throw inside a kernel: it is recorded and reported at the next synchronisation.
TEST(GpuOps, OutOfRangeLabelIsReportedAtSynchronize) {
  SN_REQUIRE_GPU();
  Backend& backend = backend_for(gpu());
  std::vector<std::int32_t> y(8, 3);
  y[5] = 12;
  const Tensor labels = Tensor::from_vector(y, {8}, gpu());
  const Tensor logits = Tensor::zeros({8, 10}, DType::kF32, gpu());
  const Tensor loss = Tensor::zeros({1}, DType::kF32, gpu());
  const Tensor grad = test::poisoned({8, 10}, DType::kF32, gpu());
  ops::cross_entropy(logits, labels, 0.0, loss, 1.0, &grad, 1.0);
  EXPECT_TRUE(test::throws_error_containing([&] { backend.synchronize(); }, "label 12 at row 5 outside [0, 10)"));
  EXPECT_NO_THROW(backend.synchronize()) << "an error is reported once";

  // Reported by a copy to the host too (loss.item()), and the backend stays usable afterwards.
  ops::mse_one_hot(logits, labels, loss, 1.0, nullptr, 1.0);
  EXPECT_TRUE(test::throws_error_containing([&] { loss.item(); }, "mse: label 12 at row 5"));
  const Tensor good = Tensor::full({8}, 1, DType::kI32, gpu());
  const Tensor fresh = Tensor::zeros({1}, DType::kF32, gpu());
  ops::cross_entropy(logits, good, 0.0, fresh, 1.0, nullptr, 1.0);
  EXPECT_NEAR(fresh.item(), 8.0 * std::log(10.0), 1e-4);  // uniform logits: log(10) a row
}

TEST(GpuOps, OutOfRangeIndexIsReportedAtSynchronize) {
  SN_REQUIRE_GPU();
  Backend& backend = backend_for(gpu());
  const Tensor src = Tensor::zeros({4, 8}, DType::kU8, gpu());
  const Tensor dst = Tensor::zeros({2, 8}, DType::kF32, gpu());
  ops::gather_rows_u8(src, Tensor::from_vector<std::int32_t>({0, 9}, {2}, gpu()), dst, 1.0, 0.0);
  EXPECT_TRUE(test::throws_error_containing([&] { backend.synchronize(); }, "gather_rows_u8: index 9 at position 1"));
  const Tensor labels = Tensor::zeros({4}, DType::kI32, gpu());
  const Tensor out = Tensor::zeros({1}, DType::kI32, gpu());
  ops::gather_labels(labels, Tensor::from_vector<std::int32_t>({-1}, {1}, gpu()), out);
  EXPECT_TRUE(
      test::throws_error_containing([&] { backend.synchronize(); }, "gather_labels: index -1 at position 0 outside [0, 4)"));
}

TEST(GpuOps, Fp64ComputeIsAnErrorNamingTheCpuBackend) {
  SN_REQUIRE_GPU();
  const Tensor y = Tensor::zeros({2, 3}, DType::kF64, gpu());
  const Tensor bias = Tensor::zeros({3}, DType::kF64, gpu());
  EXPECT_TRUE(test::throws_error_containing([&] { ops::add_bias(y, bias); }, "fp64 runs on the CPU backend"));
}

}  // namespace
}  // namespace sprintnet
