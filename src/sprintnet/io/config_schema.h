#pragma once
// The config schema: one entry per key, declared once in config_schema.cpp.
// Loading, --set overrides, validation, config_to_toml and docs/CONFIG.md are
// all driven from this table, so a key cannot be documented in one place and
// parsed differently in another.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sprintnet/io/config.h"

namespace sprintnet {

enum class ValueKind { kBool, kInteger, kFloat, kString, kIntegerList };

// What a key holds once read; the alternative matches the key's ValueKind.
using ConfigValue = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>>;

// One end of an allowed interval of numbers.
struct Bound {
  double value = 0.0;
  bool inclusive = true;
};

// The values a key accepts. Numbers (and each element of an integer list)
// must lie within [low, high] with the stated inclusiveness; strings must be
// one of `choices` when there are any. A choice written "prefix:N" accepts
// the prefix followed by a non-negative integer ("cuda:N" accepts "cuda:1").
struct Constraint {
  std::optional<Bound> low;
  std::optional<Bound> high;
  std::vector<std::string_view> choices;
  bool non_empty = false;  // strings: "" is not allowed
};

struct ConfigKey {
  std::string_view name;  // dotted, e.g. "optim.lr"; the part before the last '.' is its table
  ValueKind kind = ValueKind::kString;
  std::string_view doc;  // one line: what the key means
  Constraint constraint;
  // Bound to the Config field the key names.
  std::function<ConfigValue(const Config&)> get;
  std::function<void(Config&, const ConfigValue&)> set;

  std::string_view table() const;       // "" for top-level keys such as "seed"
  std::string_view short_name() const;  // the part after the table: "lr"
  ConfigValue default_value() const { return get(Config{}); }
};

struct ConfigTable {
  std::string_view name;  // "" for the top level
  std::string_view doc;
};

// Every key, in the order they are documented and written by config_to_toml.
std::span<const ConfigKey> config_schema();
// The tables, top level first, in the same order.
std::span<const ConfigTable> config_tables();
// nullptr when there is no such key.
const ConfigKey* find_config_key(std::string_view name);
bool is_config_table(std::string_view name);

// A key whose value differs between two configs.
struct ConfigDifference {
  std::string_view key;
  ConfigValue before, after;
};
// Every key whose value differs between `before` and `after`, in schema order: what a resume
// compares (train --resume, sweep --resume), so two configs that resolve to the same values are
// the same however their files are written.
std::vector<ConfigDifference> config_differences(const Config& before, const Config& after);

// Checks a value against its key's constraint (finite floats, ranges, choices).
// Returns the problem ("must be > 0, got -1"), or nothing when the value is fine.
std::optional<std::string> check_config_value(const ConfigKey& key, const ConfigValue& value);
// Why `name` cannot be output.name (a path, "." or ".."), or nullopt: check_config_consistency's rule, which
// create_run_directory applies too.
std::optional<std::string> output_name_problem(std::string_view name);
// Checks that relate several keys (nesterov needs momentum). Returns the problems found.
std::vector<std::string> check_config_consistency(const Config& config);
// Every problem of a Config however it was made: each key's value against its constraint, as loading checks it
// ("train.log_every: must be >= 1, got 0"), then check_config_consistency's. Empty for any config that
// load_config could have returned.
std::vector<std::string> config_problems(const Config& config);

// The value as TOML source text: 0.05, 1e-08, "mnist", [256, 256], true.
// Floats keep a '.' or exponent so they read back as floats, and print in the
// shortest form that reads back to the same double.
std::string format_toml_value(const ConfigValue& value);
// "a number", "an integer", "a boolean", "a string", "an array of integers".
std::string_view value_kind_description(ValueKind kind);
// The allowed values in words: "must be > 0", "must be in [0, 1)", "each must be >= 1",
// "must be one of: sgd, adam, adamw"; "" when anything of the key's type goes.
std::string describe_constraint(const ConfigKey& key);

}  // namespace sprintnet
