#pragma once
// How a sweep fills the hardware: how many runs train at once and on which device each worker
// thread trains (docs/SWEEP.md, "Scheduling"). Workers sharing a GPU each have a stream of their
// own (open_thread_stream), so the runs of one GPU overlap instead of queueing behind each other.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sprintnet/io/config.h"

namespace sprintnet::sweep {

struct WorkerPlan {
  std::vector<std::string> devices;  // one per worker thread: "cuda:K" (spread over the GPUs) or "cpu"
  std::int64_t cpu_threads = 0;      // device.threads of each CPU run when several share the cores; 0: the config's
  std::string reason;                // for the sweep's banner
  // auto over several GPUs: only the first GPU's workers start at once; the others wait for the first
  // run's time and start where gpus_worth_opening says a GPU's context pays for itself.
  bool open_gpus_by_first_run = false;
  std::size_t runs_per_gpu = 0;  // workers a GPU (CUDA plans)
};

// What a GPU after the first costs a sweep before it trains and when it exits: its CUDA context
// created (the driver makes them one at a time, beside the first GPU's runs) and released. 2 and 4
// H200s: ~0.3-0.5 s (docs/PERFORMANCE.md, "Where the contexts' time goes").
inline constexpr double kGpuContextSeconds = 0.4;

// How many GPUs (1 to `gpus`) finish `remaining` runs soonest, fewer on a tie: each GPU trains
// `per_gpu` runs at once in `wave_s` a wave, and each one after the first costs `context_s` first.
// A short sweep of small models stays on one GPU (32 default runs took as long on two H200s as on
// one); a long one spreads over all.
int gpus_worth_opening(std::size_t remaining, std::size_t per_gpu, double wave_s, int gpus,
                       double context_s = kGpuContextSeconds);

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
