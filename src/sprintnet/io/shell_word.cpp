#include "sprintnet/io/shell_word.h"

#include <algorithm>
#include <cctype>

namespace sprintnet {

std::string shell_quoted(std::string_view word) {
  const auto plain = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || std::string_view("_-./+=:,@%").find(c) != std::string_view::npos;
  };
  // A relative path starting with '-' would be read as an option: ./-x is the same file.
  const std::string prefix = word.starts_with('-') ? "./" : "";
  if (!word.empty() && std::all_of(word.begin(), word.end(), plain)) return prefix + std::string(word);
  std::string quoted = prefix + "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace sprintnet
