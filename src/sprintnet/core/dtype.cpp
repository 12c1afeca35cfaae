#include "sprintnet/core/dtype.h"

#include "sprintnet/core/error.h"

namespace sprintnet {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF64: return 8;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kU8: return 1;
  }
  SN_FAIL("unknown dtype {}", static_cast<int>(dtype));
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "fp32";
    case DType::kF64: return "fp64";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
    case DType::kI32: return "int32";
    case DType::kU8: return "uint8";
  }
  SN_FAIL("unknown dtype {}", static_cast<int>(dtype));
}

DType parse_dtype(std::string_view name) {
  for (DType d : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kU8}) {
    if (dtype_name(d) == name) return d;
  }
  SN_FAIL("unknown dtype '{}' (expected fp32, fp64, bf16, fp16, int32 or uint8)", name);
}

bool is_floating(DType dtype) { return dtype != DType::kI32 && dtype != DType::kU8; }

}  // namespace sprintnet
