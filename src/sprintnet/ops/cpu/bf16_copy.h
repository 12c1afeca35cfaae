#pragma once
// fp32 → bf16 (round to nearest even) over a buffer, in parallel chunks: the bf16 copies the
// compiled CPU step's products read (weights after each update, activations, gradients).
#include <cstdint>

#include "sprintnet/core/half.h"
#include "sprintnet/ops/cpu/dispatch.h"

namespace sprintnet::cpu {

inline void copy_to_bf16(const float* in, std::uint16_t* out, std::int64_t n) {
  parallel_chunks(n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) out[i] = float_to_bf16_bits(in[i]);
  });
}

}  // namespace sprintnet::cpu
