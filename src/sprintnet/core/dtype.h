#pragma once
// Element types a Tensor can hold. Compute on the CPU is in fp32 or fp64;
// bf16/fp16 are storage and GPU matrix-unit types.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sprintnet {

enum class DType : std::uint8_t { kF32, kF64, kBF16, kF16, kI32, kU8 };

std::size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
// Accepts the names dtype_name() returns ("fp32", "bf16", ...); throws otherwise.
DType parse_dtype(std::string_view name);
bool is_floating(DType dtype);

// Maps a C++ element type to its DType, for the typed accessors of Tensor.
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kF32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kF64; };
template <> struct DTypeOf<std::int32_t> { static constexpr DType value = DType::kI32; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::kU8; };

}  // namespace sprintnet
