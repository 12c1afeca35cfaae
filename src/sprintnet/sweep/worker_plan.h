#pragma once
// How a sweep fills the hardware: how many runs train at once and on which device each worker
// thread trains (docs/SWEEP.md, "Scheduling"). Workers sharing a GPU each have a stream of their
// own (open_thread_stream), so the runs of one GPU overlap instead of queueing behind each other.
#include <cstdint>
#include <string>
#include <vector>

#include "sprintnet/io/config.h"

namespace sprintnet::sweep {

struct WorkerPlan {
  std::vector<std::string> devices;  // one per worker thread: "cuda:K" (spread over the GPUs) or "cpu"
  std::int64_t cpu_threads = 0;      // device.threads of each CPU run when several share the cores; 0: the config's
  std::string reason;                // for the sweep's banner
};

// How many runs of `config` share one GPU when --parallel is auto: the default model's kernels
// occupy a few of an H100's SMs, so 8 side by side fill it (docs/PERFORMANCE.md); a model whose
// step is big enough to fill the GPU alone gets fewer.
int auto_runs_per_gpu(const Config& config);

// Bytes a CPU run of `config` holds while it trains (flat fp32 weights, gradients and optimizer
// state, the bf16 copy, activations of a training and an evaluation batch; the data set is shared):
// an estimate from the config, for how many runs fit in memory side by side.
std::int64_t cpu_run_bytes(const Config& config);

// `parallel`: runs at once (0 = auto); `gpus`: the CUDA devices present; `cpu_cores`: the host's;
// `host_memory`: bytes of memory available (0: unknown), which caps auto's CPU runs at once.
// A config on "auto"/"cuda" spreads over every GPU, "cuda:K" stays on K. On the CPU auto runs one a
// core (or as many as the cores hold at the config's device.threads); --parallel N gives N runs a
// share of the cores each.
WorkerPlan plan_workers(const Config& config, std::size_t runs, int parallel, int gpus, int cpu_cores,
                        std::int64_t host_memory = 0);
// Memory the host has available now (MemAvailable), or 0 when it cannot tell.
std::int64_t available_host_memory();

}  // namespace sprintnet::sweep
