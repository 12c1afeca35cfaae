#include "sprintnet/dist/update_sharding.h"

#include <fmt/format.h>

#include "sprintnet/core/error.h"

namespace sprintnet::dist {

FlatRange shard_of(const FlatRange& range, int rank, int world) {
  SN_CHECK(world >= 1 && rank >= 0 && rank < world, "rank {} of {}: not a rank of the job", rank, world);
  SN_CHECK(range.size() % (kShardAlignment * world) == 0,
           "parameters [{}, {}) do not split into {} shards of a multiple of {} elements", range.begin, range.end,
           world, kShardAlignment);
  const std::int64_t shard = range.size() / world;
  return {range.begin + rank * shard, range.begin + (rank + 1) * shard};
}

std::optional<std::string> sharding_unsupported(const std::vector<FlatRange>& ranges, int world,
                                                const std::string& precision) {
  if (precision == "fp16") {
    return std::string("device.precision = \"fp16\" (its loss scaling checks every gradient before any update)");
  }
  for (const FlatRange& r : ranges) {
    if (r.size() % (kShardAlignment * world) != 0) {
      return fmt::format("parameters [{}, {}) ({} elements) do not split into {} shards of a multiple of {}", r.begin,
                         r.end, r.size(), world, kShardAlignment);
    }
  }
  return std::nullopt;
}

std::string resolve_update(const std::string& asked, const std::vector<FlatRange>& ranges, int world,
                           const std::string& precision) {
  if (asked == "replicated" || world == 1) return "replicated";  // one rank holds every shard anyway
  const auto why_not = sharding_unsupported(ranges, world, precision);
  // auto: sharded wherever it can run (2 H200s: never slower, 3-5 % faster where the update is a
  // large share of the step; docs/PERFORMANCE.md), else replicated.
  if (asked == "auto") return why_not ? "replicated" : "sharded";
  SN_CHECK(!why_not, "device.update = \"sharded\" cannot shard the update over {} GPUs: {}", world,
           why_not.value_or(""));
  return "sharded";
}

}  // namespace sprintnet::dist
