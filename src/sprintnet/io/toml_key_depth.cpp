#include "sprintnet/io/toml_key_depth.h"

namespace sprintnet {
namespace {

bool is_bare_key_character(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

struct SkippedString {
  std::size_t end;  // one past its closing quote, or where it was cut short
  bool multi_line;  // """...""" or '''...''': never a key part (TOML refuses one there before going deeper)
};

// The string opening at text[begin] ('"' or '\''), skipped; `line` counts the line breaks inside it. A single-line
// string cut short by a line break ends there, as the TOML reader's error will.
SkippedString skip_string(std::string_view text, std::size_t begin, std::size_t& line) {
  const char quote = text[begin];
  const bool escapes = quote == '"';  // basic strings; literal ('...') ones have none
  const char triple[] = {quote, quote, quote};
  const std::string_view delimiter(triple, 3);
  const bool multi_line = text.substr(begin, 3) == delimiter;
  std::size_t i = begin + (multi_line ? 3 : 1);
  while (i < text.size()) {
    const char c = text[i];
    // An escaped character is skipped, except a line break (a multi-line string's line-ending backslash), counted next.
    if (escapes && c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') {
      i += 2;
      continue;
    }
    if (c == '\n') {
      if (!multi_line) return {i, false};
      ++line;
    } else if (c == quote && !multi_line) {
      return {i + 1, false};
    } else if (c == quote && text.substr(i, 3) == delimiter) {
      i += 3;
      // Up to two more quotes belong to the content: """a""""" holds a"".
      for (int extra = 0; extra < 2 && i < text.size() && text[i] == quote; ++extra) ++i;
      return {i, true};
    }
    ++i;
  }
  return {text.size(), multi_line};
}

}  // namespace

std::optional<std::size_t> find_deep_toml_key(std::string_view text) {
  // Where the scan stands in a run of key parts: after a part (a '.' may follow), after its '.' (a part must).
  enum class After { kNothing, kPart, kDot };
  After after = After::kNothing;
  std::size_t dots = 0;      // in the current run
  std::size_t run_line = 1;  // where the current run started
  std::size_t line = 1;
  const auto part_ended = [&](std::size_t part_line) {
    if (after != After::kDot) {  // a part not joined to one before starts a run
      dots = 0;
      run_line = part_line;
    }
    after = After::kPart;
  };
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == ' ' || c == '\t') {  // allowed around a key's dots; changes nothing
      ++i;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      after = After::kNothing;
    } else if (c == '"' || c == '\'') {
      const std::size_t start_line = line;
      const SkippedString string = skip_string(text, i, line);
      i = string.end;
      if (string.multi_line) {
        after = After::kNothing;
      } else {
        part_ended(start_line);
      }
    } else if (is_bare_key_character(c)) {
      while (i < text.size() && is_bare_key_character(text[i])) ++i;
      part_ended(line);
    } else if (c == '.' && after == After::kPart) {
      if (++dots >= kMaxTomlKeyParts) return run_line;  // dots + 1 parts
      after = After::kDot;
      ++i;
    } else {
      if (c == '\n') ++line;
      after = After::kNothing;
      ++i;
    }
  }
  return std::nullopt;
}

}  // namespace sprintnet
