#include "sprintnet/sweep/gpu_gate.h"

#include <fmt/format.h>

#include "sprintnet/sweep/worker_plan.h"

namespace sprintnet::sweep {

GpuGate::GpuGate(bool gated, std::size_t runs_per_gpu, int gpus)
    : gated_(gated), runs_per_gpu_(runs_per_gpu), gpus_(gpus) {
  if (!gated) open_ = gpus;
}

std::string GpuGate::estimate(double run_s, std::size_t remaining) {
  std::lock_guard lock(mutex_);
  if (open_) return "";
  open_ = gpus_worth_opening(remaining, runs_per_gpu_, run_s, gpus_);
  decided_.notify_all();
  return fmt::format("{} of {} GPUs train: a run takes ~{:.2f} s, {} more to start, a GPU's context ~{:.1f} s", *open_,
                     gpus_, run_s, remaining, kGpuContextSeconds);
}

void GpuGate::close() {
  std::lock_guard lock(mutex_);
  if (open_) return;
  open_ = 1;
  decided_.notify_all();
}

bool GpuGate::trains(int index) {
  if (index == 0) return true;
  std::unique_lock lock(mutex_);
  decided_.wait(lock, [this] { return open_.has_value(); });
  return index < *open_;
}

}  // namespace sprintnet::sweep
