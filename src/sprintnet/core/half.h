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

inline std::uint16_t float_to_fp16_bits(float value) {
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(value));
}

inline float fp16_bits_to_float(std::uint16_t bits) {
  return static_cast<float>(std::bit_cast<_Float16>(bits));
}

}  // namespace sprintnet
