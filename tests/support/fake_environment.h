#pragma once
// A dist::Environment that reads from a map instead of the process's variables, for the tests of
// what the launchers' variables decide (rank_info.h, device_connections.h).
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "sprintnet/dist/rank_info.h"

namespace sprintnet::test {

inline dist::Environment fake_environment(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it != vars.end() ? std::optional<std::string>(it->second) : std::nullopt;
  };
}

}  // namespace sprintnet::test
