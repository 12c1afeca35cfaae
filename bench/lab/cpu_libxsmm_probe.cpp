// Issue 12's library question for libxsmm (docs/PERFORMANCE.md, "CPU, compiled step"): the three
// products of a 784->784 layer at batch 128, fp32, one thread, as oneDNN's matmul runs them in the
// compiled CPU step, against libxsmm's JIT kernels over cache blocks (batch-reduce kernels along k for
// the forward and the input gradient, one NT kernel a block for the weight gradient), in interleaved
// calls, median of 41. The forward reads a transposed copy of W (libxsmm's JIT wants A untransposed),
// which a real engine would have to keep up to date: its cost is not counted, in libxsmm's favour.
// Every blocking in the table below is tried; each result is checked against oneDNN's.
// Standalone (libxsmm is not a dependency of the project: `apt-get install libxsmm-dev`):
//   g++ -O2 -std=c++17 bench/lab/cpu_libxsmm_probe.cpp -o /tmp/xsmm -ldnnl -lxsmm -lxsmmnoblas -ldl -lpthread
//   OMP_NUM_THREADS=1 taskset -c 1 /tmp/xsmm
#include <libxsmm.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <dnnl.hpp>
#include <random>
#include <vector>

namespace {

using clk = std::chrono::steady_clock;
constexpr int kBatch = 128, kWidth = 784;
constexpr double kFlop = 2.0 * kBatch * kWidth * kWidth;

double elapsed_us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0;
  for (std::size_t i = 0; i < a.size(); ++i) e = std::max(e, static_cast<double>(std::abs(a[i] - b[i])));
  return e;
}

struct Blocking {
  int m, n, k;  // the forward's and input gradient's blocks (k: one batch-reduce step)
  int wm, wn;   // the weight gradient's blocks (its k is the batch)
};

}  // namespace

int main() {
  using namespace dnnl;
  libxsmm_init();
  std::printf("libxsmm target: %s\n", libxsmm_get_target_arch());
  // Row-major, as the step keeps them: X, dY [batch, width]; W [out, in].
  std::vector<float> x(kBatch * kWidth), w(kWidth * kWidth), dy(kBatch * kWidth);
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (auto* v : {&x, &w, &dy}) {
    for (float& e : *v) e = uniform(gen);
  }
  std::vector<float> w_t(kWidth * kWidth);  // W^T, row-major
  for (int o = 0; o < kWidth; ++o) {
    for (int i = 0; i < kWidth; ++i) w_t[i * kWidth + o] = w[o * kWidth + i];
  }

  // oneDNN, as ops/cpu/dnnl_matmul.cpp describes the products (plain layouts given by strides).
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const auto desc = [](memory::dims d, memory::dims strides) { return memory::desc(d, memory::data_type::f32, strides); };
  const memory::desc rows = desc({kBatch, kWidth}, {kWidth, 1}), weights = desc({kWidth, kWidth}, {kWidth, 1});
  const memory::desc weights_t = desc({kWidth, kWidth}, {1, kWidth}), rows_t = desc({kWidth, kBatch}, {1, kWidth});
  const auto product = [&](const memory::desc& a, const memory::desc& b, const memory::desc& c) {
    return matmul(matmul::primitive_desc(matmul::desc(a, b, c), eng));
  };
  const matmul forward = product(rows, weights_t, rows), input_grad = product(rows, weights, rows),
               weight_grad = product(rows_t, rows, weights);
  std::vector<float> ref_y(kBatch * kWidth), ref_dx(kBatch * kWidth), ref_dw(kWidth * kWidth);
  std::vector<float> y(ref_y.size()), dx(ref_dx.size()), dw(ref_dw.size());
  const auto run_onednn = [&](int which) {
    const auto m = [&](const memory::desc& d, const float* p) { return memory(d, eng, const_cast<float*>(p)); };
    if (which == 0) forward.execute(s, {{DNNL_ARG_SRC, m(rows, x.data())}, {DNNL_ARG_WEIGHTS, m(weights_t, w.data())}, {DNNL_ARG_DST, m(rows, ref_y.data())}});
    if (which == 1) input_grad.execute(s, {{DNNL_ARG_SRC, m(rows, dy.data())}, {DNNL_ARG_WEIGHTS, m(weights, w.data())}, {DNNL_ARG_DST, m(rows, ref_dx.data())}});
    if (which == 2) weight_grad.execute(s, {{DNNL_ARG_SRC, m(rows_t, dy.data())}, {DNNL_ARG_WEIGHTS, m(rows, x.data())}, {DNNL_ARG_DST, m(weights, ref_dw.data())}});
    s.wait();
  };

  // libxsmm is column-major: a row-major [r, c] matrix is its [c, r]. So Y^T = W X^T reads W^T (row-major)
  // as A, dX^T = W^T dY^T reads W as A, both NN; dW^T = X^T dY is NT over the batch.
  const char* names[3] = {"forward Y = X W^T", "input grad dX = dY W", "weight grad dW = dY^T X"};
  const float one = 1.0f, zero = 0.0f;
  const int nn = LIBXSMM_GEMM_FLAGS('N', 'N'), nt = LIBXSMM_GEMM_FLAGS('N', 'T'), prefetch = LIBXSMM_PREFETCH_NONE;
  const libxsmm_blasint ld = kWidth;
  for (const Blocking b : {Blocking{112, 64, 56, 112, 112}, Blocking{112, 128, 56, 112, 56}, Blocking{16, 128, 112, 16, 112},
                           Blocking{112, 32, 112, 56, 56}, Blocking{784, 16, 56, 784, 16}}) {
    const auto reduce = libxsmm_smmdispatch_reducebatch_strd(b.m, b.n, b.k, b.k * kWidth * 4, b.k * 4, &ld, &ld, &ld,
                                                             &one, &zero, &nn, &prefetch);
    const auto outer = libxsmm_smmdispatch(b.wm, b.wn, kBatch, &ld, &ld, &ld, &one, &zero, &nt, &prefetch);
    if (reduce == nullptr || outer == nullptr) {
      std::printf("blocks %dx%dx%d / %dx%d: libxsmm made no kernel\n", b.m, b.n, b.k, b.wm, b.wn);
      continue;
    }
    const auto run_libxsmm = [&](int which) {
      if (which < 2) {
        const float* a = which == 0 ? w_t.data() : w.data();
        const float* bm = which == 0 ? x.data() : dy.data();
        float* c = which == 0 ? y.data() : dx.data();
        unsigned long long count = kWidth / b.k;
        for (int j = 0; j < kBatch; j += b.n) {
          for (int i = 0; i < kWidth; i += b.m) reduce(a + i, bm + j * kWidth, c + i + j * kWidth, &count);
        }
      } else {
        for (int j = 0; j < kWidth; j += b.wn) {
          for (int i = 0; i < kWidth; i += b.wm) outer(x.data() + i, dy.data() + j, dw.data() + i + j * kWidth);
        }
      }
    };
    std::vector<double> t_onednn[3], t_libxsmm[3];
    for (int which = 0; which < 3; ++which) {
      run_onednn(which);
      run_libxsmm(which);
    }
    std::printf("blocks %dx%dx%d / %dx%d: max |libxsmm - oneDNN| %.2g %.2g %.2g\n", b.m, b.n, b.k, b.wm, b.wn,
                max_difference(y, ref_y), max_difference(dx, ref_dx), max_difference(dw, ref_dw));
    for (int round = 0; round < 41; ++round) {
      for (int which = 0; which < 3; ++which) {
        const auto t0 = clk::now();
        run_onednn(which);
        const auto t1 = clk::now();
        run_libxsmm(which);
        t_libxsmm[which].push_back(elapsed_us(t1, clk::now()));
        t_onednn[which].push_back(elapsed_us(t0, t1));
      }
    }
    for (int which = 0; which < 3; ++which) {
      const double d = median(t_onednn[which]), l = median(t_libxsmm[which]);
      std::printf("  %-24s oneDNN %7.1f us (%5.1f GFLOP/s)  libxsmm %7.1f us (%5.1f GFLOP/s)  %.2fx\n", names[which], d,
                  kFlop / d / 1e3, l, kFlop / l / 1e3, d / l);
    }
  }
}
