#include "sprintnet/core/random.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

namespace sprintnet {

std::uint32_t Generator::next_u32() {
  // Each Philox block yields four values; offset picks the block and the lane.
  const std::uint64_t block = state_.offset / 4;
  const auto lane = static_cast<unsigned>(state_.offset % 4);
  ++state_.offset;
  return philox4x32_10(state_.seed, block, state_.stream).v[lane];
}

float Generator::uniform_float() { return uint_to_unit_float(next_u32()); }

double Generator::uniform_double() {
  const std::uint64_t hi = next_u32() >> 5;  // 27 bits
  const std::uint64_t lo = next_u32() >> 6;  // 26 bits
  return static_cast<double>((hi << 26) | lo) * (1.0 / 9007199254740992.0);
}

double Generator::normal() {
  const double u1 = 1.0 - uniform_double();  // (0, 1]: log is finite
  const double u2 = uniform_double();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::uint64_t Generator::below(std::uint64_t n) {
  if (n <= 1) return 0;
  const std::uint64_t limit = (UINT64_MAX / n) * n;
  for (;;) {
    const std::uint64_t r = (static_cast<std::uint64_t>(next_u32()) << 32) | next_u32();
    if (r < limit) return r % n;
  }
}

std::vector<std::int32_t> epoch_permutation(std::uint64_t seed, std::uint64_t epoch, std::int64_t n) {
  std::vector<std::uint64_t> keyed(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto idx = static_cast<std::uint64_t>(i);
    keyed[idx] = (static_cast<std::uint64_t>(permutation_key(seed, epoch, idx)) << 32) | idx;
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::int32_t> order(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(keyed[i] & 0xFFFFFFFFu);
  return order;
}

}  // namespace sprintnet
