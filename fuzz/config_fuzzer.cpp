// Fuzzes the config loader two ways with every input:
//  1. the whole input as a TOML file (load_config);
//  2. each line of it as one --set override (config_from_overrides), so a
//     line such as "optim.lr = 0.1" means the same thing in both; blank
//     lines and "#" comments are left out, as a shell user would.
// An accepted config must round-trip: config_to_toml's text, loaded again,
// gives the same config. That is what a run directory relies on to record
// exactly what ran.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "sprintnet/core/error.h"
#include "sprintnet/io/config.h"

namespace sprintnet::fuzz {
namespace {

void check_round_trip(const Config& config) {
  static ScratchFile scratch("round-trip.toml");
  const std::string text = config_to_toml(config);
  try {
    const std::string again = config_to_toml(load_config(scratch.write(text)));
    require(again == text, fmt::format("config_to_toml changed in the round trip:\n{}\nbecame\n{}", text, again));
  } catch (const Error& e) {
    require(false, fmt::format("an accepted config fails to load from its own config_to_toml: {}\n{}", e.what(), text));
  }
}

void load_file(std::string_view text) {
  static ScratchFile scratch("config.toml");
  Config config;
  try {
    config = load_config(scratch.write(text));
  } catch (const Error&) {
    return;  // rejected: the expected outcome for most inputs
  }
  check_round_trip(config);
}

void apply_overrides(std::string_view text) {
  std::vector<std::string> lines;
  for (std::size_t begin = 0; begin <= text.size();) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view line = text.substr(begin, end - begin);
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first != std::string_view::npos && line[first] != '#') lines.emplace_back(line);
    begin = end + 1;
  }
  Config config;
  try {
    config = config_from_overrides(lines);
  } catch (const Error&) {
    return;
  }
  check_round_trip(config);
}

}  // namespace
}  // namespace sprintnet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = sprintnet::fuzz::as_text(data, size);
  sprintnet::fuzz::load_file(text);
  sprintnet::fuzz::apply_overrides(text);
  return 0;
}
