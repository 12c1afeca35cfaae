// Loading a Config: TOML file, then --set overrides, every value checked
// against the schema (config_schema.cpp) as it is set, then the checks that
// relate several keys. Errors say where ("configs/x.toml:12" or
// "--set 'optim.lr=abc'"), which key, and what is wrong.
#include "sprintnet/io/config.h"

#include <algorithm>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "sprintnet/core/error.h"
#include "sprintnet/io/closest_match.h"
#include "sprintnet/io/config_schema.h"
#include "sprintnet/io/read_file.h"
#include "sprintnet/io/toml_key_depth.h"

namespace sprintnet {
namespace {

std::string located(const std::string& file, const toml::source_region& region) {
  return region.begin.line > 0 ? fmt::format("{}:{}", file, region.begin.line) : file;
}

// What a TOML node is, in words, with the value when it is short: "a string ("abc")".
std::string describe_node(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return fmt::format("a string ({})", format_toml_value(ConfigValue(*node.value<std::string>())));
    case toml::node_type::integer: return fmt::format("an integer ({})", *node.value<std::int64_t>());
    // In TOML's form, so 2.0 reads as the float it is, not as the integer 2.
    case toml::node_type::floating_point:
      return fmt::format("a float ({})", format_toml_value(ConfigValue(*node.value<double>())));
    case toml::node_type::boolean: return fmt::format("a boolean ({})", *node.value<bool>());
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

[[noreturn]] void fail_key(std::string_view where, std::string_view key, std::string_view problem) {
  SN_FAIL("{}: {}: {}", where, key, problem);
}

[[noreturn]] void fail_type(std::string_view where, const ConfigKey& key, const toml::node& node) {
  fail_key(where, key.name, fmt::format("expected {}, got {}", value_kind_description(key.kind), describe_node(node)));
}

// The TOML node as the key's kind of value; integers are accepted where floats are expected.
ConfigValue read_value(const ConfigKey& key, const toml::node& node, std::string_view where) {
  switch (key.kind) {
    case ValueKind::kBool:
      if (auto value = node.as_boolean()) return value->get();
      break;
    case ValueKind::kInteger:
      if (auto value = node.as_integer()) return value->get();
      break;
    case ValueKind::kFloat:
      if (auto value = node.as_floating_point()) return value->get();
      if (auto value = node.as_integer()) return static_cast<double>(value->get());
      break;
    case ValueKind::kString:
      if (auto value = node.as_string()) return value->get();
      break;
    case ValueKind::kIntegerList:
      if (auto array = node.as_array()) {
        std::vector<std::int64_t> list;
        for (std::size_t i = 0; i < array->size(); ++i) {
          const toml::node& element = *array->get(i);
          auto value = element.as_integer();
          if (!value) {
            fail_key(where, key.name,
                     fmt::format("element [{}]: expected an integer, got {}", i, describe_node(element)));
          }
          list.push_back(value->get());
        }
        return list;
      }
      break;
  }
  fail_type(where, key, node);
}

// Keys are compared by their names within a table; a key in another table costs one
// more edit, so "[train] lr" finds "optim.lr" and "[optim] momentun" stays in [optim].
std::optional<std::string> suggest_key(std::string_view dotted) {
  const auto dot = dotted.rfind('.');
  const std::string_view table = dot == std::string_view::npos ? std::string_view() : dotted.substr(0, dot);
  const std::string_view name = dot == std::string_view::npos ? dotted : dotted.substr(dot + 1);
  constexpr std::size_t kOtherTableCost = 1;
  const ConfigKey* best = nullptr;
  std::size_t best_distance = 0;
  for (const ConfigKey& key : config_schema()) {
    const std::size_t distance = name_distance(name, key.short_name()) + (key.table() == table ? 0 : kOtherTableCost);
    if (best == nullptr || distance < best_distance) {
      best = &key;
      best_distance = distance;
    }
  }
  if (best == nullptr || !close_enough(best_distance, name, best->short_name())) return std::nullopt;
  return std::string(best->name);
}

std::string keys_of_table(std::string_view table) {
  std::vector<std::string_view> names;
  for (const ConfigKey& key : config_schema()) {
    if (key.table() == table) names.push_back(key.short_name());
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

[[noreturn]] void fail_unknown(std::string_view where, std::string_view dotted, bool is_table) {
  const bool top_level = dotted.find('.') == std::string_view::npos;
  if (is_table && top_level) {
    std::vector<std::string_view> names;
    for (const ConfigTable& table : config_tables()) {
      if (!table.name.empty()) names.push_back(table.name);
    }
    const auto suggestion = closest_match(dotted, names);
    SN_FAIL("{}: unknown table '{}'{}; the tables are {}", where, dotted,
            suggestion ? fmt::format(" (did you mean '{}'?)", *suggestion) : "", fmt::join(names, ", "));
  }
  std::string hint;
  if (auto suggestion = suggest_key(dotted)) {
    hint = fmt::format(" (did you mean '{}'?)", *suggestion);
  } else if (const auto dot = dotted.rfind('.');
             dot != std::string_view::npos && is_config_table(dotted.substr(0, dot))) {
    hint = fmt::format(" (keys of [{}]: {})", dotted.substr(0, dot), keys_of_table(dotted.substr(0, dot)));
  }
  SN_FAIL("{}: unknown {} '{}'{}", where, is_table ? "table" : "key", dotted, hint);
}

class ConfigBuilder {
 public:
  // Sets one key from a TOML node, checking its type and constraint.
  void assign(const ConfigKey& key, const toml::node& node, std::string_view where) {
    const ConfigValue value = read_value(key, node, where);
    if (auto problem = check_config_value(key, value)) fail_key(where, key.name, *problem);
    key.set(config_, value);
  }

  void apply_file_table(const toml::table& table, std::string_view prefix, const std::string& file) {
    for (auto&& [name, node] : table) {
      if (name.str().find('.') != std::string_view::npos) fail_quoted_dot(name, prefix, file);
      const std::string dotted = prefix.empty() ? std::string(name.str()) : fmt::format("{}.{}", prefix, name.str());
      if (dotted == "sweep" && node.is_table()) continue;  // the grid of `sprintnet sweep` (sweep/grid.h)
      if (const ConfigKey* key = find_config_key(dotted)) {
        assign(*key, node, located(file, node.source()));
      } else if (is_config_table(dotted)) {
        const toml::table* sub_table = node.as_table();
        if (sub_table == nullptr)
          fail_key(located(file, node.source()), dotted, fmt::format("expected a table, got {}", describe_node(node)));
        apply_file_table(*sub_table, dotted, file);
      } else {
        fail_unknown(located(file, name.source()), dotted, node.is_table());
      }
    }
  }

  // "optim.lr" = 0.1 is one key named optim.lr to every TOML reader, beside the optim table's lr: joined with the
  // table's name it would be taken for that key, and one of the two settings silently dropped.
  [[noreturn]] static void fail_quoted_dot(const toml::key& name, std::string_view prefix, const std::string& file) {
    const std::string_view text = name.str();
    const auto dot = text.rfind('.');
    const std::string_view table = text.substr(0, dot), short_name = text.substr(dot + 1);
    // The other spelling, where it is a plain one: "optim.lr" at the top level is lr under [optim].
    const bool plain =
        prefix.empty() && !table.empty() && !short_name.empty() && table.find('.') == std::string_view::npos;
    const std::string instead = plain ? fmt::format(", or {} under [{}]", short_name, table) : "";
    SN_FAIL("{}: \"{}\" is one key whose name holds a dot (a quoted key); write {} unquoted{}",
            located(file, name.source()), text, text, instead);
  }

  // "key=value": the value is read as TOML ("0.1", "true", "[512, 512]", "\"x\"");
  // text that is not a TOML value is taken as a string, so --set data.dataset=fashion-mnist works.
  // `origin` names where the override came from in errors: "--set", "--grid", "x.toml: sweep.grid".
  void apply_override(const std::string& text, std::string_view origin = "--set") {
    const std::string where = fmt::format("{} '{}'", origin, text);
    const auto equals = text.find('=');
    if (equals == std::string::npos) SN_FAIL("{}: expected KEY=VALUE, e.g. --set optim.lr=0.1 (no '=' found)", where);
    const std::string dotted = trim(text.substr(0, equals));
    const std::string value_text = trim(text.substr(equals + 1));
    const ConfigKey* key = find_config_key(dotted);
    if (key == nullptr) {
      if (is_config_table(dotted)) {
        SN_FAIL("{}: '{}' is a table; set one of its keys instead ({})", where, dotted, keys_of_table(dotted));
      }
      fail_unknown(where, dotted, false);
    }
    std::string toml_error;
    std::optional<toml::table> parsed = parse_toml_value(value_text, toml_error);
    const toml::node* node = parsed ? parsed->get("v") : nullptr;
    // Text that starts as TOML writes a number, an array or a string: when it does not read as one, TOML's reason is
    // the useful part ("not representable in 64 bits", a missing comma), and a quote kept in a string is a mistake.
    const bool looks_like_toml = !value_text.empty() && std::string_view("0123456789+-.[{\"'").find(value_text[0]) !=
                                                           std::string_view::npos;
    if (node == nullptr && key->kind == ValueKind::kString &&
        (value_text.starts_with('"') || value_text.starts_with('\''))) {
      SN_FAIL("{}: {} does not read as a TOML string ({}); close its quote, or leave the quotes out", where, dotted,
              toml_error);
    }
    // A string key takes the text as it is unless it was written as a TOML string ("\"a b\"").
    if (node == nullptr || (key->kind == ValueKind::kString && !node->is_string())) {
      const std::string located_where =
          node == nullptr && looks_like_toml ? fmt::format("{} (as TOML: {})", where, toml_error) : where;
      assign(*key, toml::value<std::string>(value_text), located_where);
    } else {
      assign(*key, *node, where);
    }
  }

  // The checks that relate several keys; `where` names the file and whether overrides applied.
  Config finish(std::string_view where) {
    const std::vector<std::string> problems = check_config_consistency(config_);
    if (!problems.empty()) SN_FAIL("{}: {}", where, fmt::join(problems, "; "));
    return config_;
  }

 private:
  static std::string trim(std::string_view text) {
    constexpr std::string_view kSpace = " \t\r\n";
    const auto first = text.find_first_not_of(kSpace);
    if (first == std::string_view::npos) return {};
    const auto last = text.find_last_not_of(kSpace);
    return std::string(text.substr(first, last - first + 1));
  }

  // The table {v = <text>} when the text is exactly one TOML value, else nothing and TOML's reason in `error`.
  static std::optional<toml::table> parse_toml_value(const std::string& text, std::string& error) {
    if (text.empty()) return std::nullopt;
    const std::string document = fmt::format("v = {}", text);
    if (find_deep_toml_key(document)) {  // an inline table's key, which the TOML reader would recurse through
      error = fmt::format("a key of more than {} dotted parts", kMaxTomlKeyParts);
      return std::nullopt;
    }
    try {
      toml::table table = toml::parse(document, std::string_view("--set"));
      if (table.size() != 1 || !table.contains("v")) {
        error = "more than one value";
        return std::nullopt;
      }
      return table;
    } catch (const toml::parse_error& e) {
      error = std::string(e.description());
      return std::nullopt;
    }
  }

  Config config_;
};

}  // namespace

namespace {

Config parse_with_origins(std::string_view text, const std::string& origin, const std::vector<ConfigOverride>& overrides) {
  if (const auto line = find_deep_toml_key(text)) {
    SN_FAIL("{}:{}: a key of more than {} dotted parts", origin, *line, kMaxTomlKeyParts);
  }
  toml::table table;
  try {
    table = toml::parse(text, std::string_view(origin));
  } catch (const toml::parse_error& error) {
    SN_FAIL("{}:{}:{}: TOML syntax error: {}", origin, error.source().begin.line, error.source().begin.column,
            error.description());
  }
  ConfigBuilder builder;
  builder.apply_file_table(table, "", origin);
  for (const ConfigOverride& o : overrides) builder.apply_override(o.text, o.origin);
  // A check across keys names the overrides that are not --set by where they came from (a sweep's --grid value,
  // its seed), so the run a grid makes impossible is named with the option that made it.
  // (A seed takes part in no such check, and an origin in this file is named without the file again.)
  std::vector<std::string> named;
  for (const ConfigOverride& o : overrides) {
    if (o.origin == "--set" || o.text.starts_with("seed=")) continue;
    const std::string_view where_given =
        o.origin.starts_with(origin + ": ") ? std::string_view(o.origin).substr(origin.size() + 2) : o.origin;
    named.push_back(fmt::format("{} '{}'", where_given, o.text));
  }
  const bool any_set = std::ranges::any_of(overrides, [](const ConfigOverride& o) { return o.origin == "--set"; });
  std::string where = origin;
  if (!named.empty()) where += fmt::format(" with {}", fmt::join(named, ", "));
  if (any_set) where += named.empty() ? " with --set overrides" : " and --set overrides";
  return builder.finish(where);
}

std::vector<ConfigOverride> from_set(const std::vector<std::string>& overrides) {
  std::vector<ConfigOverride> out;
  for (const std::string& text : overrides) out.push_back({text});
  return out;
}

}  // namespace

Config parse_config(std::string_view text, const std::string& origin, const std::vector<std::string>& overrides) {
  return parse_with_origins(text, origin, from_set(overrides));
}

Config load_config_with_origins(const std::filesystem::path& path, const std::vector<ConfigOverride>& overrides) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  SN_CHECK(std::filesystem::exists(status), "config file '{}' does not exist", path.string());
  SN_CHECK(!std::filesystem::is_directory(status), "config file '{}' is a directory; give the TOML file in it",
           path.string());
  // A pipe (`<(sprintnet config ...)`) is read once, and a run reads its config again (each rank of --gpus,
  // a resume's check): write it to a file.
  SN_CHECK(std::filesystem::is_regular_file(status),
           "config file '{}' is not a regular file (a pipe or a device); write the config to a file first",
           path.string());
  return parse_with_origins(read_file(path, "config file"), path.string(), overrides);
}

Config load_config(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  return load_config_with_origins(path, from_set(overrides));
}

Config config_from_overrides(const std::vector<std::string>& overrides) {
  ConfigBuilder builder;
  for (const std::string& override_text : overrides) builder.apply_override(override_text);
  return builder.finish("defaults with --set overrides");
}

void validate_config(const Config& config, std::string_view what) {
  const std::vector<std::string> problems = config_problems(config);
  if (!problems.empty()) SN_FAIL("{}: {}", what, fmt::join(problems, "; "));
}

std::string config_to_toml(const Config& config) {
  std::string out = "# sprintnet configuration: every key with the value it resolved to (see docs/CONFIG.md).\n";
  for (const ConfigTable& table : config_tables()) {
    if (!table.name.empty()) out += fmt::format("\n[{}]\n", table.name);
    for (const ConfigKey& key : config_schema()) {
      if (key.table() == table.name)
        out += fmt::format("{} = {}\n", key.short_name(), format_toml_value(key.get(config)));
    }
  }
  return out;
}

}  // namespace sprintnet
