// The eager CPU ops' matrix product. fp32 runs oneDNN's sgemm: its JIT kernels match the CPU they run on, where
// OpenBLAS 0.3.21 (Debian 12's) runs generic Prescott kernels on the Xeons it does not know (Sapphire Rapids:
// 3.5-4x slower there, docs/PERFORMANCE.md) and was no faster elsewhere. fp64 (the finite-difference gradient
// checks, double tensors) runs OpenBLAS, as oneDNN has no fp64 product.
#include <oneapi/dnnl/dnnl.h>

#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dispatch.h"
#include "sprintnet/ops/cpu/dnnl_matmul.h"
#include "sprintnet/ops/cpu/jit_signal_shield.h"
#include "sprintnet/ops/cpu/openblas_library.h"

namespace sprintnet {
namespace {

// Kernel lab (docs/PERFORMANCE.md): SPRINTNET_EAGER_GEMM=openblas brings back the fp32 products this replaced,
// so the two are timed side by side in one binary.
bool fp32_by_openblas() {
  static const bool chosen = [] {
    const char* env = std::getenv("SPRINTNET_EAGER_GEMM");
    return env != nullptr && std::string_view(env) == "openblas";
  }();
  return chosen;
}

// fp32 by oneDNN's JIT sgemm.
void dnnl_gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, double alpha,
               double beta) {
  const std::int64_t m = c.size(0), n = c.size(1), k = a.size(trans_a ? 0 : 1);
  const cpu::JitSignalShield shield;  // oneDNN 2's JIT GEMM moves the stack pointer (jit_signal_shield.h)
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, static_cast<float>(alpha),
                                          a.data<float>(), a.size(1), b.data<float>(), b.size(1),
                                          static_cast<float>(beta), c.data<float>(), n);
  SN_CHECK(status == dnnl_success, "gemm: oneDNN's sgemm failed on {}x{}x{} (status {})", m, n, k,
           static_cast<int>(status));
}

// fp64 (and fp32 under the lab switch) by OpenBLAS.
void openblas_gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, double alpha,
                   double beta) {
  for (const Tensor* t : {&a, &b, &c}) {
    SN_CHECK(t->size(0) <= std::numeric_limits<blasint>::max() && t->size(1) <= std::numeric_limits<blasint>::max(),
             "gemm: a matrix of shape {} has a dimension over {}, more than OpenBLAS's 32-bit interface takes",
             shape_str(t->shape()), std::numeric_limits<blasint>::max());
  }
  const auto m = static_cast<blasint>(c.size(0)), n = static_cast<blasint>(c.size(1));
  const auto k = static_cast<blasint>(a.size(trans_a ? 0 : 1));
  const auto lda = static_cast<blasint>(a.size(1)), ldb = static_cast<blasint>(b.size(1));
  const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const cpu::OpenBlas& blas = cpu::openblas();
  if (a.dtype() == DType::kF32) {
    blas.sgemm(CblasRowMajor, ta, tb, m, n, k, static_cast<float>(alpha), a.data<float>(), lda, b.data<float>(), ldb,
                static_cast<float>(beta), c.data<float>(), n);
  } else {
    blas.dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a.data<double>(), lda, b.data<double>(), ldb, beta,
                c.data<double>(), n);
  }
}

}  // namespace

std::string eager_gemm_description() {
  if (fp32_by_openblas()) return fmt::format("OpenBLAS ({} kernels; SPRINTNET_EAGER_GEMM)", cpu::openblas().get_corename());
  return fmt::format("{} sgemm ({})", cpu::dnnl_library_version(), cpu::dnnl_cpu_isa());
}

void CpuBackend::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, double alpha,
                      double beta) {
  cpu_threads();  // first use fixes the thread count, so results are reproducible
  if (c.size(0) == 0 || c.size(1) == 0) return;
  if (a.size(trans_a ? 0 : 1) == 0) {  // BLAS leaves C untouched here; the maths says C = beta * C
    if (beta == 0.0) {
      fill(c, 0.0);
    } else {
      axpy(c, c, beta - 1.0);
    }
    return;
  }
  if (a.dtype() == DType::kF32 && !fp32_by_openblas()) {
    dnnl_gemm(a, trans_a, b, trans_b, c, alpha, beta);
  } else {
    openblas_gemm(a, trans_a, b, trans_b, c, alpha, beta);
  }
}

}  // namespace sprintnet
