#pragma once
// Where the current step's batch lies in the uint8 data set, and a pixel as the batch holds it:
// shared by batch_gather.cu's kernels and the output layer's gathered forward (skinny_kernels.cuh),
// so both read the same rows and normalise them the same way. The step is read from device memory,
// so one captured launch serves every step of every epoch.
#include <cstdint>

#include "sprintnet/ops/cuda/device_error.h"
#include "sprintnet/ops/cuda/step_launch.h"

namespace sprintnet::cuda {

// The first row of the current step's batch in the epoch's order.
__device__ inline std::int64_t batch_first_row(const GatherArgs& g) {
  return (g.state != nullptr ? g.state->step % g.steps_per_epoch : 0) * (g.stride > 0 ? g.stride : g.rows) + g.first;
}
// Row `row` of the step's batch: its sample index in the data set.
__device__ inline std::int64_t batch_sample(const GatherArgs& g, std::int64_t first, std::int64_t row) {
  return g.order != nullptr ? g.order[first + row] : first + row;
}
// The same for the eager gathers (g.error set, g.order the caller's indices): an index outside
// [0, g.samples) is clamped for the read and recorded. Kept apart from batch_sample, which the
// step's hot kernels inline (the checked path in it cost the lone output layer's kernel ~4 us a step).
__device__ inline std::int64_t checked_batch_sample(const GatherArgs& g, std::int64_t first, std::int64_t row) {
  const DeviceErrorCode code = g.dst != nullptr ? DeviceErrorCode::kGatherRowsIndex : DeviceErrorCode::kGatherLabelsIndex;
  return checked_index(g.order[first + row], g.samples, first + row, code, g.error);
}
// A pixel normalised (before its rounding to the compute type).
__device__ inline float normalized_pixel(const GatherArgs& g, std::uint8_t v) {
  return static_cast<float>(v) * g.scale + g.shift;
}

}  // namespace sprintnet::cuda
