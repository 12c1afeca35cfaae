#pragma once
// Compares two JSON documents: integers, strings, booleans and structure
// exactly; floating-point numbers within a relative tolerance. Each
// difference is reported with its path ("schedule[2].lr[7]").
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sprintnet::parity {

void compare_json(const nlohmann::ordered_json& actual, const nlohmann::ordered_json& expected, double tolerance,
                  const std::string& path, std::vector<std::string>& differences);

}  // namespace sprintnet::parity
