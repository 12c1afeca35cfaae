// Checking a value against its key's constraint, and writing values and
// constraints as text (TOML source for config_to_toml, words for errors and
// docs/CONFIG.md).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>

#include "sprintnet/io/closest_match.h"
#include "sprintnet/io/config_schema.h"

namespace sprintnet {
namespace {

// Bounds are declared as doubles; integer keys show them without a fraction.
std::string format_bound(double value, ValueKind kind) {
  if (kind == ValueKind::kFloat) return fmt::format("{}", value);
  return fmt::format("{}", static_cast<std::int64_t>(value));
}

bool within(const Constraint& constraint, double value) {
  if (const auto& low = constraint.low) {
    if (low->inclusive ? value < low->value : value <= low->value) return false;
  }
  if (const auto& high = constraint.high) {
    if (high->inclusive ? value > high->value : value >= high->value) return false;
  }
  return true;
}

// "> 0", ">= 1", "<= 1", "in [0, 1)"; "" when unbounded.
std::string describe_range(const Constraint& constraint, ValueKind kind) {
  const auto& low = constraint.low;
  const auto& high = constraint.high;
  if (low && high) {
    return fmt::format("in {}{}, {}{}", low->inclusive ? '[' : '(', format_bound(low->value, kind),
                       format_bound(high->value, kind), high->inclusive ? ']' : ')');
  }
  if (low) return fmt::format("{} {}", low->inclusive ? ">=" : ">", format_bound(low->value, kind));
  if (high) return fmt::format("{} {}", high->inclusive ? "<=" : "<", format_bound(high->value, kind));
  return {};
}

// "cuda:N" accepts "cuda:" followed by digits; any other choice only itself.
bool matches_choice(std::string_view choice, std::string_view value) {
  if (choice.ends_with(":N")) {
    const std::string_view prefix = choice.substr(0, choice.size() - 1);
    if (!value.starts_with(prefix)) return false;
    const std::string_view digits = value.substr(prefix.size());
    // At most 9 digits: an int can hold the ordinal.
    return !digits.empty() && digits.size() <= 9 && std::all_of(digits.begin(), digits.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
  }
  return choice == value;
}

std::optional<std::string> check_number(const ConfigKey& key, double value, std::string_view shown) {
  if (!within(key.constraint, value))
    return fmt::format("must be {}, got {}", describe_range(key.constraint, key.kind), shown);
  return std::nullopt;
}

namespace {

// TOML files are UTF-8: a value that is not could be written to config.toml
// but never read back (resume, eval and predict read that file).
bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;
    std::uint32_t code = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      extra = 1, code = lead & 0x1Fu;
    } else if ((lead & 0xF0) == 0xE0) {
      extra = 2, code = lead & 0x0Fu;
    } else if ((lead & 0xF8) == 0xF0) {
      extra = 3, code = lead & 0x07u;
    } else {
      return false;
    }
    if (text.size() - i <= extra) return false;  // the sequence runs past the end
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto cont = static_cast<unsigned char>(text[i + k]);
      if ((cont & 0xC0) != 0x80) return false;
      code = (code << 6) | (cont & 0x3Fu);
    }
    constexpr std::uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMinForLength[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

}  // namespace

std::optional<std::string> check_string(const ConfigKey& key, const std::string& value) {
  const Constraint& constraint = key.constraint;
  if (!is_valid_utf8(value)) return std::string("is not valid UTF-8 text");
  // TOML's \u0000 is valid text, but every string here ends up a path, a name or a choice: C's strings (paths,
  // messages) would end at it, naming a file the config never named and cutting its error short.
  if (value.find('\0') != std::string::npos) return std::string("holds a NUL character (\\u0000)");
  if (constraint.non_empty && value.empty()) return std::string("must not be empty");
  if (constraint.choices.empty()) return std::nullopt;
  if (std::any_of(constraint.choices.begin(), constraint.choices.end(),
                  [&](std::string_view choice) { return matches_choice(choice, value); })) {
    return std::nullopt;
  }
  std::string problem = fmt::format("'{}' is not one of: {}", value, fmt::join(constraint.choices, ", "));
  if (auto suggestion = closest_match(value, constraint.choices)) {
    problem += fmt::format(" (did you mean '{}'?)", *suggestion);
  }
  return problem;
}

std::string escape_toml_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        // Other control characters have no short escape; UTF-8 bytes (>= 0x80) pass through.
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\u{:04X}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace

std::optional<std::string> check_config_value(const ConfigKey& key, const ConfigValue& value) {
  switch (key.kind) {
    case ValueKind::kBool: return std::nullopt;
    case ValueKind::kInteger: {
      const std::int64_t number = std::get<std::int64_t>(value);
      return check_number(key, static_cast<double>(number), fmt::format("{}", number));
    }
    case ValueKind::kFloat: {
      const double number = std::get<double>(value);
      if (!std::isfinite(number)) return fmt::format("must be a finite number, got {}", number);
      return check_number(key, number, fmt::format("{}", number));
    }
    case ValueKind::kString: return check_string(key, std::get<std::string>(value));
    case ValueKind::kIntegerList: {
      const auto& list = std::get<std::vector<std::int64_t>>(value);
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (auto problem = check_number(key, static_cast<double>(list[i]), fmt::format("{}", list[i]))) {
          return fmt::format("element [{}] {}", i, *problem);
        }
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::string format_toml_value(const ConfigValue& value) {
  struct Formatter {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(std::int64_t v) const { return fmt::format("{}", v); }
    std::string operator()(double v) const {
      // fmt's "{}" is the shortest text that reads back to the same double;
      // "25" must become "25.0" to stay a TOML float.
      std::string text = fmt::format("{}", v);
      if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
      return text;
    }
    std::string operator()(const std::string& v) const { return escape_toml_string(v); }
    std::string operator()(const std::vector<std::int64_t>& v) const { return fmt::format("[{}]", fmt::join(v, ", ")); }
  };
  return std::visit(Formatter{}, value);
}

std::string_view value_kind_description(ValueKind kind) {
  switch (kind) {
    case ValueKind::kBool: return "a boolean";
    case ValueKind::kInteger: return "an integer";
    case ValueKind::kFloat: return "a number";
    case ValueKind::kString: return "a string";
    case ValueKind::kIntegerList: return "an array of integers";
  }
  return "a value";
}

std::string describe_constraint(const ConfigKey& key) {
  const Constraint& constraint = key.constraint;
  if (!constraint.choices.empty()) return fmt::format("must be one of: {}", fmt::join(constraint.choices, ", "));
  if (constraint.non_empty) return "must not be empty";
  const std::string range = describe_range(constraint, key.kind);
  if (range.empty()) return {};
  return fmt::format("{} {}", key.kind == ValueKind::kIntegerList ? "each must be" : "must be", range);
}

}  // namespace sprintnet
