#pragma once
// How many hardware work queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default) this process's CUDA
// contexts open. A context with fewer is created and released faster by the driver: measured
// (docs/PERFORMANCE.md, "Fewer hardware queues a context"): the default run's median 0.636 -> 0.530 s
// on an H100, the compiled step's epochs unchanged. `sprintnet train`, `eval` and `predict` on one
// GPU take 2 (one queue left for copies and side streams). The driver's default stays for
// data-parallel ranks and the launcher whose environment they inherit (NCCL's streams overlap the
// backward) and for sweeps (eight runs a GPU on two queues slowed each other: 64 runs on one H200
// 3.49 -> 3.98 s). A value the user set always wins.
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
