#include "sprintnet/sweep/sweep_spec.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sprintnet/core/error.h"
#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/config.h"
#include "sprintnet/io/config_schema.h"
#include "sprintnet/io/read_file.h"

namespace sprintnet::sweep {
namespace {

constexpr const char* kSpecFile = "sweep-spec.json";

// The keys train_one (sweep_runner.cpp) sets for every run after the config file's values.
constexpr std::string_view kKeysSetPerRun[] = {"checkpoint.every_epochs", "output.dir", "output.name",
                                               "output.progress"};

// Whether the config file's value of `key` reaches a run: not when every run sets the key itself.
bool reaches_runs(std::string_view key, const SweepSpec& spec) {
  if (std::find(std::begin(kKeysSetPerRun), std::end(kKeysSetPerRun), key) != std::end(kKeysSetPerRun)) return false;
  if (key == "seed" && !spec.seeds.empty()) return false;
  return std::none_of(spec.axes.begin(), spec.axes.end(), [&](const GridAxis& a) { return a.key == key; });
}

// "optim.momentum (0.9 when the sweep began, 0.5 now)" for each key that differs and reaches the runs.
std::vector<std::string> changed_keys(const Config& began, const Config& now, const SweepSpec& spec) {
  std::vector<std::string> out;
  for (const ConfigDifference& d : config_differences(began, now)) {
    if (!reaches_runs(d.key, spec)) continue;
    out.push_back(fmt::format("{} ({} when the sweep began, {} now)", d.key, format_toml_value(d.before),
                              format_toml_value(d.after)));
  }
  return out;
}

// The check read_sweep_spec() describes; `began_text` is the file's text when the sweep began.
void check_config_unchanged(const std::filesystem::path& dir, const SweepOptions& o, const std::string& began_text) {
  const std::string file = o.config_path.string();
  Config began, now;
  try {
    began = parse_config(began_text, fmt::format("{} as the sweep began ({})", file, kSpecFile), o.overrides);
    now = load_config(o.config_path, o.overrides);
  } catch (const Error& e) {
    SN_FAIL("{}: cannot resume: {}; the sweep's finished runs trained its config as it began: restore the file, or "
            "start a new sweep", dir.string(), e.what());
  }
  const std::vector<std::string> changes = changed_keys(began, now, o.spec);
  SN_CHECK(changes.empty(),
           "{}: cannot resume: the sweep's config file '{}' has changed since the sweep began, and its finished runs "
           "trained the old values: {}; restore them, or start a new sweep",
           dir.string(), file, fmt::join(changes, ", "));
}

}  // namespace

void write_sweep_spec(const SweepOptions& o) {
  nlohmann::json axes = nlohmann::json::array();
  for (const GridAxis& a : o.spec.axes) axes.push_back({{"key", a.key}, {"values", a.values}});
  const nlohmann::json spec = {{"config", std::filesystem::absolute(o.config_path).string()},
                               {"config_text", read_file(o.config_path, "config file")},
                               {"overrides", o.overrides},
                               {"axes", axes},
                               {"seeds", o.spec.seeds}};
  write_text_file_atomically(o.out_dir / kSpecFile, spec.dump(1) + "\n");
}

SweepOptions read_sweep_spec(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kSpecFile;
  SN_CHECK(std::filesystem::exists(path), "{}: no sweep here ({} is missing)", dir.string(), kSpecFile);
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  SweepOptions o;
  std::optional<std::string> config_text;
  try {
    SN_CHECK(!j.is_discarded(), "not JSON");
    o.config_path = j.at("config").get<std::string>();
    o.overrides = j.at("overrides").get<std::vector<std::string>>();
    for (const auto& a : j.at("axes")) {
      o.spec.axes.push_back({a.at("key").get<std::string>(), a.at("values").get<std::vector<std::string>>()});
    }
    o.spec.seeds = j.at("seeds").get<std::vector<std::int64_t>>();
    if (j.contains("config_text")) config_text = j.at("config_text").get<std::string>();
  } catch (const std::exception& e) {
    SN_FAIL("{}: malformed sweep spec: {}", path.string(), e.what());
  }
  if (config_text) check_config_unchanged(dir, o, *config_text);
  o.out_dir = dir;
  return o;
}

bool has_sweep_spec(const std::filesystem::path& dir) { return std::filesystem::exists(dir / kSpecFile); }

}  // namespace sprintnet::sweep
