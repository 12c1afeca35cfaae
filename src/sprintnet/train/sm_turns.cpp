#include "sprintnet/train/sm_turns.h"

#include <algorithm>
#include <utility>

#include "sprintnet/core/error.h"

namespace sprintnet::train {

SmTurns::Turn::Turn(Turn&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), device_(other.device_), sms_(other.sms_) {}

SmTurns::Turn& SmTurns::Turn::operator=(Turn&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    device_ = other.device_;
    sms_ = other.sms_;
  }
  return *this;
}

void SmTurns::Turn::release() {
  if (owner_ != nullptr) std::exchange(owner_, nullptr)->give_back(device_, sms_);
}

SmTurns::Gpu& SmTurns::gpu(int device, int total) {
  SN_CHECK(device >= 0 && total > 0, "SmTurns: GPU {} with {} SMs", device, total);
  Gpu& g = gpus_[device];
  if (g.total == 0) g.total = total;
  SN_CHECK(g.total == total, "SmTurns: GPU {} is counted in {} units, not {}", device, g.total, total);
  return g;
}

SmTurns::Turn SmTurns::take(int device, int sms, int total) {
  std::unique_lock lock(mutex_);
  Gpu& g = gpu(device, total);
  const int need = std::clamp(sms, 1, g.total);
  const std::uint64_t ticket = g.next_ticket++;
  changed_.wait(lock, [&] { return g.serving == ticket && g.used + need <= g.total; });
  g.used += need;
  ++g.serving;
  changed_.notify_all();  // the next ticket may fit too
  return Turn(this, device, need);
}

int SmTurns::waiting(int device) {
  const std::lock_guard lock(mutex_);
  const auto it = gpus_.find(device);
  return it == gpus_.end() ? 0 : static_cast<int>(it->second.next_ticket - it->second.serving);
}

void SmTurns::give_back(int device, int sms) {
  {
    const std::lock_guard lock(mutex_);
    gpus_.at(device).used -= sms;
  }
  changed_.notify_all();
}

}  // namespace sprintnet::train
