#include "sprintnet/dist/device_connections.h"

#include <cstdlib>

#include "sprintnet/core/error.h"

namespace sprintnet::dist {

std::optional<std::string> preferred_device_connections(const Environment& env, bool starts_ranks) {
  if (env(kDeviceConnectionsVariable).has_value() || starts_ranks) return std::nullopt;
  try {
    if (rank_info_from(env).distributed()) return std::nullopt;
  } catch (const Error&) {
    // Launcher variables that do not name a rank (an sbatch script's SLURM_* without MASTER_ADDR, a
    // stray WORLD_SIZE): not this function's to report; the trainer does, where it needs a rank.
    return std::nullopt;
  }
  return "2";
}

void prefer_few_device_connections(bool starts_ranks) {
  const std::optional<std::string> value = preferred_device_connections(process_environment(), starts_ranks);
  if (value) setenv(kDeviceConnectionsVariable, value->c_str(), 0);  // 0: never over a value set meanwhile
}

}  // namespace sprintnet::dist
