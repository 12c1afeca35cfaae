#pragma once
// Host conversions between fp32 and the 16-bit float formats, round to nearest even.
#include <bit>
#include <cstdint>
#include <cmath>

namespace sprintnet {

inline std::uint16_t float_to_bf16_bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // keep it a quiet NaN
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

inline float bf16_bits_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

#ifdef __FLT16_MAX__  // the compiler has _Float16 on this target (gcc >= 12; clang >= 15 on x86-64)

inline std::uint16_t float_to_fp16_bits(float value) {
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(value));
}

inline float fp16_bits_to_float(std::uint16_t bits) {
  return static_cast<float>(std::bit_cast<_Float16>(bits));
}

#else  // integer conversions, bit-exact with the hardware ones

inline std::uint16_t float_to_fp16_bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));  // quiet NaN
  if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds past 65504: infinity
  if (magnitude < 0x38800000u) {
    // Below fp16's smallest normal: adding 0.5 lines the fp16 subnormal step (2^-24)
    // up with fp32's last mantissa bit, so the FPU rounds to nearest even for us.
    const float shifted = std::bit_cast<float>(magnitude) + 0.5f;
    return static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(shifted) - 0x3F000000u));
  }
  // Rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  const std::uint32_t odd = (magnitude >> 13) & 1u;
  const std::uint32_t rounded = magnitude + 0xC8000FFFu + odd;
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

inline float fp16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  const std::uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa × 2^-24, exact in fp32
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  if (exponent == 0x1F) {  // infinity, or NaN made quiet as the hardware does
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u));
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

#endif

}  // namespace sprintnet
