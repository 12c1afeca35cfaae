#pragma once
// The host-mapped progress record (fused_epoch.h's FusedProgress) every fused kernel writes once a
// step: one 16-byte volatile store, so the host reads a step count and its loss sum together.
#include <cstdint>

#include "sprintnet/ops/cuda/fused/fused_epoch.h"

namespace sprintnet::cuda::fused {

__device__ inline void write_progress(FusedProgress* progress, std::int64_t steps_done, double loss_sum) {
  if (progress == nullptr) return;
  asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(progress), "l"(steps_done), "l"(__double_as_longlong(loss_sum))
               : "memory");
}

}  // namespace sprintnet::cuda::fused
