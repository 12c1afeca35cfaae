#include "parity/json_compare.h"

#include <cmath>

#include <fmt/format.h>

namespace sprintnet::parity {

void compare_json(const nlohmann::ordered_json& actual, const nlohmann::ordered_json& expected, double tolerance,
                  const std::string& path, std::vector<std::string>& differences) {
  if ((actual.is_number_float() || expected.is_number_float()) && actual.is_number() && expected.is_number()) {
    const double a = actual.get<double>(), e = expected.get<double>();
    if (!(std::abs(a - e) <= tolerance * std::max(std::abs(a), std::abs(e)))) {
      differences.push_back(fmt::format("{}: {:.17g} here, {:.17g} stored", path, a, e));
    }
    return;
  }
  if (actual.is_array() && expected.is_array()) {
    if (actual.size() != expected.size()) {
      differences.push_back(fmt::format("{}: {} elements here, {} stored", path, actual.size(), expected.size()));
      return;
    }
    for (std::size_t i = 0; i < actual.size(); ++i) {
      compare_json(actual[i], expected[i], tolerance, fmt::format("{}[{}]", path, i), differences);
    }
    return;
  }
  if (actual.is_object() && expected.is_object()) {
    for (const auto& [key, value] : actual.items()) {
      if (!expected.contains(key)) {
        differences.push_back(fmt::format("{}.{}: not in the stored file", path, key));
        continue;
      }
      compare_json(value, expected.at(key), tolerance, path + "." + key, differences);
    }
    for (const auto& [key, value] : expected.items()) {
      if (!actual.contains(key)) differences.push_back(fmt::format("{}.{}: stored but no longer computed", path, key));
    }
    return;
  }
  if (actual != expected) {
    differences.push_back(fmt::format("{}: {} here, {} stored", path, actual.dump(), expected.dump()));
  }
}

}  // namespace sprintnet::parity
