#include <cstring>

#include "sprintnet/memory/allocator.h"
#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dispatch.h"

namespace sprintnet {

Allocator& CpuBackend::allocator() { return cpu_allocator(); }

void CpuBackend::copy(const Tensor& dst, const Tensor& src) {
  SN_CHECK(dst.device().is_cpu() && src.device().is_cpu(), "CPU copy between {} and {}", src.device().str(),
           dst.device().str());
  if (dst.nbytes() > 0 && dst.raw_data() != src.raw_data()) std::memcpy(dst.raw_data(), src.raw_data(), dst.nbytes());
}

void CpuBackend::fill(const Tensor& t, double value) {
  const std::int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::kI32: std::fill_n(t.data<std::int32_t>(), n, static_cast<std::int32_t>(value)); return;
    case DType::kU8: std::fill_n(t.data<std::uint8_t>(), n, static_cast<std::uint8_t>(value)); return;
    case DType::kBF16:
    case DType::kF16: {
      const Tensor f = Tensor::full(t.shape(), value, DType::kF32).to(t.dtype());
      std::memcpy(t.raw_data(), f.raw_data(), t.nbytes());
      return;
    }
    default:
      cpu::dispatch_float(t.dtype(), [&](auto zero) {
        using T = decltype(zero);
        std::fill_n(t.data<T>(), n, static_cast<T>(value));
      });
  }
}

}  // namespace sprintnet
