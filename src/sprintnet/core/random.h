#pragma once
// A seeded, reproducible random generator on top of Philox. Its whole state is
// (seed, stream, offset), so checkpoints can save and restore it exactly.
#include <cstdint>
#include <vector>

#include "sprintnet/core/philox.h"

namespace sprintnet {

struct GeneratorState {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  std::uint64_t offset = 0;  // number of 32-bit values drawn so far
};

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0, std::uint64_t stream = 0) : state_{seed, stream, 0} {}

  std::uint32_t next_u32();
  // Uniform in [0, 1) with 24 random bits (float) or 53 (double).
  float uniform_float();
  double uniform_double();
  double uniform(double low, double high) { return low + (high - low) * uniform_double(); }
  // Standard normal by Box-Muller (two uniforms per value; no cached spare, so the state stays three integers).
  double normal();
  // Uniform integer in [0, n) without modulo bias (rejection).
  std::uint64_t below(std::uint64_t n);

  const GeneratorState& state() const { return state_; }
  void set_state(const GeneratorState& state) { state_ = state; }

 private:
  GeneratorState state_;
};

// The epoch's sample order: argsort of per-sample Philox keys drawn from
// (seed, epoch). Counter-based, so a GPU can produce the same permutation.
std::vector<std::int32_t> epoch_permutation(std::uint64_t seed, std::uint64_t epoch, std::int64_t n);
// Samples are sorted by permutation_key() (core/philox.h), ties broken by index.

}  // namespace sprintnet
