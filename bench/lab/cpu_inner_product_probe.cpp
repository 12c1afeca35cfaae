// Issue 12's probe (docs/PERFORMANCE.md, "CPU, compiled step"): for one 784->784 layer at batch 128,
// fp32, one thread, the three products of a step as the compiled CPU step runs them (oneDNN matmul,
// plain weights given by strides, which the forward packs on every call) against oneDNN's
// inner_product primitives with the weights kept in the blocked layout the forward picks (which the
// weight gradient writes too, so an optimizer over flat buffers could update them in place).
// Median of 15 rounds of 20 calls each, twice. Standalone:
//   g++ -O2 -std=c++17 -fopenmp bench/lab/cpu_inner_product_probe.cpp -o /tmp/ip -ldnnl && /tmp/ip
#include <dnnl.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>
#include <omp.h>
using namespace dnnl;
using dt = memory::data_type;
using tag = memory::format_tag;
double time_us(const std::function<void()>& f, stream& s) {
  std::vector<double> t;
  for (int r = 0; r < 15; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) f();
    s.wait();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 20);
  }
  std::sort(t.begin(), t.end());
  return t[7];
}
int main() {
  omp_set_num_threads(1);
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const memory::dim M = 128, K = 784, N = 784;
  const double gf = 2.0 * M * N * K / 1e3;
  std::vector<float> x(M * K, 0.01f), w(N * K, 0.02f), y(M * N), dy(M * N, 0.01f), dx(M * K), dw(N * K), b(N, 0.f), db(N);
  // matmul, as the compiled step does it
  auto mm = [&](memory::desc a, memory::desc bb, memory::desc c, void* pa, void* pb, void* pc) {
    matmul::primitive_desc pd(matmul::desc(a, bb, c), eng);
    auto prim = std::make_shared<matmul>(pd);
    memory am(a, eng, pa), bm(bb, eng, pb), cm(c, eng, pc);
    return std::function<void()>([=, &s]() mutable { prim->execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}}); });
  };
  auto f1 = mm({{M, K}, dt::f32, {K, 1}}, {{K, N}, dt::f32, {1, K}}, {{M, N}, dt::f32, {N, 1}}, x.data(), w.data(), y.data());
  auto f2 = mm({{M, N}, dt::f32, {N, 1}}, {{N, K}, dt::f32, {K, 1}}, {{M, K}, dt::f32, {K, 1}}, dy.data(), w.data(), dx.data());
  auto f3 = mm({{N, M}, dt::f32, {1, N}}, {{M, K}, dt::f32, {K, 1}}, {{N, K}, dt::f32, {K, 1}}, dy.data(), x.data(), dw.data());
  for (int rep = 0; rep < 2; ++rep) {
    double t1 = time_us(f1, s), t2 = time_us(f2, s), t3 = time_us(f3, s);
    std::printf("matmul  fwd %7.1f  bwd_data %7.1f  bwd_w %7.1f  total %7.1f us (%5.1f GFLOP/s)\n", t1, t2, t3, t1 + t2 + t3, 3 * gf / (t1 + t2 + t3));
  }
  // inner product with weights in the forward's chosen layout
  memory::desc src_md({M, K}, dt::f32, tag::nc), dst_md({M, N}, dt::f32, tag::nc), w_any({N, K}, dt::f32, tag::any), b_md({N}, dt::f32, tag::x);
  inner_product_forward::primitive_desc fpd(inner_product_forward::desc(prop_kind::forward_training, src_md, w_any, b_md, dst_md), eng);
  inner_product_backward_data::primitive_desc dpd(inner_product_backward_data::desc(src_md, fpd.weights_desc(), dst_md), eng, fpd);
  inner_product_backward_weights::primitive_desc wpd(inner_product_backward_weights::desc(src_md, fpd.weights_desc(), b_md, dst_md), eng, fpd);
  std::printf("weights layout fwd == bwd_w's: %d; impls: %s / %s / %s\n", fpd.weights_desc() == wpd.diff_weights_desc(),
              fpd.impl_info_str(), dpd.impl_info_str(), wpd.impl_info_str());
  memory wm(fpd.weights_desc(), eng), dwm(wpd.diff_weights_desc(), eng), xm(src_md, eng, x.data()), ym(dst_md, eng, y.data()),
      dym(dst_md, eng, dy.data()), dxm(src_md, eng, dx.data()), bm(b_md, eng, b.data()), dbm(b_md, eng, db.data());
  inner_product_forward fp(fpd); inner_product_backward_data dp(dpd); inner_product_backward_weights wp(wpd);
  for (int rep = 0; rep < 2; ++rep) {
    double t1 = time_us([&] { fp.execute(s, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, ym}}); }, s);
    double t2 = time_us([&] { dp.execute(s, {{DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DIFF_SRC, dxm}}); }, s);
    double t3 = time_us([&] { wp.execute(s, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_WEIGHTS, dwm}, {DNNL_ARG_DIFF_BIAS, dbm}}); }, s);
    std::printf("inner_p fwd %7.1f  bwd_data %7.1f  bwd_w %7.1f  total %7.1f us (%5.1f GFLOP/s)\n", t1, t2, t3, t1 + t2 + t3, 3 * gf / (t1 + t2 + t3));
  }
}
