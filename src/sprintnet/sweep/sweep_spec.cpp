#include "sprintnet/sweep/sweep_spec.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

// Whether the config file's value of `key` reaches a run: not when every run sets the key itself.
bool reaches_runs(std::string_view key, const SweepSpec& spec) {
  const std::span<const std::string_view> set_per_run = keys_set_per_run();
  if (std::find(set_per_run.begin(), set_per_run.end(), key) != set_per_run.end()) return false;
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

// Relative data paths are read from the working directory: resumed from another one, the runs still to train
// would read other files (or none) than the finished ones did.
void check_working_directory(const std::filesystem::path& dir, const SweepOptions& o, const std::string& began_in) {
  std::error_code ec;
  if (std::filesystem::equivalent(began_in, std::filesystem::current_path(), ec)) return;
  const DataConfig data = load_config(o.config_path, o.overrides).data;
  for (const auto& [key, path] : {std::pair<std::string_view, std::string>{"data.dir", data.dir},
                                  {"data.train_images", data.train_images}, {"data.train_labels", data.train_labels},
                                  {"data.test_images", data.test_images}, {"data.test_labels", data.test_labels}}) {
    SN_CHECK(path.empty() || std::filesystem::path(path).is_absolute(),
             "{}: cannot resume here: the sweep began in {} and its {} = \"{}\" is relative to the working directory, "
             "so the runs still to train would read other files: resume it from {}",
             dir.string(), began_in, key, path, began_in);
  }
}

}  // namespace

void write_sweep_spec(const SweepOptions& o) {
  nlohmann::json axes = nlohmann::json::array();
  for (const GridAxis& a : o.spec.axes) axes.push_back({{"key", a.key}, {"values", a.values}});
  const nlohmann::json spec = {{"config", std::filesystem::absolute(o.config_path).string()},
                               {"config_text", read_file(o.config_path, "config file")},
                               {"overrides", o.overrides},
                               {"axes", axes},
                               {"seeds", o.spec.seeds},
                               {"cpu_threads", o.cpu_threads},
                               {"cwd", std::filesystem::current_path().string()}};
  write_text_file_atomically(o.out_dir / kSpecFile, spec.dump(1) + "\n");
}

SweepOptions read_sweep_spec(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kSpecFile;
  SN_CHECK(std::filesystem::exists(path), "{}: no sweep here ({} is missing)", dir.string(), kSpecFile);
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  SweepOptions o;
  std::optional<std::string> config_text, began_in;
  try {
    SN_CHECK(!j.is_discarded(), "not JSON");
    o.config_path = j.at("config").get<std::string>();
    o.overrides = j.at("overrides").get<std::vector<std::string>>();
    for (const auto& a : j.at("axes")) {
      o.spec.axes.push_back({a.at("key").get<std::string>(), a.at("values").get<std::vector<std::string>>()});
    }
    o.spec.seeds = j.at("seeds").get<std::vector<std::int64_t>>();
    if (j.contains("cpu_threads")) o.cpu_threads = j.at("cpu_threads").get<std::int64_t>();
    if (j.contains("config_text")) config_text = j.at("config_text").get<std::string>();
    if (j.contains("cwd")) began_in = j.at("cwd").get<std::string>();
  } catch (const std::exception& e) {
    SN_FAIL("{}: malformed sweep spec: {}", path.string(), e.what());
  }
  if (config_text) check_config_unchanged(dir, o, *config_text);
  if (began_in) check_working_directory(dir, o, *began_in);
  o.out_dir = dir;
  return o;
}

bool has_sweep_spec(const std::filesystem::path& dir) { return std::filesystem::exists(dir / kSpecFile); }

}  // namespace sprintnet::sweep
