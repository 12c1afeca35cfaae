#pragma once
// The sharded optimizer update of data-parallel training (ZeRO stage 1, docs/DISTRIBUTED.md):
// each range of the flat parameter buffers the step updates at once (a layer, or all of them)
// is cut into `world` equal shards; rank r reduce-scatters the gradients into its shard, updates
// the fp32 master weights and optimizer state there, and all-gathers the compute copy. Equal
// shards (NCCL's reduce-scatter and all-gather take one count) of a multiple of 4 elements (the
// flat update's vector width). Plain arithmetic, tested in CI.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sprintnet::dist {

inline constexpr std::int64_t kShardAlignment = 4;  // elements: the flat update works on float4s

struct FlatRange {
  std::int64_t begin = 0, end = 0;  // elements of the flat buffers
  std::int64_t size() const { return end - begin; }
  bool operator==(const FlatRange&) const = default;
};

// Rank `rank`'s shard of `range` over `world` ranks (the range must split: see sharding_unsupported).
FlatRange shard_of(const FlatRange& range, int rank, int world);

// Why the update cannot be sharded over `world` ranks (naming the range that does not split, or
// the precision), or nullopt when it can. fp16 is not sharded: its dynamic loss scaling decides
// from every gradient whether the step's update is skipped.
std::optional<std::string> sharding_unsupported(const std::vector<FlatRange>& ranges, int world,
                                                const std::string& precision);

// `device.update` resolved for a job of `world` ranks: "replicated" or "sharded" ("auto" is
// sharded wherever it can run, measured never slower: docs/PERFORMANCE.md, else replicated);
// asking for "sharded" where it cannot run is an error naming why.
std::string resolve_update(const std::string& asked, const std::vector<FlatRange>& ranges, int world,
                           const std::string& precision);

}  // namespace sprintnet::dist
