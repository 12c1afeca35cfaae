#include <cblas.h>

#include <initializer_list>
#include <limits>
#include <string>

#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dispatch.h"

namespace sprintnet {

std::string blas_description() {
  const std::string core = openblas_get_corename();
  std::string line = fmt::format("OpenBLAS ({} kernels)", core);
  if (core == "Prescott" && __builtin_cpu_supports("avx512f")) {
    line += ": generic ones on this AVX-512 CPU, which this OpenBLAS does not know; OPENBLAS_CORETYPE=SkylakeX in "
            "the environment runs its AVX-512 ones, ~4x faster";
  }
  return line;
}

void CpuBackend::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, double alpha,
                      double beta) {
  cpu_threads();  // first use fixes the thread count, so results are reproducible
  for (const Tensor* t : {&a, &b, &c}) {
    SN_CHECK(t->size(0) <= std::numeric_limits<blasint>::max() && t->size(1) <= std::numeric_limits<blasint>::max(),
             "gemm: a matrix of shape {} has a dimension over {}, more than OpenBLAS's 32-bit interface takes",
             shape_str(t->shape()), std::numeric_limits<blasint>::max());
  }
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
