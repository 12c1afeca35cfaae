#include <type_traits>
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
    cpu::parallel_chunks(n, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) out[i] += a * in[i];
    });
  });
}

void CpuBackend::add_bias(const Tensor& y, const Tensor& bias) {
  cpu::dispatch_float(y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t rows = y.size(0), cols = y.size(1);
    T* out = y.data<T>();
    const T* b = bias.data<T>();
    cpu::parallel_chunks(
        rows,
        [&](std::int64_t r0, std::int64_t r1) {
          for (std::int64_t r = r0; r < r1; ++r) {
            T* row = out + r * cols;
            for (std::int64_t c = 0; c < cols; ++c) row[c] += b[c];
          }
        },
        rows * cols);
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

namespace {

// Calls fn with the activation as a compile-time constant, so each loop below is
// compiled once per activation with no branch inside it (and vectorises).
template <typename Fn>
void with_activation(Activation act, Fn&& fn) {
  switch (act) {
    case Activation::kIdentity: fn(std::integral_constant<Activation, Activation::kIdentity>{}); return;
    case Activation::kReLU: fn(std::integral_constant<Activation, Activation::kReLU>{}); return;
    case Activation::kGELU: fn(std::integral_constant<Activation, Activation::kGELU>{}); return;
    case Activation::kTanh: fn(std::integral_constant<Activation, Activation::kTanh>{}); return;
    case Activation::kSigmoid: fn(std::integral_constant<Activation, Activation::kSigmoid>{}); return;
    case Activation::kSiLU: fn(std::integral_constant<Activation, Activation::kSiLU>{}); return;
  }
}

}  // namespace

void CpuBackend::activation_forward(Activation act, const Tensor& x, const Tensor& y) {
  cpu::dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t n = x.numel();
    const T* in = x.data<T>();
    T* out = y.data<T>();
    with_activation(act, [&](auto kind) {
      cpu::parallel_chunks(n, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) out[i] = cpu::activate(kind.value, in[i]);
      });
    });
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
    with_activation(act, [&](auto kind) {
      cpu::parallel_chunks(n, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) dg[i] = cpu::activation_gradient(kind.value, in[i], out[i], g[i]);
      });
    });
  });
}

}  // namespace sprintnet
