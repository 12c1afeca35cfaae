#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dispatch.h"

namespace sprintnet {

void CpuBackend::gather_rows_u8(const Tensor& src, const Tensor& indices, const Tensor& dst, double scale,
                                double shift) {
  const std::int64_t rows = indices.size(0), cols = src.size(1), src_rows = src.size(0);
  const std::int32_t* idx = indices.data<std::int32_t>();
  for (std::int64_t r = 0; r < rows; ++r) {
    SN_CHECK(idx[r] >= 0 && idx[r] < src_rows, "gather: index {} outside [0, {})", idx[r], src_rows);
  }
  cpu::dispatch_float(dst.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::uint8_t* in = src.data<std::uint8_t>();
    T* out = dst.data<T>();
    const T s = static_cast<T>(scale), t = static_cast<T>(shift);
    // The rows are scattered over the data set (47 MB for MNIST), so each one is a trip to memory:
    // the loop fetches row r + kAhead while it converts row r (it was bound by those loads).
    constexpr std::int64_t kAhead = 4, kLine = 64;
#pragma omp parallel for schedule(static) if (rows * cols >= cpu::kParallelMinElements)
    for (std::int64_t r = 0; r < rows; ++r) {
      if (r + kAhead < rows) {
        const std::uint8_t* next = in + static_cast<std::int64_t>(idx[r + kAhead]) * cols;
        for (std::int64_t c = 0; c < cols; c += kLine) __builtin_prefetch(next + c);
        __builtin_prefetch(next + cols - 1);  // the row's last line, when it does not start on a line
      }
      const std::uint8_t* __restrict row = in + static_cast<std::int64_t>(idx[r]) * cols;
      T* __restrict out_row = out + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) out_row[c] = static_cast<T>(row[c]) * s + t;
    }
  });
}

void CpuBackend::gather_labels(const Tensor& labels, const Tensor& indices, const Tensor& dst) {
  const std::int32_t* idx = indices.data<std::int32_t>();
  const std::int32_t* in = labels.data<std::int32_t>();
  std::int32_t* out = dst.data<std::int32_t>();
  for (std::int64_t r = 0; r < indices.numel(); ++r) {
    SN_CHECK(idx[r] >= 0 && idx[r] < labels.numel(), "gather: index {} outside [0, {})", idx[r], labels.numel());
    out[r] = in[idx[r]];
  }
}

}  // namespace sprintnet
