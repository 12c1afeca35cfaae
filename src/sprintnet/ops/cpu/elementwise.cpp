#include <vector>

#include "sprintnet/ops/cpu/activation_math.h"
#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dispatch.h"

namespace sprintnet {

void CpuBackend::axpy(const Tensor& y, const Tensor& x, double alpha) {
  cpu::dispatch_float(y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t n = y.numel();
    T* out = y.data<T>();
    const T* in = x.data<T>();
    const T a = static_cast<T>(alpha);
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelMinElements)
    for (std::int64_t i = 0; i < n; ++i) out[i] += a * in[i];
  });
}

void CpuBackend::add_bias(const Tensor& y, const Tensor& bias) {
  cpu::dispatch_float(y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t rows = y.size(0), cols = y.size(1);
    T* out = y.data<T>();
    const T* b = bias.data<T>();
#pragma omp parallel for schedule(static) if (rows * cols >= cpu::kParallelMinElements)
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) out[r * cols + c] += b[c];
    }
  });
}

void CpuBackend::sum_rows(const Tensor& x, const Tensor& out, double beta) {
  cpu::dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t rows = x.size(0), cols = x.size(1);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    // Each thread owns a block of columns and adds rows top to bottom: the
    // order of additions is fixed, so the result does not depend on threads.
    constexpr std::int64_t kColumnBlock = 256;
    const std::int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (rows * cols >= cpu::kParallelMinElements)
    for (std::int64_t blk = 0; blk < blocks; ++blk) {
      const std::int64_t c0 = blk * kColumnBlock, c1 = std::min(cols, c0 + kColumnBlock);
      std::vector<T> acc(static_cast<std::size_t>(c1 - c0), T(0));
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = c0; c < c1; ++c) acc[static_cast<std::size_t>(c - c0)] += in[r * cols + c];
      }
      for (std::int64_t c = c0; c < c1; ++c) {
        const T prev = beta == 0.0 ? T(0) : static_cast<T>(beta) * o[c];  // beta 0 ignores NaN in out
        o[c] = acc[static_cast<std::size_t>(c - c0)] + prev;
      }
    }
  });
}

void CpuBackend::activation_forward(Activation act, const Tensor& x, const Tensor& y) {
  cpu::dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t n = x.numel();
    const T* in = x.data<T>();
    T* out = y.data<T>();
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelMinElements)
    for (std::int64_t i = 0; i < n; ++i) out[i] = cpu::activate(act, in[i]);
  });
}

void CpuBackend::activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy,
                                     const Tensor& dx) {
  cpu::dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t n = x.numel();
    const T* in = x.data<T>();
    const T* out = y.data<T>();
    const T* g = dy.data<T>();
    T* dg = dx.data<T>();
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelMinElements)
    for (std::int64_t i = 0; i < n; ++i) dg[i] = cpu::activate_derivative(act, in[i], out[i]) * g[i];
  });
}

}  // namespace sprintnet
