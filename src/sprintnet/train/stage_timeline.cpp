#include "sprintnet/train/stage_timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace sprintnet::train {

StageTimeline read_stage_timeline(const std::vector<std::int64_t>& clock, int blocks, std::int64_t region,
                                  std::int64_t steps) {
  if (blocks <= 0 || region <= 2 || steps < 2 || static_cast<std::int64_t>(clock.size()) < blocks * region) {
    throw std::invalid_argument(fmt::format("stage timeline: {} stamps for {} blocks of {} and {} steps", clock.size(),
                                            blocks, region, steps));
  }
  const auto at = [&](int b, std::int64_t i) { return clock[static_cast<std::size_t>(b * region + i)]; };
  std::int64_t written = -1;
  for (int b = 0; b < blocks; ++b) {
    std::int64_t n = 0;
    while (n < region && at(b, n) != 0) ++n;
    if (written >= 0 && n != written) {
      throw std::invalid_argument(fmt::format("stage timeline: block {} wrote {} stamps, block 0 {}", b, n, written));
    }
    written = n;
  }
  const std::int64_t per_step = (written - 2) / steps;
  if (per_step < 1) throw std::invalid_argument(fmt::format("stage timeline: {} stamps for {} steps", written, steps));
  StageTimeline t;
  t.blocks = blocks;
  t.stamps_per_step = static_cast<int>(per_step);
  t.steps = steps - 1;
  t.offset.assign(blocks, std::vector<double>(per_step, 0.0));
  t.last.assign(blocks, std::vector<std::int64_t>(per_step, 0));
  const auto stamp = [&](int b, std::int64_t s, std::int64_t k) { return at(b, 2 + s * per_step + k); };
  for (std::int64_t s = 1; s < steps; ++s) {
    std::int64_t arrival = 0;  // the previous step's last arrival
    for (int b = 0; b < blocks; ++b) arrival = std::max(arrival, stamp(b, s - 1, per_step - 1));
    for (std::int64_t k = 0; k < per_step; ++k) {
      int latest = 0;
      for (int b = 0; b < blocks; ++b) {
        t.offset[b][k] += 1e-3 * static_cast<double>(stamp(b, s, k) - arrival);
        if (stamp(b, s, k) > stamp(latest, s, k)) latest = b;
      }
      ++t.last[latest][k];
    }
  }
  for (auto& row : t.offset) {
    for (double& v : row) v /= static_cast<double>(t.steps);
  }
  return t;
}

std::string format_stage_timeline(const StageTimeline& t) {
  std::string out = fmt::format(
      "stage timeline (us after the previous step's last arrival, mean of {} steps; * last of all blocks in over "
      "half the steps)\nblock",
      t.steps);
  for (int k = 0; k < t.stamps_per_step; ++k) out += fmt::format(" {:>7}", fmt::format("s{}", k));
  out += '\n';
  for (int b = 0; b < t.blocks; ++b) {
    out += fmt::format("{:>5}", b);
    for (int k = 0; k < t.stamps_per_step; ++k) {
      out += fmt::format(" {:>6.2f}{}", t.offset[b][k], 2 * t.last[b][k] > t.steps ? '*' : ' ');
    }
    out += '\n';
  }
  return out;
}

}  // namespace sprintnet::train
