// Issue 12's probe (docs/PERFORMANCE.md, "CPU, compiled step"): at two threads, does a layer's
// backward gain from running its two products side by side, one thread each (the weight gradient
// dW = dZ^T X on one, the input gradient dX = dZ W on the other), instead of one after the other,
// each split over both threads by oneDNN (what the compiled CPU step does)? Both orders compute the
// same bits (oneDNN's fp32 matmul does not split k by threads on these shapes); the probe checks it.
// One 784->784 layer at batch 128, fp32; median of 50 pairs, four rounds. Standalone:
//   g++ -O2 -std=c++20 -fopenmp bench/lab/cpu_two_lane_backward_probe.cpp -o /tmp/lanes -ldnnl && /tmp/lanes
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

namespace {

using dnnl::engine;
using dnnl::matmul;
using dnnl::memory;
using dnnl::stream;
using dt = memory::data_type;

struct Product {
  matmul primitive;
  memory a, b, c;
};

// C[m, n] = A[m, k] B[k, n], A and B given by strides; planned for the thread count set when called
// (oneDNN reads it at creation for its brgemm kernels, at execution for its gemm:jit ones).
Product plan(const engine& eng, memory::dim m, memory::dim n, memory::dim k, const memory::dims& a_strides,
             const memory::dims& b_strides, float* a, float* b, float* c) {
  const memory::desc a_md({m, k}, dt::f32, a_strides), b_md({k, n}, dt::f32, b_strides), c_md({m, n}, dt::f32, {n, 1});
#if DNNL_VERSION_MAJOR >= 3
  const matmul::primitive_desc pd(eng, a_md, b_md, c_md);
#else
  const matmul::primitive_desc pd(matmul::desc(a_md, b_md, c_md), eng);
#endif
  return {matmul(pd), memory(a_md, eng, a), memory(b_md, eng, b), memory(c_md, eng, c)};
}

void run(const Product& p, stream& s) {
  p.primitive.execute(s, {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}});
  s.wait();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  constexpr memory::dim rows = 128, in = 784, out = 784;
  std::vector<float> dz(rows * out), x(rows * in), w(out * in);
  for (std::size_t i = 0; i < dz.size(); ++i) dz[i] = std::sin(0.37F * static_cast<float>(i));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11F * static_cast<float>(i));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01F * std::sin(0.05F * static_cast<float>(i));
  std::vector<float> dw_split(out * in), dx_split(rows * in), dw_lane(out * in), dx_lane(rows * in);
  const engine eng(engine::kind::cpu, 0);
  stream lane0(eng), lane1(eng);  // a stream a thread: oneDNN's streams are not shared between threads
  omp_set_num_threads(2);
  const Product dw2 = plan(eng, out, in, rows, {1, out}, {in, 1}, dz.data(), x.data(), dw_split.data());
  const Product dx2 = plan(eng, rows, in, out, {out, 1}, {in, 1}, dz.data(), w.data(), dx_split.data());
  omp_set_num_threads(1);
  const Product dw1 = plan(eng, out, in, rows, {1, out}, {in, 1}, dz.data(), x.data(), dw_lane.data());
  const Product dx1 = plan(eng, rows, in, out, {out, 1}, {in, 1}, dz.data(), w.data(), dx_lane.data());
  omp_set_num_threads(2);
  const auto now = [] { return std::chrono::steady_clock::now(); };
  const auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  for (int round = 0; round < 4; ++round) {
    std::vector<double> split, lanes;
    for (int i = 0; i < 50; ++i) {
      const auto t0 = now();
      run(dw2, lane0);
      run(dx2, lane0);
      const auto t1 = now();
#pragma omp parallel num_threads(2)
      {
        // Inside a parallel region oneDNN runs each product on the calling thread alone.
        if (omp_get_thread_num() == 0) {
          run(dw1, lane0);
        } else {
          run(dx1, lane1);
        }
      }
      const auto t2 = now();
      split.push_back(ms(t0, t1));
      lanes.push_back(ms(t1, t2));
    }
    std::printf("dW then dX, each on both threads: %.3f ms   side by side, a thread each: %.3f ms\n", median(split),
                median(lanes));
  }
  float diff = 0.0F;
  for (std::size_t i = 0; i < dw_split.size(); ++i) diff = std::max(diff, std::abs(dw_split[i] - dw_lane[i]));
  for (std::size_t i = 0; i < dx_split.size(); ++i) diff = std::max(diff, std::abs(dx_split[i] - dx_lane[i]));
  std::printf("largest difference between the two orders: %g\n", diff);
  return diff == 0.0F ? 0 : 1;
}
