#include "sprintnet/sweep/worker_plan.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "sprintnet/core/device.h"
#include "sprintnet/core/error.h"
#include "sprintnet/io/progress_format.h"

namespace sprintnet::sweep {
namespace {

// Measured on an H100 (docs/PERFORMANCE.md, "Runs side by side"): 8 default runs at once are the
// knee of the throughput curve; more only add memory.
constexpr int kMaxRunsPerGpu = 8;
// A step of this many FLOPs keeps the GPU's SMs busy by itself (4x4096 at batch 128: ~40 GFLOP per
// step runs at ~75 % of the H100's bf16 rate), so such models gain little from sharing.
constexpr double kStepFlopsThatFillAGpu = 20e9;
// The config does not say how wide the inputs are (the data does); MNIST-like images are 784.
constexpr double kAssumedInputs = 784;
// Cores per CPU run when a sweep shares them out by itself: the compiled CPU step does the most work
// per core on one thread (16-core host, fp32, steps per ms per core: 3x256x128 0.44 / 0.44 / 0.37 /
// 0.13 and 4x784x128 0.056 / 0.056 / 0.048 / 0.024 at 1 / 2 / 4 / 16 threads; the 2-core machine:
// 1.04 / 0.70 at 1 / 2 threads; docs/PERFORMANCE.md), so one run a core.
constexpr std::int64_t kCpuThreadsPerRun = 1;
// Of the memory available, what a sweep's CPU runs may take together (the rest: the data set, the
// system, other programs).
constexpr double kHostMemoryShare = 0.75;

double model_params(const Config& config) {
  double params = 0.0, fan_in = kAssumedInputs;
  for (const std::int64_t width : config.model.hidden) {
    params += fan_in * static_cast<double>(width);
    fan_in = static_cast<double>(width);
  }
  return params + fan_in * static_cast<double>(std::max<std::int64_t>(config.model.classes, 10));
}

}  // namespace

std::int64_t cpu_run_bytes(const Config& config) {
  const OptimConfig& o = config.optim;
  const int states = o.type != "sgd" ? 2 : (o.momentum > 0.0 ? 1 : 0);
  const bool bf16 = config.device.precision == "bf16";
  // fp32 master weights and gradients, the optimizer's state, the bf16 copy.
  const double per_param = 8.0 + 4.0 * states + (bf16 ? 2.0 : 0.0);
  double widths = kAssumedInputs;
  for (const std::int64_t width : config.model.hidden) widths += static_cast<double>(width);
  widths += static_cast<double>(std::max<std::int64_t>(config.model.classes, 10));
  // Per row of a batch: each layer's output, pre-activation and gradients (fp32, and bf16 copies).
  const double rows = static_cast<double>(config.train.batch_size + config.train.eval_batch_size);
  constexpr double kBuffersPerWidth = 5.0 * 4.0;
  constexpr double kOverhead = 64.0 * (1 << 20);  // thread stacks, oneDNN's primitives and scratch
  return static_cast<std::int64_t>(model_params(config) * per_param + rows * widths * kBuffersPerWidth + kOverhead);
}

std::int64_t available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

int auto_runs_per_gpu(const Config& config) {
  const double params = model_params(config);
  const double step_flops = 6.0 * static_cast<double>(config.train.batch_size) * params;  // forward 2, backward 4
  const int fit = static_cast<int>(kStepFlopsThatFillAGpu / std::max(step_flops, 1.0));
  return std::clamp(fit, 1, kMaxRunsPerGpu);
}

WorkerPlan plan_workers(const Config& config, std::size_t runs, int parallel, int gpus, int cpu_cores,
                        std::int64_t host_memory) {
  SN_CHECK(parallel >= 0, "--parallel {}: expected 0 (auto) or a number of runs at once", parallel);
  WorkerPlan plan;
  const std::size_t at_most = std::max<std::size_t>(runs, 1);
  // "auto" by the GPU count given (parse_device would ask the machine).
  const Device device = config.device.name == "auto" ? (gpus > 0 ? Device::cuda(0) : Device::cpu())
                                                     : parse_device(config.device.name);
  if (device.is_cpu()) {
    // auto: as many runs as the cores hold at the config's threads a run, or one each.
    const std::int64_t per_run = config.device.threads > 0 ? config.device.threads : kCpuThreadsPerRun;
    std::int64_t fit = std::max<std::int64_t>(1, cpu_cores / per_run);
    if (host_memory > 0) {  // and as many as memory holds
      const auto in_memory = static_cast<std::int64_t>(kHostMemoryShare * static_cast<double>(host_memory) /
                                                       static_cast<double>(cpu_run_bytes(config)));
      fit = std::clamp<std::int64_t>(in_memory, 1, fit);
    }
    const std::size_t workers =
        std::min<std::size_t>(parallel == 0 ? static_cast<std::size_t>(fit) : static_cast<std::size_t>(parallel), at_most);
    plan.devices.assign(workers, "cpu");
    if (workers > 1 && config.device.threads == 0) {
      plan.cpu_threads = std::max<std::int64_t>(1, cpu_cores / static_cast<std::int64_t>(workers));
    }
    plan.reason = workers == 1 ? "one run at a time on the CPU"
                               : fmt::format("{} runs at a time on the CPU, {} each{}", workers,
                                             counted(plan.cpu_threads == 0 ? config.device.threads : plan.cpu_threads,
                                                     "thread"),
                                             parallel == 0 ? " (auto: the cores shared out)" : "");
    return plan;
  }
  SN_CHECK(gpus > 0, "device.name = \"{}\": no CUDA device", config.device.name);
  // "cuda" means GPU 0 for one run; a sweep on "auto" or "cuda" takes every GPU, "cuda:K" only K.
  const bool every_gpu = config.device.name == "auto" || config.device.name == "cuda";
  SN_CHECK(every_gpu || device.index < gpus, "device.name = \"{}\": only {} CUDA device(s)", config.device.name, gpus);
  const int first = every_gpu ? 0 : device.index;
  const std::size_t count = every_gpu ? static_cast<std::size_t>(gpus) : 1;  // GPUs first, first + 1, ...
  const std::size_t per_gpu = parallel == 0 ? static_cast<std::size_t>(auto_runs_per_gpu(config))
                                            : (static_cast<std::size_t>(parallel) + count - 1) / count;
  const std::size_t workers = std::min(per_gpu * count, parallel == 0 ? at_most
                                                                      : std::min<std::size_t>(parallel, at_most));
  for (std::size_t w = 0; w < workers; ++w) {
    plan.devices.push_back(fmt::format("cuda:{}", first + static_cast<int>(w % count)));
  }
  plan.reason = fmt::format("{} at a time over {}{}", counted(static_cast<std::int64_t>(workers), "run"),
                            counted(static_cast<std::int64_t>(count), "GPU"),
                            parallel == 0 ? fmt::format(" (auto: up to {} per GPU for this model)", per_gpu) : "");
  return plan;
}

}  // namespace sprintnet::sweep
