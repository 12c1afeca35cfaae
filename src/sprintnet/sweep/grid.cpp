#include "sprintnet/sweep/grid.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "sprintnet/core/error.h"
#include "sprintnet/io/config.h"
#include "sprintnet/io/config_schema.h"
#include "sprintnet/io/read_file.h"
#include "sprintnet/io/toml_key_depth.h"

namespace sprintnet::sweep {
namespace {

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t");
  const auto last = s.find_last_not_of(" \t");
  return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
}

// `option` names the option in errors ("--grid 'optim.lr=0.1'"): an open quote or bracket would otherwise take
// every value after it into one, silently.
std::vector<std::string> split_top_level(const std::string& text, const std::string& option) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  bool paired = true;  // no ']' came before its '['
  char quote = 0;      // the open string's quote: TOML has "basic" and 'literal' strings
  for (const char c : text) {
    if (quote == 0 && (c == '"' || c == '\'')) {
      quote = c;
    } else if (c == quote) {
      quote = 0;
    }
    const bool quoted = quote != 0;
    if (!quoted && c == '[') ++depth;
    if (!quoted && c == ']') --depth;
    paired = paired && depth >= 0;
    if (!quoted && depth == 0 && c == ',') {
      parts.push_back(trim(current));
      current.clear();
    } else {
      current += c;
    }
  }
  SN_CHECK(quote == 0, "{}: a '{}' is never closed (values are split at commas outside quotes and brackets)", option,
           quote);
  SN_CHECK(paired && depth == 0, "{}: its '[' and ']' do not pair up (values are split at commas outside brackets)",
           option);
  parts.push_back(trim(current));
  return parts;
}

// `value` read as a TOML value (the table {v = value}), or nothing when it does not read as one (validate() names
// it). A key of an inline table with more dotted parts than the TOML reader's stack takes is not read
// (io/toml_key_depth.h), as the config's own --set values are not.
std::optional<toml::table> parsed_value(const std::string& value) {
  const std::string document = "v = " + value;
  if (find_deep_toml_key(document)) return std::nullopt;
  try {
    return toml::parse(document);
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

// A value as it appears in a folder name: a string's parsed value ('relu' and "relu" are relu), anything else its
// TOML text without quotes, brackets or spaces ([256, 256] is 256,256); '/' and control characters, which a
// folder name cannot hold or shows badly, become '_'.
std::string name_part(const std::string& value) {
  std::optional<std::string> parsed;
  if (const std::optional<toml::table> table = parsed_value(value)) {
    if (const toml::node* node = table->get("v"); node != nullptr && node->is_string()) {
      parsed = node->value<std::string>();
    }
  }
  std::string out;
  for (const char c : parsed.value_or(value)) {
    if (!parsed && (c == '"' || c == '\'' || c == ' ' || c == '[' || c == ']')) continue;
    const bool unsafe = c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    out += unsafe ? '_' : c;
  }
  return out;
}

std::string formatted(const toml::node& node) {
  std::ostringstream out;
  node.visit([&](const auto& v) { out << toml::toml_formatter{v, toml::format_flags::none}; });
  return out.str();
}

// A value of the [sweep] table as `--grid` would take it: numbers in their shortest form (0.1, not
// 0.10000000000000001: they name the run folders), a float keeping its '.' or exponent (1.0, not 1, which an
// integer key would take: the file's float is refused as --grid's and --set's are).
std::string toml_text(const toml::node& node) {
  if (node.is_floating_point()) return format_toml_value(ConfigValue(node.value<double>().value_or(0.0)));
  if (node.is_integer()) return fmt::format("{}", node.value<std::int64_t>().value_or(0));
  return formatted(node);
}

// `sweep`, `sweep.seeds`, `sweep.grid...`: what the sweep varies, which --set and --grid do not set.
bool is_sweep_table_key(const std::string& key) { return key == "sweep" || key.starts_with("sweep."); }

// Linux's NAME_MAX: the longest name one folder may have, in bytes.
constexpr std::size_t kMaxFolderNameBytes = 255;

constexpr std::string_view kKeysSetPerRun[] = {"checkpoint.every_epochs", "output.dir", "output.name",
                                               "output.progress"};

// A value's TOML text in one form (1e-1 and 0.10 are 0.1; "a" and 'a' are "a"; a number by its value, 1 and 1.0
// one: a float key takes both as 1.0), to find a value listed twice however it is written; text that is not a TOML
// value stays as it is (validate() names it).
std::string canonical(const std::string& value) {
  const std::optional<toml::table> table = parsed_value(value);
  const toml::node* node = table ? table->get("v") : nullptr;
  if (node == nullptr) return value;
  if (node->is_floating_point()) return fmt::format("{}", node->value<double>().value_or(0.0));
  if (node->is_integer()) return fmt::format("{}", node->value<std::int64_t>().value_or(0));
  return formatted(*node);
}

// Two values of one axis that are one value, or that would name one folder: refused before anything trains. Each
// value's forms are computed once and looked up (an axis may hold thousands of values).
void check_distinct(const GridAxis& axis) {
  std::map<std::string, const std::string*> values, folders;
  for (const std::string& value : axis.values) {
    const auto [same, fresh] = values.emplace(canonical(value), &value);
    SN_CHECK(fresh, "{}: {} lists one value twice ({} and {})", axis.origin, axis.key, *same->second, value);
    const std::string part = name_part(value);
    const auto [named, unnamed] = folders.emplace(part, &value);
    SN_CHECK(unnamed,
             "{}: {} values {} and {} would name one run folder ('{}={}'); give values that differ in more than "
             "quotes, brackets, spaces or '/' against '_'", axis.origin, axis.key, *named->second, value, axis.key,
             part);
  }
}

// The number of runs `spec` makes, refused past kMaxSweepRuns before any is listed: each axis's count and the
// seeds' multiplied in 64 bits, with an overflow taken as "more than the limit" (its count then not printed).
void check_run_count(const SweepSpec& spec) {
  std::uint64_t runs = 1;
  bool overflowed = false;
  std::vector<std::string> factors;
  const auto multiply = [&](std::size_t count, std::string factor) {
    overflowed = overflowed || __builtin_mul_overflow(runs, static_cast<std::uint64_t>(count), &runs);
    factors.push_back(std::move(factor));
  };
  for (const GridAxis& axis : spec.axes) {
    multiply(axis.values.size(), fmt::format("{} ({} values, {})", axis.key, axis.values.size(), axis.origin));
  }
  if (!spec.seeds.empty()) {
    multiply(spec.seeds.size(), fmt::format("seeds ({}, {})", spec.seeds.size(), spec.seeds_origin));
  }
  SN_CHECK(!overflowed && runs <= kMaxSweepRuns,
           "sweep: the grid makes {} runs ({}), more than the {} a sweep may have: give fewer values, or split it "
           "into several sweeps", overflowed ? std::string("over 2^64") : fmt::format("{}", runs),
           fmt::join(factors, " x "), kMaxSweepRuns);
}

// The keys --set may not set, and why: the [sweep] table's, which --set does not reach, and those the runs never
// take from it (set_not_taken_by_runs: with an empty `spec`, those the sweep sets for every run whatever the grid).
// (Refused here, not left to the config's "unknown key", whose hint for sweep.seeds is 'seed', which would fix
// every run's seed.)
void check_set_keys(const std::vector<std::string>& extra, const SweepSpec& spec) {
  for (const std::string& text : extra) {
    const std::string key = trim(text.substr(0, text.find('=')));
    SN_CHECK(!is_sweep_table_key(key),
             "--set '{}': {} is a key of the config file's [sweep] table, which --set does not reach (it sets a "
             "run's config keys, the same for every run): give {} instead, which replaces the table's", text, key,
             key == "sweep.seeds" ? "the seeds with --seeds 0,1,2" : "the grid with --grid KEY=V1,V2 (one a key)");
    if (const std::optional<std::string> why = set_not_taken_by_runs(text, spec)) SN_FAIL("{}", *why);
  }
}

}  // namespace

std::optional<std::string> set_not_taken_by_runs(const std::string& text, const SweepSpec& spec) {
  const std::string key = trim(text.substr(0, text.find('=')));
  if (key == "output.dir") {
    return fmt::format("--set '{}': the sweep puts every run in its own folder, DIR/<run name>, whatever output.dir "
                       "says: give the sweep's folder with --out DIR", text);
  }
  if (key == "output.name") {
    return fmt::format("--set '{}': the sweep names every run's folder by its grid values and seed, whatever "
                       "output.name says: leave it out", text);
  }
  if (key == "output.progress") {
    return fmt::format("--set '{}': a sweep's runs show no progress of their own (the sweep prints a line as each run "
                       "ends), whatever output.progress says: leave it out", text);
  }
  // The run's own values come after --set: a --set of a key the grid or the seeds give would be dropped silently.
  for (const GridAxis& axis : spec.axes) {
    if (axis.key == key) {
      return fmt::format("--set '{}': {} is swept ({}), and each run takes its grid value, not --set's: leave it out "
                         "of --set, or list the value on the grid", text, key, axis.origin);
    }
  }
  if (key == "seed" && !spec.seeds.empty()) {
    return fmt::format("--set '{}': the seeds ({}) give every run its seed, not --set: leave it out of --set, or list "
                       "the seed among the seeds", text, spec.seeds_origin);
  }
  return std::nullopt;
}

std::span<const std::string_view> keys_set_per_run() { return kKeysSetPerRun; }

GridAxis parse_grid_option(const std::string& text) {
  const auto equals = text.find('=');
  SN_CHECK(equals != std::string::npos && equals > 0,
           "--grid '{}': expected KEY=V1,V2,..., e.g. --grid optim.lr=0.1,0.05", text);
  GridAxis axis{trim(text.substr(0, equals)),
                split_top_level(text.substr(equals + 1), fmt::format("--grid '{}'", text))};
  for (const std::string& v : axis.values) SN_CHECK(!v.empty(), "--grid '{}': an empty value", text);
  return axis;
}

std::vector<std::int64_t> parse_seeds(const std::string& text) {
  SN_CHECK(!trim(text).empty(), "--seeds '{}': no seeds; give a list such as --seeds 0,1,2", text);
  std::vector<std::int64_t> seeds;
  for (const std::string& part : split_top_level(text, fmt::format("--seeds '{}'", text))) {
    try {
      std::size_t used = 0;
      seeds.push_back(std::stoll(part, &used));
      SN_CHECK(used == part.size(), "--seeds '{}': '{}' is not an integer", text, part);
    } catch (const std::logic_error&) {
      SN_FAIL("--seeds '{}': '{}' is not an integer", text, part);
    }
    SN_CHECK(seeds.back() >= 0, "--seeds '{}': seed {} is negative; seeds are integers >= 0 (the config's seed key)",
             text, seeds.back());
  }
  return seeds;
}

SweepSpec read_sweep_table(const std::filesystem::path& config_path, const std::vector<std::string>& overrides) {
  // (The grid's keys are checked by validate(), once the table and the command line are read.)
  check_set_keys(overrides, SweepSpec{});
  // load_config's checks and errors first (a missing file, a pipe, a syntax error at its line and column): the
  // table is read from a file that is known to be a config.
  load_config(config_path, overrides);
  SweepSpec spec;
  const std::string file = config_path.string();
  toml::table table;
  try {
    table = toml::parse(read_file(config_path, "config file"), std::string_view(file));
  } catch (const toml::parse_error& error) {  // (load_config read it: only a file changed since gets here)
    SN_FAIL("{}:{}:{}: TOML syntax error: {}", file, error.source().begin.line, error.source().begin.column,
            error.description());
  }
  const toml::table* sweep = table["sweep"].as_table();
  if (sweep == nullptr) return spec;
  for (auto&& [name, node] : *sweep) {
    if (name.str() == "grid") {
      const toml::table* grid = node.as_table();
      SN_CHECK(grid != nullptr, "{}: sweep.grid must be a table of arrays, e.g. grid = {{ \"optim.lr\" = [0.1] }}", file);
      for (auto&& [key, values] : *grid) {
        const toml::array* array = values.as_array();
        SN_CHECK(array != nullptr && !array->empty(), "{}: sweep.grid.\"{}\" must be a non-empty array of values",
                 file, key.str());
        GridAxis axis{std::string(key.str()), {}, fmt::format("{}: sweep.grid", file)};
        for (const toml::node& v : *array) axis.values.push_back(toml_text(v));
        spec.axes.push_back(std::move(axis));
      }
    } else if (name.str() == "seeds") {
      spec.seeds_origin = fmt::format("{}: sweep.seeds", file);
      const toml::array* array = node.as_array();
      SN_CHECK(array != nullptr, "{}: sweep.seeds must be an array of integers", file);
      for (const toml::node& v : *array) {
        SN_CHECK(v.is_integer(), "{}: sweep.seeds must hold integers", file);
        spec.seeds.push_back(v.value<std::int64_t>().value_or(0));
      }
    } else {
      SN_FAIL("{}: unknown key 'sweep.{}' (the [sweep] table takes grid and seeds)", file, name.str());
    }
  }
  return spec;
}

void apply_command_line(SweepSpec& spec, const std::vector<std::string>& grid_options,
                        const std::optional<std::string>& seeds) {
  std::set<std::string> grid_keys;
  for (const std::string& g : grid_options) {
    GridAxis axis = parse_grid_option(g);
    SN_CHECK(grid_keys.insert(axis.key).second, "--grid {} is given twice: list its values once, e.g. --grid {}=A,B",
             axis.key, axis.key);
    std::erase_if(spec.axes, [&](const GridAxis& a) { return a.key == axis.key; });  // --grid wins
    spec.axes.push_back(std::move(axis));
  }
  if (seeds) {
    spec.seeds = parse_seeds(*seeds);
    spec.seeds_origin = "--seeds";
  }
}

std::vector<SweepRun> expand(const SweepSpec& spec) {
  check_run_count(spec);  // before anything is listed, even each axis's values checked
  for (const GridAxis& axis : spec.axes) {
    // (checkpoint.every_epochs is set before the overrides: a grid over it works.)
    SN_CHECK(!axis.key.starts_with("output.") || axis.key == "output.csv",
             "{}: {} cannot be swept: the sweep sets it for every run itself", axis.origin, axis.key);
    SN_CHECK(!is_sweep_table_key(axis.key),
             "{}: {} cannot be swept: it is a key of the [sweep] table, which says what the sweep varies, not one "
             "of a run's config; give seeds with --seeds 0,1,2 and grids with --grid KEY=V1,V2", axis.origin, axis.key);
    SN_CHECK(axis.key != "seed" || spec.seeds.empty(),
             "{}: seed and {} both give the seeds, and the seeds would override the grid's: give them once",
             axis.origin, spec.seeds_origin);
    check_distinct(axis);
  }
  std::vector<SweepRun> points(1);
  for (const GridAxis& axis : spec.axes) {
    std::vector<SweepRun> next;
    for (const SweepRun& p : points) {
      for (const std::string& value : axis.values) {
        SweepRun r = p;
        r.point += fmt::format("{}{}={}", r.point.empty() ? "" : ",", axis.key, name_part(value));
        r.overrides.push_back(fmt::format("{}={}", axis.key, value));
        r.origins.push_back(axis.origin);
        next.push_back(std::move(r));
      }
    }
    points = std::move(next);
  }
  std::vector<SweepRun> runs;
  for (const SweepRun& p : points) {
    if (spec.seeds.empty()) {
      SweepRun r = p;
      r.name = r.point.empty() ? "run" : r.point;
      runs.push_back(std::move(r));
      continue;
    }
    for (const std::int64_t seed : spec.seeds) {
      SweepRun r = p;
      r.name = fmt::format("{}{}seed={}", r.point, r.point.empty() ? "" : ",", seed);
      r.overrides.push_back(fmt::format("seed={}", seed));
      r.origins.push_back(spec.seeds_origin);
      runs.push_back(std::move(r));
    }
  }
  std::set<std::string> names;
  for (const SweepRun& r : runs) {
    SN_CHECK(names.insert(r.name).second,
             "sweep: two runs would be named '{}' and write one folder: a grid value or seed is listed twice", r.name);
    SN_CHECK(r.name.size() <= kMaxFolderNameBytes,
             "sweep: run '{}' has a name of {} bytes, longer than the {} a folder name may have: sweep fewer keys, or "
             "set the ones that do not vary with --set", r.name, r.name.size(), kMaxFolderNameBytes);
  }
  return runs;
}

void validate(const std::filesystem::path& config_path, const std::vector<std::string>& extra, const SweepSpec& spec,
              const std::vector<SweepRun>& runs) {
  check_set_keys(extra, spec);
  for (const SweepRun& run : runs) {
    std::vector<ConfigOverride> overrides;
    for (const std::string& text : extra) overrides.push_back({text});
    for (std::size_t i = 0; i < run.overrides.size(); ++i) overrides.push_back({run.overrides[i], run.origins[i]});
    load_config_with_origins(config_path, overrides);
  }
}

}  // namespace sprintnet::sweep
