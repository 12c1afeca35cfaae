#pragma once
// Known answers that tie tools/'s Python port of sprintnet (tools/sprintnet_*.py,
// used by tools/torch_reference.py) to the C++: Philox blocks, the Generator's
// draws, epoch permutations, the initial weights a Trainer builds, the
// normalisation, the LR schedules, and two tiny training runs with their
// metrics and final weights. Computed here from sprintnet itself, stored in
// golden/port_known_answers.json, and checked against the port by
// tools/test_sprintnet_port.py.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace sprintnet::parity {

inline constexpr const char* kKnownAnswersFileName = "port_known_answers.json";

// `scratch` is an empty folder for the tiny IDX files and run directories.
nlohmann::ordered_json compute_known_answers(const std::filesystem::path& scratch);

// The relative tolerance for floating-point values of a top-level section (0 = exact), with why.
double known_answer_tolerance(const std::string& section);

}  // namespace sprintnet::parity
