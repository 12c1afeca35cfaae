#include <cblas.h>
#include <omp.h>

#include <atomic>
#include <thread>

#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dispatch.h"

namespace sprintnet {
namespace {
std::atomic<int> g_threads{0};  // atomic: a sweep's CPU runs set it from several threads
}

void set_cpu_threads(int threads) {
  SN_CHECK(threads >= 0 && threads <= kMaxCpuThreads, "thread count must be in [0, {}], got {}", kMaxCpuThreads, threads);
  const int count = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  g_threads = count;
  openblas_set_num_threads(count);
  omp_set_num_threads(count);
}

int cpu_threads() {
  if (g_threads == 0) set_cpu_threads(0);
  return g_threads;
}

void CpuBackend::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, double alpha,
                      double beta) {
  cpu_threads();  // first use fixes the thread count, so results are reproducible
  const auto m = static_cast<blasint>(c.size(0)), n = static_cast<blasint>(c.size(1));
  const auto k = static_cast<blasint>(a.size(trans_a ? 0 : 1));
  const auto lda = static_cast<blasint>(a.size(1)), ldb = static_cast<blasint>(b.size(1));
  const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS leaves C untouched here; the maths says C = beta * C
    if (beta == 0.0) {
      fill(c, 0.0);
    } else {
      axpy(c, c, beta - 1.0);
    }
    return;
  }
  if (a.dtype() == DType::kF32) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, static_cast<float>(alpha), a.data<float>(), lda, b.data<float>(), ldb,
                static_cast<float>(beta), c.data<float>(), n);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a.data<double>(), lda, b.data<double>(), ldb, beta,
                c.data<double>(), n);
  }
}

}  // namespace sprintnet
