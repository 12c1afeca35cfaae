// The cuBLASLt products (ops/cuda/gemm.h) in every GemmPrecision with every GemmEpilogue, against the CPU
// backend in fp64. Each epilogue runs in the product where the compiled step runs it (cuda_train_plan.cpp):
// the forward Y = X W^T (bias, ReLU, ReLU mask), the input gradient through the mask (DRELU), the weight
// gradient dW = dY^T X with the bias gradient (BGRADB). Shapes: odd ones, and the step's. Outputs are poisoned
// first, inputs fresh from test_seed(), and each epilogue is shown to change the result beyond the tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gpu_compare.h"
#include "ops_test_util.h"
#include "sprintnet/ops/cuda/cuda_backend.h"
#include "sprintnet/ops/cuda/gemm.h"
#include "sprintnet/ops/ops.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using cuda::GemmEpilogue;
using cuda::GemmPrecision;
using test::gpu;

cudaStream_t stream() { return static_cast<cuda::CudaBackend&>(backend_for(gpu())).stream(); }

// A product's types as the compiled step sets them (parse_precision and desc in cuda_train_plan.cpp: C has
// the inputs' type), plus the 16-bit inputs with an fp32 C that GemmDesc::c_f32 offers and the step does not use.
struct Config {
  const char* name;
  GemmPrecision precision;
  DType in;  // A and B
  bool c_f32;
  bool step_uses;
};
void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }
DType out_type(const Config& c) { return c.c_f32 ? DType::kF32 : c.in; }

const Config kConfigs[] = {
    {"fp32", GemmPrecision::kF32, DType::kF32, true, true},
    {"tf32", GemmPrecision::kTF32, DType::kF32, true, true},
    {"bf16", GemmPrecision::kBF16, DType::kBF16, false, true},
    {"fp16", GemmPrecision::kF16, DType::kF16, false, true},
    {"bf16_in_fp32_out", GemmPrecision::kBF16, DType::kBF16, true, false},
    {"fp16_in_fp32_out", GemmPrecision::kF16, DType::kF16, true, false},
};

// A layer's products: forward [rows, in] x [out, in]^T, input gradient [rows, in] x [in, out] (the layer
// above's dX = dY W, its width `in`, into this layer's ReLU), weight gradient [rows, out]^T x [rows, in].
struct Layer {
  std::int64_t rows, in, out;
};
std::string str(const Layer& l) {
  return std::to_string(l.rows) + "x" + std::to_string(l.in) + "->" + std::to_string(l.out);
}
// Odd sizes (partial tiles, mask rows of 5, 33 and 257 bits in words of 128), and the step's: MNIST's first
// layer, an output layer of 10 classes (MSE, or SPRINTNET_SKINNY=0), a tail batch (60000 % 128 = 96).
const Layer kLayers[] = {{1, 1, 1},      {7, 13, 5},     {37, 100, 33},  {128, 784, 256},
                         {128, 256, 10}, {96, 256, 128}, {513, 130, 257}};

// ------------------------------------------------------------------------------------------ tolerance
//
// Elementwise: |gpu - ref| <= (u_out + 2^-24) |ref| + u_prod (|z| + 4 rss) + 4 sqrt(K) 2^-24 mag + floor, where
// z = sum a_i b_i is the product alone (ref adds the bias), mag = sum |a_i b_i|, rss = sqrt(sum (a_i b_i)^2):
// - u_out |ref|: the one rounding to C's type (2^-24 fp32, 2^-8 bf16, 2^-11 fp16), after the epilogue's fp32
//   arithmetic (2^-24 more for the bias addition). ReLU is 1-Lipschitz, so the bound on its input holds after it.
// - u_prod: how far one product a_i b_i is off. bf16 and fp16 inputs are exact in fp32 and so are their
//   products (8x8 and 11x11 bits), and the oracle sees the same rounded inputs: 0. fp32: 2^-24. TF32 keeps 10
//   of fp32's 23 mantissa bits: each input is off by up to 2^-11 relative if rounded, 2^-10 if truncated
//   (toward zero: by 2^-11 on average). u_prod = 2^-10 bounds the shift common to every product (at most
//   2^-10 |z| in all); the rest varies independently from term to term, std at most 2^-10/sqrt(6) rss, which
//   4 * 2^-10 rss covers ~10 times.
// - fp32 accumulation: K - 1 additions, each off by at most 2^-24 of a partial sum no larger than mag,
//   independently: std ~2^-24 sqrt(K/3) mag, so 4 sqrt(K) 2^-24 mag is ~7 standard deviations.
// - floor: C's smallest normal number (fp16 2^-14), which covers a subnormal result flushed to zero.
// - u_out |z| more where a bias is added into 16-bit C: cuBLASLt rounds the product to C's type before it adds
//   the bias (measured on the H200, 2026-11-29: bf16 37x100->33 gave -0.00391 where fp64 says -0.00277, and fp16
//   8.828 against 8.820, two roundings of ~8.8), so a result its bias cancels keeps the product's rounding.
// A wrong or missing bias, ReLU, mask or term is off by O(|a_i b_i|) = O(1) instead.
constexpr double kFp32Roundoff = 0x1p-24;

double out_roundoff(DType t) { return t == DType::kBF16 ? 0x1p-8 : t == DType::kF16 ? 0x1p-11 : kFp32Roundoff; }
double out_floor(DType t) { return t == DType::kF16 ? 0x1p-14 : 0x1p-126; }
double product_roundoff(GemmPrecision p) {
  return p == GemmPrecision::kTF32 ? 0x1p-10 : p == GemmPrecision::kF32 ? kFp32Roundoff : 0.0;
}

// The fp64 oracle of a sum of K terms per element, with the sums that bound its rounding errors.
struct Oracle {
  std::vector<double> z, mag, rss;
  std::int64_t k;
};

Tensor elementwise(const Tensor& t, double (*f)(double)) {
  auto v = t.to_vector<double>();
  for (double& x : v) x = f(x);
  return Tensor::from_vector(v, t.shape());
}
double square(double x) { return x * x; }
double magnitude(double x) { return std::abs(x); }

// op(A) op(B) for the inputs as rounded to their type (A and B on the host).
Oracle oracle_product(const Tensor& a, bool ta, const Tensor& b, bool tb, std::int64_t m, std::int64_t n,
                      std::int64_t k) {
  const Tensor a64 = test::oracle_copy(a), b64 = test::oracle_copy(b);
  const auto product = [&](const Tensor& x, const Tensor& y) {
    const Tensor c = Tensor::zeros({m, n}, DType::kF64);
    ops::gemm(x, ta, y, tb, c);
    return c.to_vector<double>();
  };
  Oracle o{product(a64, b64), product(elementwise(a64, magnitude), elementwise(b64, magnitude)),
           product(elementwise(a64, square), elementwise(b64, square)), k};
  for (double& v : o.rss) v = std::sqrt(v);
  return o;
}

// The sums over the rows of A (the bias gradient of a weight-gradient product whose A is dY).
Oracle oracle_column_sums(const Tensor& a) {
  const Tensor a64 = test::oracle_copy(a);
  const auto sums = [&](const Tensor& x) {
    const Tensor s = Tensor::zeros({a.size(1)}, DType::kF64);
    ops::sum_rows(x, s);
    return s.to_vector<double>();
  };
  Oracle o{sums(a64), sums(elementwise(a64, magnitude)), sums(elementwise(a64, square)), a.size(0)};
  for (double& v : o.rss) v = std::sqrt(v);
  return o;
}

// The tolerance of each element whose exact value is ref (the oracle's z, plus the bias where one is added).
std::vector<double> tolerance(const Oracle& o, const std::vector<double>& ref, const Config& c) {
  const double u_out = out_roundoff(out_type(c)) + kFp32Roundoff, u_prod = product_roundoff(c.precision);
  const double accumulation = 4.0 * std::sqrt(static_cast<double>(o.k)) * kFp32Roundoff;
  std::vector<double> tol(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double rounded_before_bias = out_type(c) != DType::kF32 && ref[i] != o.z[i] ? u_out * std::abs(o.z[i]) : 0.0;
    tol[i] = u_out * std::abs(ref[i]) + rounded_before_bias + u_prod * (std::abs(o.z[i]) + 4.0 * o.rss[i]) +
             accumulation * o.mag[i] + out_floor(out_type(c));
  }
  return tol;
}

// ------------------------------------------------------------------------------------------ comparisons

// Every element written (outputs start as NaN) and within its tolerance of ref, or of `alternative` where one
// is given (an element whose ReLU kink lies within rounding of the pre-activation). A ReLU of a small product
// may rightly be all zero: the tests show instead that each epilogue's effect exceeds the tolerance somewhere.
void expect_within(const std::vector<double>& gpu, const std::vector<double>& ref, const std::vector<double>& tol,
                   const std::string& what, const std::vector<double>* alternative = nullptr) {
  ASSERT_EQ(gpu.size(), ref.size()) << what;
  std::size_t bad = 0, worst = 0;
  double worst_ratio = 0.0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    double ratio = std::abs(gpu[i] - ref[i]) / tol[i];
    if (alternative != nullptr) ratio = std::min(ratio, std::abs(gpu[i] - (*alternative)[i]) / tol[i]);
    if (std::isnan(ratio)) ratio = std::numeric_limits<double>::infinity();  // still poison: never written
    if (ratio > 1.0) ++bad;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << gpu.size() << " elements off; the worst, element " << worst
                     << ", is " << gpu[worst] << " where the oracle says " << ref[worst] << " (tolerance "
                     << tol[worst] << ")";
}

// Whether `without` (the reference without one epilogue's effect) differs from ref beyond the tolerance
// somewhere: the comparison could tell the epilogue missing.
bool shows(const std::vector<double>& without, const std::vector<double>& ref, const std::vector<double>& tol) {
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::abs(without[i] - ref[i]) > tol[i]) return true;
  }
  return false;
}

std::vector<double> relu(std::vector<double> v) {
  for (double& x : v) x = std::max(x, 0.0);
  return v;
}

// Runs the product where cuBLASLt has an algorithm for it. Where it has none, the compiled step fails too for a
// product it runs without a fallback (`required`); any such refusal must be run()'s clear error, not a silent
// skip. Returns whether the product ran.
bool run_or_expect_refusal(cuda::CublasLtGemm& gemm, const cuda::GemmDesc& desc, const cuda::GemmArgs& args,
                           bool required, const std::string& what) {
  if (gemm.supported(desc)) {
    gemm.run(desc, args, stream());
    return true;
  }
  EXPECT_FALSE(required) << what << ": cuBLASLt has no algorithm for a product the compiled step runs";
  EXPECT_TRUE(test::throws_error_containing([&] { gemm.run(desc, args, stream()); },
                                            "cuBLASLt has no algorithm for gemm m="))
      << what;
  std::printf("[   NOTE   ] %s: cuBLASLt has no algorithm here, and run() says so\n", what.c_str());
  return false;
}

// Drawn in fp32 and rounded to `type` on the host: the oracle's copy holds exactly what the GPU reads.
Tensor draw(const Shape& shape, DType type, Generator& gen) {
  return test::random_uniform(shape, DType::kF32, gen).to(type);
}
// 16-bit buffers are poisoned on the host and copied over.
Tensor poisoned_on_gpu(const Shape& shape, DType type) { return test::poisoned(shape, type).to(gpu()); }
// The ReLU mask of an [m, n] C, its bytes 0x5A (bits of both values) until written.
Tensor poisoned_mask(std::int64_t m, std::int64_t n) {
  return poisoned_on_gpu({static_cast<std::int64_t>(cuda::relu_mask_bytes(m, n))}, DType::kU8);
}

// The ReLU mask of the forward: bit i * relu_mask_ld(n) + j for C[i, j] (cuBLASLt writes it for C^T, column-
// major), least significant bit first within a byte.
bool mask_bit(const std::vector<std::uint8_t>& mask, std::int64_t n, std::int64_t i, std::int64_t j) {
  const std::int64_t bit = i * cuda::relu_mask_ld(n) + j;
  return ((mask[static_cast<std::size_t>(bit / 8)] >> (bit % 8)) & 1) != 0;
}

// ------------------------------------------------------------------------------------------ tests

// A layer's forward inputs on the GPU, and its oracle: the product z = X W^T, and z + bias.
struct Forward {
  Tensor x, w, b;  // on the GPU; the bias has C's type
  Oracle o;
  std::vector<double> biased;
};
Forward draw_forward(const Layer& l, const Config& cfg, Generator& gen) {
  const Tensor x = draw({l.rows, l.in}, cfg.in, gen), w = draw({l.out, l.in}, cfg.in, gen);
  const Tensor b = draw({l.out}, out_type(cfg), gen);
  Forward f{x.to(gpu()), w.to(gpu()), b.to(gpu()), oracle_product(x, false, w, true, l.rows, l.out, l.in), {}};
  const auto bias = b.to_vector<double>();
  f.biased = f.o.z;
  for (std::size_t i = 0; i < f.biased.size(); ++i) f.biased[i] += bias[i % static_cast<std::size_t>(l.out)];
  return f;
}

class GemmEpilogueTest : public testing::TestWithParam<Config> {};

struct ForwardEpilogue {
  GemmEpilogue epilogue;
  bool bias, relu, mask;
  const char* name;
};
const ForwardEpilogue kForward[] = {
    {GemmEpilogue::kNone, false, false, false, "none"},
    {GemmEpilogue::kBias, true, false, false, "bias"},
    {GemmEpilogue::kRelu, false, true, false, "relu"},
    {GemmEpilogue::kReluBias, true, true, false, "relu+bias"},
    {GemmEpilogue::kReluAux, false, true, true, "relu+mask"},
    {GemmEpilogue::kReluAuxBias, true, true, true, "relu+mask+bias"},
};

// Y = epilogue(X W^T): every forward the step runs (enqueue_forward: evaluation without the mask, training with
// it where the backward takes ReLU's gradient from it). The mask is exact wherever the pre-activation is farther
// from 0 than its tolerance (within it, the GPU's fp32 value may have either sign).
TEST_P(GemmEpilogueTest, ForwardBiasReluAndMaskMatchTheCpu) {
  SN_REQUIRE_GPU();
  const Config& cfg = GetParam();
  const DType out = out_type(cfg);
  Generator gen(test::test_seed() + 61);
  cuda::CublasLtGemm gemm;
  struct Shown {
    bool ran = false, bias = false, relu = false, mask_set = false, mask_clear = false;
  };
  std::vector<Shown> shown(std::size(kForward));
  for (const Layer& l : kLayers) {
    const Forward fw = draw_forward(l, cfg, gen);
    const Oracle& o = fw.o;
    const auto tol_plain = tolerance(o, o.z, cfg), tol_biased = tolerance(o, fw.biased, cfg);

    for (std::size_t e = 0; e < std::size(kForward); ++e) {
      const ForwardEpilogue& f = kForward[e];
      const std::string what = std::string(cfg.name) + " forward " + f.name + " " + str(l);
      const Tensor y = poisoned_on_gpu({l.rows, l.out}, out);
      const Tensor mask = f.mask ? poisoned_mask(l.rows, l.out) : Tensor();
      const cuda::GemmDesc desc{.m = l.rows, .n = l.out, .k = l.in, .trans_a = false, .trans_b = true,
                                .precision = cfg.precision, .c_f32 = cfg.c_f32, .epilogue = f.epilogue};
      const cuda::GemmArgs args{.a = fw.x.raw_data(), .b = fw.w.raw_data(), .c = y.raw_data(),
                                .bias = f.bias ? fw.b.raw_data() : nullptr, .aux = f.mask ? mask.raw_data() : nullptr};
      if (!run_or_expect_refusal(gemm, desc, args, cfg.step_uses, what)) continue;
      shown[e].ran = true;

      const std::vector<double>& pre = f.bias ? fw.biased : o.z;
      const std::vector<double>& tol = f.bias ? tol_biased : tol_plain;
      const std::vector<double> expected = f.relu ? relu(pre) : pre;
      expect_within(y.to_vector<double>(), expected, tol, what);
      if (f.bias) shown[e].bias |= shows(f.relu ? relu(o.z) : o.z, expected, tol);
      if (f.relu) shown[e].relu |= shows(pre, expected, tol);
      if (!f.mask) continue;

      const auto bits = mask.to_vector<std::uint8_t>();
      std::int64_t wrong = 0;
      for (std::int64_t i = 0; i < l.rows; ++i) {
        for (std::int64_t j = 0; j < l.out; ++j) {
          const auto at = static_cast<std::size_t>(i * l.out + j);
          if (std::abs(pre[at]) <= tol[at]) continue;
          const bool bit = mask_bit(bits, l.out, i, j);
          (bit ? shown[e].mask_set : shown[e].mask_clear) = true;
          if (bit != (pre[at] > 0.0) && wrong++ == 0) {
            ADD_FAILURE() << what << ": mask bit (" << i << ", " << j << ") is " << bit << " for a pre-activation of "
                          << pre[at];
          }
        }
      }
      EXPECT_EQ(wrong, 0) << what << ": mask bits that disagree with the sign of the pre-activation";
    }
  }
  for (std::size_t e = 0; e < std::size(kForward); ++e) {
    const ForwardEpilogue& f = kForward[e];
    if (!shown[e].ran) continue;  // refused everywhere, and said so
    EXPECT_TRUE(!f.bias || shown[e].bias) << f.name << ": the bias never changed the result beyond the tolerance";
    EXPECT_TRUE(!f.relu || shown[e].relu) << f.name << ": ReLU never changed the result beyond the tolerance";
    EXPECT_TRUE(!f.mask || (shown[e].mask_set && shown[e].mask_clear)) << f.name << ": the mask held one value only";
  }
}

// dH = (dZ V) * relu'(this layer's pre-activation), the ReLU gradient taken from the mask the training forward
// wrote (DRELU, the step's relu_by_epilogue_), and the same product without it. Where the pre-activation is
// within its tolerance of 0 either value of the mask is right, so either result is.
TEST_P(GemmEpilogueTest, InputGradientThroughTheReluMaskMatchesTheCpu) {
  SN_REQUIRE_GPU();
  const Config& cfg = GetParam();
  const DType out = out_type(cfg);
  Generator gen(test::test_seed() + 62);
  cuda::CublasLtGemm gemm;
  bool drelu_ran = false, drelu_shown = false;
  for (const Layer& l : kLayers) {
    // This layer's training forward, for its mask.
    const Forward fw = draw_forward(l, cfg, gen);
    const std::vector<double>& pre = fw.biased;
    const auto tol_pre = tolerance(fw.o, pre, cfg);
    const Tensor y = poisoned_on_gpu({l.rows, l.out}, out);
    const Tensor mask = poisoned_mask(l.rows, l.out);
    const std::string layer = std::string(cfg.name) + " " + str(l);
    if (!run_or_expect_refusal(gemm,
                               {.m = l.rows, .n = l.out, .k = l.in, .trans_a = false, .trans_b = true,
                                .precision = cfg.precision, .c_f32 = cfg.c_f32, .epilogue = GemmEpilogue::kReluAuxBias},
                               {.a = fw.x.raw_data(), .b = fw.w.raw_data(), .c = y.raw_data(),
                                .bias = fw.b.raw_data(), .aux = mask.raw_data()},
                               cfg.step_uses, layer + " forward relu+mask+bias")) {
      continue;
    }

    const Tensor dz = draw({l.rows, l.in}, cfg.in, gen), v = draw({l.in, l.out}, cfg.in, gen);
    const Oracle o = oracle_product(dz, false, v, false, l.rows, l.out, l.in);
    const auto tol = tolerance(o, o.z, cfg);
    std::vector<double> masked = o.z, alternative = o.z;
    for (std::size_t i = 0; i < masked.size(); ++i) {
      if (pre[i] <= 0.0) masked[i] = 0.0;
      alternative[i] = std::abs(pre[i]) <= tol_pre[i] ? o.z[i] - masked[i] : masked[i];
    }
    const Tensor dz_gpu = dz.to(gpu()), v_gpu = v.to(gpu());
    for (const GemmEpilogue e : {GemmEpilogue::kNone, GemmEpilogue::kDRelu}) {
      const bool drelu = e == GemmEpilogue::kDRelu;
      const std::string what = layer + (drelu ? " input gradient with drelu" : " input gradient");
      const Tensor dh = poisoned_on_gpu({l.rows, l.out}, out);
      if (!run_or_expect_refusal(gemm,
                                 {.m = l.rows, .n = l.out, .k = l.in, .precision = cfg.precision, .c_f32 = cfg.c_f32,
                                  .epilogue = e},
                                 {.a = dz_gpu.raw_data(), .b = v_gpu.raw_data(), .c = dh.raw_data(),
                                  .aux = drelu ? mask.raw_data() : nullptr},
                                 cfg.step_uses, what)) {
        continue;
      }
      if (!drelu) {
        expect_within(dh.to_vector<double>(), o.z, tol, what);
        continue;
      }
      drelu_ran = true;
      expect_within(dh.to_vector<double>(), masked, tol, what, &alternative);
      drelu_shown |= shows(o.z, masked, tol);
    }
  }
  EXPECT_TRUE(!drelu_ran || drelu_shown) << "the ReLU gradient never changed the result beyond the tolerance";
}

// dW = dY^T X, alone and with the bias gradient db = sum over the rows of dY fused (BGRADB). The step falls back
// to a column-sum kernel where cuBLASLt has no BGRADB algorithm (bias_grad_fused_), so only that product may be
// refused.
TEST_P(GemmEpilogueTest, WeightGradientAndFusedBiasGradientMatchTheCpu) {
  SN_REQUIRE_GPU();
  const Config& cfg = GetParam();
  const DType out = out_type(cfg);
  Generator gen(test::test_seed() + 63);
  cuda::CublasLtGemm gemm;
  for (const Layer& l : kLayers) {
    const Tensor dy = draw({l.rows, l.out}, cfg.in, gen), x = draw({l.rows, l.in}, cfg.in, gen);
    const Oracle o = oracle_product(dy, true, x, false, l.out, l.in, l.rows);
    const Oracle sums = oracle_column_sums(dy);
    const auto tol = tolerance(o, o.z, cfg), tol_sums = tolerance(sums, sums.z, cfg);
    const Tensor dy_gpu = dy.to(gpu()), x_gpu = x.to(gpu());
    for (const GemmEpilogue e : {GemmEpilogue::kNone, GemmEpilogue::kBiasGradA}) {
      const bool bgrad = e == GemmEpilogue::kBiasGradA;
      const std::string what =
          std::string(cfg.name) + (bgrad ? " weight gradient with bias gradient " : " weight gradient ") + str(l);
      const Tensor dw = poisoned_on_gpu({l.out, l.in}, out), db = poisoned_on_gpu({l.out}, out);
      if (!run_or_expect_refusal(gemm,
                                 {.m = l.out, .n = l.in, .k = l.rows, .trans_a = true, .trans_b = false,
                                  .precision = cfg.precision, .c_f32 = cfg.c_f32, .epilogue = e},
                                 {.a = dy_gpu.raw_data(), .b = x_gpu.raw_data(), .c = dw.raw_data(),
                                  .bias = bgrad ? db.raw_data() : nullptr},
                                 cfg.step_uses && !bgrad, what)) {
        continue;
      }
      expect_within(dw.to_vector<double>(), o.z, tol, what);
      if (bgrad) expect_within(db.to_vector<double>(), sums.z, tol_sums, what + ": the bias gradient");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPrecision, GemmEpilogueTest, testing::ValuesIn(kConfigs),
                         [](const testing::TestParamInfo<Config>& param_info) {
                           return std::string(param_info.param.name);
                         });

// What run() refuses before it launches anything: each message names the product.
TEST(GemmEpilogues, MissingBuffersAndMismatchedPointersAreClearErrors) {
  SN_REQUIRE_GPU();
  cuda::CublasLtGemm gemm;
  const Tensor a = Tensor::zeros({4, 8}, DType::kF32, gpu()), b = Tensor::zeros({8, 16}, DType::kF32, gpu());
  const Tensor c = Tensor::zeros({4, 16}, DType::kF32, gpu());
  const cuda::GemmArgs args{.a = a.raw_data(), .b = b.raw_data(), .c = c.raw_data()};
  // The missing buffer is named whether or not cuBLASLt has an algorithm for the product (the
  // arguments are checked before it is planned), and so is the epilogue, by name.
  const auto refuses = [&](const cuda::GemmDesc& desc, const char* name, const char* message) {
    const bool named = test::throws_error_containing([&] { gemm.run(desc, args, stream()); },
                                                     fmt::format("epilogue={} ", name));
    return named && test::throws_error_containing([&] { gemm.run(desc, args, stream()); }, message);
  };
  const std::pair<GemmEpilogue, const char*> need_bias[] = {
      {GemmEpilogue::kBias, "bias"}, {GemmEpilogue::kReluBias, "relu_bias"}, {GemmEpilogue::kReluAuxBias, "relu_aux_bias"}};
  for (const auto& [e, name] : need_bias) {
    EXPECT_TRUE(refuses({.m = 4, .n = 16, .k = 8, .epilogue = e}, name, "the epilogue needs a bias vector")) << name;
  }
  const std::pair<GemmEpilogue, const char*> need_mask[] = {{GemmEpilogue::kReluAux, "relu_aux"},
                                                            {GemmEpilogue::kDRelu, "drelu"}};
  for (const auto& [e, name] : need_mask) {
    EXPECT_TRUE(refuses({.m = 4, .n = 16, .k = 8, .epilogue = e}, name, "the epilogue needs a ReLU mask buffer"))
        << name;
  }
  EXPECT_TRUE(test::throws_error_containing(
      [&] {
        gemm.run({.m = 4, .n = 16, .k = 8, .precision = GemmPrecision::kBF16}, a.data<float>(), b.data<float>(),
                 c.data<float>(), 1.0f, 0.0f, stream());
      },
      "fp32 pointers for a 16-bit product"));
  EXPECT_TRUE(test::throws_error_containing([&] { gemm.run({.m = 0, .n = 16, .k = 8}, args, stream()); },
                                            "empty products are handled by the caller"));
}

}  // namespace
}  // namespace sprintnet
