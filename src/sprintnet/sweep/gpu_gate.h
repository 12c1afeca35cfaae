#pragma once
// When a sweep on auto has several GPUs, whether the ones after the first are worth their CUDA
// contexts (docs/SWEEP.md, "Scheduling"): the first GPU's workers start at once; the others' wait
// here, before touching their GPU, until the first epoch of a run says how long a run takes, then
// train only on the GPUs gpus_worth_opening picks (worker_plan.h). A short sweep of small models
// thus stays on one GPU, where a second context cost more than it saved.
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>

namespace sprintnet::sweep {

class GpuGate {
 public:
  // `gated`: false lets every GPU train at once (an explicit --parallel, or one GPU).
  GpuGate(bool gated, std::size_t runs_per_gpu, int gpus);
  bool gated() const { return gated_; }

  // A first-GPU run's estimated wall time, with `remaining` runs not yet started: the first call
  // decides how many GPUs train; later calls change nothing. Returns the decision's one-line
  // account for the sweep's banner (empty when this call did not decide).
  std::string estimate(double run_s, std::size_t remaining);
  // No estimate will come (the first GPU found no run left, or the sweep stops): the first GPU alone.
  void close();
  // Whether GPU `index` (0 = the first) trains; blocks a worker of a later GPU until decided.
  bool trains(int index);

 private:
  bool gated_;
  std::size_t runs_per_gpu_;
  int gpus_;
  std::mutex mutex_;
  std::condition_variable decided_;
  std::optional<int> open_;  // GPUs that train, once decided
};

}  // namespace sprintnet::sweep
