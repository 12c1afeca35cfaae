#pragma once
// Errors that kernels find in their data: a label or an index out of range.
// A kernel cannot throw and must not read out of bounds, so it clamps the read
// (the result of that row is then meaningless), records the first bad value in
// this small device buffer, and carries on. The backend copies the record to
// the host at synchronize() and at every copy to host memory, clears it, and
// throws a sprintnet::Error there ("cross_entropy: label 12 at row 5 outside
// [0, 10)"). So an invalid label surfaces at the next synchronisation point,
// not at the op that consumed it.
#include <cstdint>

namespace sprintnet::cuda {

enum class DeviceErrorCode : std::int32_t {
  kNone = 0,
  kCrossEntropyLabel,
  kMseLabel,
  kGatherRowsIndex,
  kGatherLabelsIndex,
};

struct DeviceError {
  std::int32_t code;      // a DeviceErrorCode; kNone while nothing went wrong
  std::int32_t value;     // the bad label or index
  std::int64_t position;  // the row (or batch position) it was found at
  std::int64_t bound;     // the valid range is [0, bound)
};

#ifdef __CUDACC__
// Returns `value` clamped into [0, bound) (bound >= 1); when it was outside,
// records it unless an earlier error is already recorded (first one wins).
__device__ inline std::int64_t checked_index(std::int32_t value, std::int64_t bound, std::int64_t position,
                                             DeviceErrorCode code, DeviceError* error) {
  if (value >= 0 && value < bound) return value;
  if (atomicCAS(&error->code, static_cast<std::int32_t>(DeviceErrorCode::kNone), static_cast<std::int32_t>(code)) ==
      static_cast<std::int32_t>(DeviceErrorCode::kNone)) {
    error->value = value;
    error->position = position;
    error->bound = bound;
  }
  return value < 0 ? 0 : bound - 1;
}
#endif

}  // namespace sprintnet::cuda
