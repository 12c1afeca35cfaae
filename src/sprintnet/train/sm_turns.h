#pragma once
// Runs that share a GPU (a sweep's workers) take turns for its SMs. A run whose epochs are one
// persistent kernel (every kernel of the fused engine) holds that kernel's share of the
// GPU from its first epoch to its last evaluation (TrainPlan::sm_footprint()); with turns, about as
// many runs train at once as the GPU holds their kernels, and the others wait with their model, data
// and plan built, instead of every run's epochs interleaving (docs/SWEEP.md). Turns are first come,
// first served: a run that needs a large share is not overtaken by smaller ones.
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>

namespace sprintnet::train {

class SmTurns {
 public:
  // A turn: `sms` SMs of one GPU, given back when it is destroyed or released.
  class Turn {
   public:
    Turn() = default;
    Turn(Turn&& other) noexcept;
    Turn& operator=(Turn&& other) noexcept;
    ~Turn() { release(); }
    void release();
    bool held() const { return owner_ != nullptr; }

   private:
    friend class SmTurns;
    Turn(SmTurns* owner, int device, int sms) : owner_(owner), device_(device), sms_(sms) {}
    SmTurns* owner_ = nullptr;
    int device_ = 0, sms_ = 0;
  };

  // Waits until `sms` of the `total` units of GPU `device` are free and every earlier caller for
  // that GPU has had its turn, then holds them. `sms` over `total` is taken as the whole GPU. Every
  // caller for one GPU passes the same `total` (TrainPlan::kGpuShares).
  Turn take(int device, int sms, int total);
  // Callers waiting for a turn on GPU `device`.
  int waiting(int device);

 private:
  struct Gpu {
    int total = 0, used = 0;
    std::uint64_t next_ticket = 0, serving = 0;
  };
  Gpu& gpu(int device, int total);
  void give_back(int device, int sms);

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, Gpu> gpus_;  // a node per GPU: waiters keep references to theirs
};

}  // namespace sprintnet::train
