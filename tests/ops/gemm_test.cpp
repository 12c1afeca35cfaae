// CPU gemm against a naive triple loop in double, for all four transpose
// combinations. Inputs are small integers, so every fp32 product and sum is
// exact and results must be equal, not close.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

#include "ops_test_util.h"
#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dnnl_matmul.h"
#include "sprintnet/ops/ops.h"
#include "support/signal_storm.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

struct GemmShape {
  std::int64_t m, n, k;
};

// c = alpha * op(a) @ op(b) + beta * c, with a stored [m, k] (or [k, m] when trans_a) and b [k, n] (or [n, k]).
std::vector<double> naive_gemm(const std::vector<double>& a, bool trans_a, const std::vector<double>& b, bool trans_b,
                               std::vector<double> c, GemmShape s, double alpha, double beta) {
  for (std::int64_t i = 0; i < s.m; ++i) {
    for (std::int64_t j = 0; j < s.n; ++j) {
      double acc = 0.0;
      for (std::int64_t p = 0; p < s.k; ++p) {
        const double av = trans_a ? a[p * s.m + i] : a[i * s.k + p];
        const double bv = trans_b ? b[j * s.k + p] : b[p * s.n + j];
        acc += av * bv;
      }
      double& out = c[i * s.n + j];
      out = alpha * acc + (beta == 0.0 ? 0.0 : beta * out);
    }
  }
  return c;
}

Shape a_shape(GemmShape s, bool trans) { return trans ? Shape{s.k, s.m} : Shape{s.m, s.k}; }
Shape b_shape(GemmShape s, bool trans) { return trans ? Shape{s.n, s.k} : Shape{s.k, s.n}; }

class GemmTest : public testing::TestWithParam<std::tuple<DType, bool, bool>> {};

// k up to 784 with integers in [-4, 4] \ {0}: |sums| <= 16 * 784 < 2^24, alpha and beta are powers of two: all
// exact in fp32. |2 ab| >= 2 > |0.25 c|, so even the 1x1x1 result is never zero.
TEST_P(GemmTest, SmallIntegersMatchNaiveProductExactly) {
  const auto [dtype, trans_a, trans_b] = GetParam();
  Generator gen(test::test_seed());
  for (const GemmShape s : {GemmShape{1, 1, 1}, GemmShape{3, 5, 7}, GemmShape{17, 9, 33}, GemmShape{64, 10, 784}}) {
    SCOPED_TRACE(testing::Message() << "m=" << s.m << " n=" << s.n << " k=" << s.k);
    const Tensor a = test::random_nonzero_integers(a_shape(s, trans_a), dtype, gen, 4);
    const Tensor b = test::random_nonzero_integers(b_shape(s, trans_b), dtype, gen, 4);
    const Tensor c = test::random_nonzero_integers({s.m, s.n}, dtype, gen, 4);
    ASSERT_FALSE(test::all_zero(a) || test::all_zero(b)) << "inputs must not be all zero";
    const auto expected = naive_gemm(test::values(a), trans_a, test::values(b), trans_b, test::values(c), s, 2.0, -0.25);
    ops::gemm(a, trans_a, b, trans_b, c, 2.0, -0.25);
    EXPECT_FALSE(test::all_zero(expected));
    EXPECT_EQ(test::values(c), expected);
  }
}

TEST_P(GemmTest, BetaZeroIgnoresNaNInC) {
  const auto [dtype, trans_a, trans_b] = GetParam();
  Generator gen(test::test_seed());
  const GemmShape s{13, 7, 29};
  const Tensor a = test::random_nonzero_integers(a_shape(s, trans_a), dtype, gen, 3);
  const Tensor b = test::random_nonzero_integers(b_shape(s, trans_b), dtype, gen, 3);
  const Tensor c = test::poisoned({s.m, s.n}, dtype);
  const auto expected =
      naive_gemm(test::values(a), trans_a, test::values(b), trans_b, std::vector<double>(13 * 7, 0.0), s, 1.0, 0.0);
  ops::gemm(a, trans_a, b, trans_b, c, 1.0, 0.0);
  ASSERT_TRUE(test::all_finite(c)) << "NaN in c leaked through beta = 0";
  EXPECT_FALSE(test::all_zero(c));
  EXPECT_EQ(test::values(c), expected);
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         testing::Combine(testing::Values(DType::kF32, DType::kF64), testing::Bool(), testing::Bool()),
                         [](const testing::TestParamInfo<GemmTest::ParamType>& param_info) {
                           return std::string(dtype_name(std::get<0>(param_info.param))) +
                                  (std::get<1>(param_info.param) ? "_At" : "_A") + (std::get<2>(param_info.param) ? "_Bt" : "_B");
                         });

TEST(Gemm, EmptyInnerDimensionGivesBetaTimesC) {
  const Tensor a = Tensor::empty({3, 0}, DType::kF32);
  const Tensor b = Tensor::empty({0, 2}, DType::kF32);
  const Tensor poisoned = test::poisoned({3, 2}, DType::kF32);
  ops::gemm(a, false, b, false, poisoned, 1.0, 0.0);
  EXPECT_EQ(test::values(poisoned), std::vector<double>(6, 0.0));
  const Tensor c = Tensor::full({3, 2}, 1.5, DType::kF32);
  ops::gemm(a, false, b, false, c, 1.0, 2.0);
  EXPECT_EQ(test::values(c), std::vector<double>(6, 3.0));
}

// Random reals in fp32 against the double reference: K = 1000 terms, each rounded once or twice;
// the norm-wise error of such sums is ~sqrt(K) * 2^-24 ~ 2e-6, so 1e-5 holds with margin.
TEST(Gemm, RandomRealsCloseToDoubleReference) {
  Generator gen(test::test_seed());
  const GemmShape s{31, 47, 1000};
  const Tensor a = test::random_uniform({s.m, s.k}, DType::kF32, gen);
  const Tensor b = test::random_uniform({s.n, s.k}, DType::kF32, gen);
  const Tensor c = test::random_uniform({s.m, s.n}, DType::kF32, gen);
  const auto expected = naive_gemm(test::values(a), false, test::values(b), true, test::values(c), s, 0.3, 0.7);
  ops::gemm(a, false, b, true, c, 0.3, 0.7);
  EXPECT_LE(test::relative_error(test::values(c), expected), 1e-5);
}

// The path of the loaded object whose name holds `part` (empty if none is loaded).
std::string loaded_library(const char* part) {
  struct Search {
    const char* part;
    std::string found;
  } search{part, {}};
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, s->part) != nullptr) s->found = info->dlpi_name;
        return s->found.empty() ? 0 : 1;
      },
      &search);
  return search.found;
}

// OpenBLAS is opened by the first product that needs it (openblas_library.h says why; that training never opens
// it: train_cli_test) and runs with the CPU ops' thread count, set before it opened or after.
TEST(Gemm, OpenBlasOpensForFp64AndFollowsTheThreadCount) {
  set_cpu_threads(2);
  Generator gen(test::test_seed());
  const Tensor a = test::random_uniform({5, 7}, DType::kF64, gen);
  const Tensor c = Tensor::zeros({5, 5}, DType::kF64);
  ops::gemm(a, false, a, true, c, 1.0, 0.0);
  const std::string path = loaded_library("libopenblas");
  ASSERT_FALSE(path.empty()) << "an fp64 product ran, yet no OpenBLAS is loaded";
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  const auto threads = reinterpret_cast<int (*)()>(::dlsym(handle, "openblas_get_num_threads"));
  ASSERT_NE(threads, nullptr) << ::dlerror();
  EXPECT_EQ(threads(), 2);
  set_cpu_threads(1);
  EXPECT_EQ(threads(), 1);
  set_cpu_threads(2);
  EXPECT_EQ(threads(), 2);
  set_cpu_threads(0);  // back to the default, as every other test in this process expects
  EXPECT_EQ(threads(), cpu_threads());
  ::dlclose(handle);  // (RTLD_NOLOAD took a reference)
}

// The eager CPU step's banner names the library and instruction set of its fp32 products.
TEST(Gemm, TheDescriptionNamesTheLibraryAndItsInstructions) {
  const std::string line = eager_gemm_description();
  EXPECT_EQ(line.rfind("oneDNN ", 0), 0u) << line;
  EXPECT_NE(line.find(" sgemm (" + cpu::dnnl_cpu_isa() + ")"), std::string::npos) << line;
}

// fp32 products run oneDNN's JIT GEMM, which points the stack pointer into the heap while it runs (oneDNN 2.x):
// a signal handled meanwhile would write its frame there (jit_signal_shield.h). Products in every transpose under
// a storm of SIGUSR1 give the quiet run's bits, and the heap survives the allocations between them. Where it can
// fail: on the H200 machines' Xeon host, dnnl_sgemm without a shield in this loop aborted in 5 runs of 5 ("corrupted
// size vs. prev_size", bench/lab/cpu_sgemm_signal_probe.cpp, 2026-11-29); on this project's AMD machine
// oneDNN picks kernels that leave the stack alone and the loop survives with or without the shield.
TEST(Gemm, Fp32ProductsUnderAStormOfSignalsGiveTheQuietResults) {
  Generator gen(test::test_seed());
  set_cpu_threads(2);
  const GemmShape s{192, 256, 320};
  struct Case {
    bool trans_a, trans_b;
    Tensor a, b, quiet;
  };
  std::vector<Case> cases;
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      Case c{trans_a, trans_b, test::random_uniform(a_shape(s, trans_a), DType::kF32, gen),
             test::random_uniform(b_shape(s, trans_b), DType::kF32, gen), Tensor::zeros({s.m, s.n}, DType::kF32)};
      ops::gemm(c.a, trans_a, c.b, trans_b, c.quiet, 1.0, 0.0);
      cases.push_back(std::move(c));
    }
  }
  const test::SignalStorm storm;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  long rounds = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (const Case& c : cases) {
      const Tensor out = test::poisoned({s.m, s.n}, DType::kF32);
      ops::gemm(c.a, c.trans_a, c.b, c.trans_b, out, 1.0, 0.0);
      ASSERT_EQ(std::memcmp(out.raw_data(), c.quiet.raw_data(), static_cast<std::size_t>(s.m * s.n) * 4), 0)
          << "trans_a " << c.trans_a << " trans_b " << c.trans_b;
      std::vector<std::vector<char>> churn(64, std::vector<char>(1000));  // the allocator walks its lists
    }
    ++rounds;
  }
  set_cpu_threads(0);
  EXPECT_GT(rounds, 2);
  EXPECT_GT(test::SignalStorm::signals_handled(), 100) << "the signals did not arrive: the test proves nothing";
}

}  // namespace
}  // namespace sprintnet
