#pragma once
// How many hardware work queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default) this process's CUDA
// contexts open. A context with fewer is created and released faster by the driver: measured
// (docs/PERFORMANCE.md, "Fewer hardware queues a context"): the default run ~15-40 ms shorter on
// the H100, a 64-run sweep over 4 H200s ~0.2 s, and the compiled step's epochs unchanged. A
// process that trains alone (or a sweep's runs, a stream each) keeps 2: one queue left for copies
// and side streams. Data-parallel ranks, and the launcher whose environment they inherit, keep the
// driver's default, where NCCL's streams overlap the backward. A value the user set always wins.
// Must run before the process's first CUDA call: the driver reads it when it starts.
#include <optional>
#include <string>

#include "sprintnet/dist/rank_info.h"

namespace sprintnet::dist {

inline constexpr const char* kDeviceConnectionsVariable = "CUDA_DEVICE_MAX_CONNECTIONS";

// The value to set, or nullopt to leave the environment as it is. `starts_ranks`: this process
// launches data-parallel ranks (`--gpus N`, NNODES), which inherit its environment.
std::optional<std::string> preferred_device_connections(const Environment& env, bool starts_ranks);

// Sets it in this process's environment where preferred_device_connections says so.
void prefer_few_device_connections(bool starts_ranks = false);

}  // namespace sprintnet::dist
