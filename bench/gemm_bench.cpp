// The matrix products of one CPU training step, timed in each GEMM library Debian offers:
// OpenBLAS (cblas), BLIS (its typed API: bli_sgemm takes strides, so transposes are free),
// oneDNN matmul in fp32, fp32 with the forward's bias+ReLU as a fused post-op, and bf16 inputs
// (fp32 output; only where the CPU has AVX512-BF16 or AMX). Libraries are interleaved round by round
// and each time is the median over rounds, so a machine shared with other work biases every library
// alike. Not a test: bench/ only.
//
//   gemm_bench --config 4x784x128 3x256x128 --threads 1 2 --rounds 15
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/support_bench.h"
#include "sprintnet/ops/cpu/dnnl_matmul.h"
#include "sprintnet/ops/cpu/jit_signal_shield.h"

namespace {

using sprintnet::bench::MlpShape;
using Clock = std::chrono::steady_clock;

enum class Product { kForward, kInputGrad, kWeightGrad };

const char* product_name(Product p) {
  switch (p) {
    case Product::kForward: return "forward Y = X W^T";
    case Product::kInputGrad: return "input grad dX = dY W";
    case Product::kWeightGrad: return "weight grad dW = dY^T X";
  }
  return "";
}

// One product of the step: C[m,n] = op(A)[m,k] op(B)[k,n], all row-major, with explicit strides.
struct Gemm {
  Product kind;
  std::int64_t in, out, batch;  // the layer's shape
  std::int64_t m, n, k;
  // Element (i,j) of A is a[i*a_rs + j*a_cs]; likewise B.
  std::int64_t a_rs, a_cs, b_rs, b_cs;
  bool transposed_a() const { return a_cs != 1; }
  bool transposed_b() const { return b_cs != 1; }
};

Gemm make_gemm(Product kind, std::int64_t in, std::int64_t out, std::int64_t batch) {
  switch (kind) {
    case Product::kForward:  // X[B,in] · W[out,in]^T
      return {kind, in, out, batch, batch, out, in, in, 1, 1, in};
    case Product::kInputGrad:  // dY[B,out] · W[out,in]
      return {kind, in, out, batch, batch, in, out, out, 1, in, 1};
    case Product::kWeightGrad:  // dY[B,out]^T · X[B,in]
      return {kind, in, out, batch, out, in, batch, 1, out, in, 1};
  }
  return {};
}

// Median of a vector of seconds.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Operands {
  std::vector<float> a, b, c, bias;
  std::vector<std::uint16_t> a16, b16;
};

std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

Operands make_operands(const Gemm& g, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  Operands o;
  o.a.resize(static_cast<std::size_t>(g.m * g.k));
  o.b.resize(static_cast<std::size_t>(g.k * g.n));
  o.c.assign(static_cast<std::size_t>(g.m * g.n), 0.0F);
  o.bias.resize(static_cast<std::size_t>(g.n));
  for (auto* v : {&o.a, &o.b, &o.bias}) {
    for (float& x : *v) x = normal(rng);
  }
  for (float x : o.a) o.a16.push_back(to_bf16(x));
  for (float x : o.b) o.b16.push_back(to_bf16(x));
  return o;
}

// A library's way to run one product, prepared once (oneDNN primitives are created here).
using Runner = std::function<void()>;

Runner openblas_runner(const Gemm& g, Operands& o) {
  return [&g, &o] {
    cblas_sgemm(CblasRowMajor, g.transposed_a() ? CblasTrans : CblasNoTrans, g.transposed_b() ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k), 1.0F, o.a.data(),
                static_cast<blasint>(g.transposed_a() ? g.a_cs : g.a_rs), o.b.data(),
                static_cast<blasint>(g.transposed_b() ? g.b_cs : g.b_rs), 0.0F, o.c.data(), static_cast<blasint>(g.n));
  };
}

// oneDNN's JIT sgemm (the eager step's fp32 products, ops/cpu/gemm.cpp): its own kernels (the
// gemm:jit family), not the matmul primitive's brgemm ones, on CPUs where both exist.
Runner dnnl_sgemm_runner(const Gemm& g, Operands& o) {
  return [&g, &o] {
    const dnnl_status_t status =
        dnnl_sgemm(g.transposed_a() ? 'T' : 'N', g.transposed_b() ? 'T' : 'N', g.m, g.n, g.k, 1.0F, o.a.data(),
                   g.transposed_a() ? g.a_cs : g.a_rs, o.b.data(), g.transposed_b() ? g.b_cs : g.b_rs, 0.0F,
                   o.c.data(), g.n);
    if (status != dnnl_success) throw std::runtime_error("dnnl_sgemm failed");
  };
}

// BLIS (Debian's libblis4-openmp) is opened at run time with RTLD_LOCAL, not linked: it exports
// cblas_sgemm and sgemm_ too, and linked it would answer OpenBLAS's calls. Where it is not installed
// (the GPU machines) its column is left out. Its typed API, declared here so no header is needed:
// bli_sgemm(transa, transb, m, n, k, &alpha, a, rs_a, cs_a, b, rs_b, cs_b, &beta, c, rs_c, cs_c),
// transposes as enums (0 = none) and dimensions and strides as int64 (dim_t, inc_t).
using BliSgemm = void (*)(int, int, std::int64_t, std::int64_t, std::int64_t, const float*, const float*, std::int64_t,
                          std::int64_t, const float*, std::int64_t, std::int64_t, const float*, float*, std::int64_t,
                          std::int64_t);
using BliSetThreads = void (*)(std::int64_t);
inline constexpr int kBlisNoTranspose = 0;

struct Blis {
  BliSgemm sgemm = nullptr;
  BliSetThreads set_threads = nullptr;
};

const Blis& blis() {
  static const Blis lib = [] {
    Blis b;
    void* handle = dlopen("/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return b;
    b.sgemm = reinterpret_cast<BliSgemm>(dlsym(handle, "bli_sgemm"));
    b.set_threads = reinterpret_cast<BliSetThreads>(dlsym(handle, "bli_thread_set_num_threads"));
    if (b.set_threads == nullptr) b.sgemm = nullptr;
    return b;
  }();
  return lib;
}

Runner blis_runner(const Gemm& g, Operands& o) {
  return [&g, &o] {
    float one = 1.0F, zero = 0.0F;
    blis().sgemm(kBlisNoTranspose, kBlisNoTranspose, g.m, g.n, g.k, &one, o.a.data(), g.a_rs, g.a_cs, o.b.data(), g.b_rs,
              g.b_cs, &zero, o.c.data(), g.n, 1);
  };
}

// oneDNN matmul with the same strides, planned as the compiled CPU step plans it; `fused` adds the
// forward's bias and a ReLU post-op.
Runner dnnl_runner(const Gemm& g, Operands& o, bool bf16, bool fused) {
  using sprintnet::cpu::DnnlMatmul;
  const sprintnet::cpu::MatmulShape shape{.m = g.m, .n = g.n, .k = g.k, .a_row_stride = g.a_rs, .a_col_stride = g.a_cs,
                                          .b_row_stride = g.b_rs, .b_col_stride = g.b_cs};
  auto product = std::make_shared<DnnlMatmul>(
      shape, bf16 ? sprintnet::cpu::MatmulInput::kBF16 : sprintnet::cpu::MatmulInput::kF32, fused, fused);
  const void* a = bf16 ? static_cast<const void*>(o.a16.data()) : o.a.data();
  const void* b = bf16 ? static_cast<const void*>(o.b16.data()) : o.b.data();
  return [product, a, b, &o] { product->run(a, b, o.bias.data(), o.c.data()); };
}

struct Candidate {
  std::string name;
  bool forward_only;
  std::function<Runner(const Gemm&, Operands&)> make;
};

void set_threads(int threads) {
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  if (blis().set_threads != nullptr) blis().set_threads(threads);
}

// The layers of LxHxB on MNIST: 784 -> H (L-1 times) -> 10.
std::vector<std::pair<std::int64_t, std::int64_t>> layers_of(const MlpShape& s) {
  std::vector<std::pair<std::int64_t, std::int64_t>> layers;
  std::int64_t in = 784;
  for (std::int64_t l = 0; l + 1 < s.layers; ++l) {
    layers.emplace_back(in, s.width);
    in = s.width;
  }
  layers.emplace_back(in, 10);
  return layers;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"GEMM libraries on the products of one CPU training step"};
  std::vector<std::string> configs{"4x784x128", "3x256x128"};
  std::vector<int> threads{1, 2};
  int rounds = 15, reps = 20;
  app.add_option("--config", configs, "LxHxB models");
  app.add_option("--threads", threads, "thread counts");
  app.add_option("--rounds", rounds, "interleaved rounds (the median is reported)");
  app.add_option("--reps", reps, "calls per timed round");
  CLI11_PARSE(app, argc, argv);

  std::vector<Candidate> candidates = {
      {"OpenBLAS", false, [](const Gemm& g, Operands& o) { return openblas_runner(g, o); }},
      {"oneDNN fp32", false, [](const Gemm& g, Operands& o) { return dnnl_runner(g, o, false, false); }},
      {"oneDNN sgemm", false, [](const Gemm& g, Operands& o) { return dnnl_sgemm_runner(g, o); }},
      {"oneDNN fp32+bias+relu", true,
       [](const Gemm& g, Operands& o) { return dnnl_runner(g, o, false, true); }},
  };
  // oneDNN would emulate bf16 on a CPU without AVX512-BF16 or AMX; the compiled step refuses it there.
  if (sprintnet::cpu::cpu_has_native_bf16()) {
    candidates.push_back(
        {"oneDNN bf16", false, [](const Gemm& g, Operands& o) { return dnnl_runner(g, o, true, false); }});
  }
  if (blis().sgemm != nullptr) {
    candidates.insert(candidates.begin() + 1,
                      {"BLIS", false, [](const Gemm& g, Operands& o) { return blis_runner(g, o); }});
  }

  std::printf("%s (%s), %s\n\n", sprintnet::cpu::dnnl_library_version().c_str(),
              sprintnet::cpu::dnnl_cpu_isa().c_str(), openblas_get_config());
  std::printf("| config | threads | product (in->out) | m x n x k |");
  for (const auto& c : candidates) std::printf(" %s µs |", c.name.c_str());
  std::printf("\n|---|---|---|---|");
  for (std::size_t i = 0; i < candidates.size(); ++i) std::printf("---|");
  std::printf("\n");

  std::mt19937 rng(42);
  for (const std::string& config : configs) {
    const MlpShape shape = sprintnet::bench::parse_shape(config);
    std::vector<Gemm> gemms;
    const auto layers = layers_of(shape);
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const auto [in, out] = layers[l];
      gemms.push_back(make_gemm(Product::kForward, in, out, shape.batch));
      if (l > 0) gemms.push_back(make_gemm(Product::kInputGrad, in, out, shape.batch));  // no dX for the input
      gemms.push_back(make_gemm(Product::kWeightGrad, in, out, shape.batch));
    }
    std::vector<Operands> operands;
    for (const Gemm& g : gemms) operands.push_back(make_operands(g, rng));
    for (int t : threads) {
      set_threads(t);
      // runners[g][c]; timings[g][c] over rounds.
      std::vector<std::vector<Runner>> runners(gemms.size());
      std::vector<std::vector<std::vector<double>>> times(gemms.size(),
                                                          std::vector<std::vector<double>>(candidates.size()));
      for (std::size_t g = 0; g < gemms.size(); ++g) {
        for (const auto& c : candidates) {
          runners[g].push_back(c.forward_only && gemms[g].kind != Product::kForward
                                   ? Runner{}
                                   : c.make(gemms[g], operands[g]));
        }
      }
      // One signal shield around the timing, as the step holds one: the products' own are then free.
      const sprintnet::cpu::JitSignalShield shield;
      for (int r = -1; r < rounds; ++r) {  // round -1 warms up
        for (std::size_t c = 0; c < candidates.size(); ++c) {
          for (std::size_t g = 0; g < gemms.size(); ++g) {
            if (!runners[g][c]) continue;
            const auto start = Clock::now();
            for (int i = 0; i < reps; ++i) runners[g][c]();
            const double s = std::chrono::duration<double>(Clock::now() - start).count() / reps;
            if (r >= 0) times[g][c].push_back(s);
          }
        }
      }
      std::vector<double> totals(candidates.size(), 0.0);
      const std::size_t fp32_column = candidates.size() == 5 ? 2 : 1;  // "oneDNN fp32"
      for (std::size_t g = 0; g < gemms.size(); ++g) {
        const Gemm& gm = gemms[g];
        std::printf("| %s | %d | %s (%lld->%lld) | %lldx%lldx%lld |", config.c_str(), t, product_name(gm.kind),
                    static_cast<long long>(gm.in), static_cast<long long>(gm.out), static_cast<long long>(gm.m),
                    static_cast<long long>(gm.n), static_cast<long long>(gm.k));
        for (std::size_t c = 0; c < candidates.size(); ++c) {
          // A forward-only candidate's total counts the plain fp32 time of the other products.
          const std::size_t source = times[g][c].empty() ? fp32_column : c;
          const double us = median(times[g][source]) * 1e6;
          totals[c] += us;
          if (times[g][c].empty()) {
            std::printf(" (%.1f) |", us);
          } else {
            std::printf(" %.1f |", us);
          }
        }
        std::printf("\n");
      }
      double flops = 0.0;
      for (const Gemm& gm : gemms) flops += 2.0 * static_cast<double>(gm.m * gm.n * gm.k);
      std::printf("| %s | %d | **all products of a step** (%.2f GFLOP) | |", config.c_str(), t, flops * 1e-9);
      for (double us : totals) std::printf(" **%.0f** (%.0f GFLOP/s) |", us, flops / (us * 1e-6) * 1e-9);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gemm_bench: %s\n", e.what());
  return 1;
}
