#pragma once
// When a data-parallel rank has stopped making progress (docs/DISTRIBUTED.md, "Faults"). The rank
// records marks on its stream as it enqueues work (every few steps, and before each wait), and a
// watchdog thread notes when the device passes each one. The rank is stalled when a mark has been
// pending for longer than the limit with no mark passed meanwhile: a peer that died or hangs
// leaves this rank's collectives waiting forever. A rank with nothing pending is never stalled
// (rank 0 evaluating or writing a checkpoint while the others wait is their stall, not its own),
// and a long epoch that keeps passing marks never is either. Plain bookkeeping on times in
// seconds, tested in CI; the communicator feeds it (marks written into pinned memory by the device).
#include <cstdint>

namespace sprintnet::dist {

// Longest a rank waits without progress before it ends the job: well inside the 60 s within
// which a job must stop after a rank dies, and far beyond any pause of a healthy job (rank 0's
// evaluation and checkpoint snapshot between epochs take well under a second for the largest
// models bench/scaling trains).
inline constexpr double kStallLimitSeconds = 30.0;

class StallDetector {
 public:
  explicit StallDetector(double limit_s = kStallLimitSeconds) : limit_s_(limit_s) {}

  // A mark was recorded at `now`.
  void recorded(double now);
  // The device passed the oldest pending mark; noticed at `now`.
  void passed(double now);

  std::int64_t pending() const { return pending_; }
  // Seconds without progress at `now` while something is pending (0 when nothing is).
  double idle_s(double now) const;
  bool stalled(double now) const { return idle_s(now) > limit_s_; }
  double limit_s() const { return limit_s_; }

 private:
  double limit_s_;
  std::int64_t pending_ = 0;
  double since_ = 0.0;  // when progress was last seen: the last pass, or the first mark after an idle spell
};

}  // namespace sprintnet::dist
