#pragma once
// fp32 → bf16 (round to nearest even, NaN kept quiet: core/half.h's rule) over a buffer: the
// bf16 copies the compiled CPU step's products read (weights after each update, activations,
// gradients).
#include <cstdint>

namespace sprintnet::cpu {

// On the calling thread (compiled for AVX-512 and AVX2 too, picked at run time).
void copy_to_bf16_serial(const float* in, std::uint16_t* out, std::int64_t n);
// In parallel chunks when n is large enough to pay for the threads.
void copy_to_bf16(const float* in, std::uint16_t* out, std::int64_t n);

}  // namespace sprintnet::cpu
