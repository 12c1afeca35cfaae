#include "sprintnet/ops/cpu/bf16_copy.h"

#include <bit>

#include "sprintnet/ops/cpu/dispatch.h"

namespace sprintnet::cpu {

// The same rounding as float_to_bf16_bits, written branch-free so it vectorises; the library is
// built for baseline x86-64, so the wider instruction sets come as clones chosen at load time.
__attribute__((target_clones("avx512f", "avx2", "default"))) void copy_to_bf16_serial(const float* in,
                                                                                     std::uint16_t* out,
                                                                                     std::int64_t n) {
  const float* __restrict src = in;
  std::uint16_t* __restrict dst = out;
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(src[i]);
    const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
    const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
    dst[i] = static_cast<std::uint16_t>(nan ? ((bits >> 16) | 0x40u) : rounded);
  }
}

void copy_to_bf16(const float* in, std::uint16_t* out, std::int64_t n) {
  parallel_chunks(n, [&](std::int64_t begin, std::int64_t end) { copy_to_bf16_serial(in + begin, out + begin, end - begin); });
}

}  // namespace sprintnet::cpu
