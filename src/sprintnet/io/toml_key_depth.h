#pragma once
// The TOML reader (toml++ as Debian ships it, before upstream's TOML_MAX_DOTTED_KEYS_DEPTH) recurses once per part
// of a dotted key: `a.a.a....b = 1` with some tens of thousands of parts overflows the stack. Text is scanned for
// such a key before it is parsed.
#include <cstddef>
#include <optional>
#include <string_view>

namespace sprintnet {

// Far past any key a config has (`table.key`, `sweep.grid."optim.lr"`), far below a depth that exhausts a stack.
inline constexpr std::size_t kMaxTomlKeyParts = 64;

// The line (counting from 1) where the first run of more than kMaxTomlKeyParts key parts starts, or nothing.
// A run is parts joined by '.' with optional spaces or tabs around it, a part being bare-key characters
// [A-Za-z0-9_-] or a quoted string; it may stand anywhere (a key, a table header, inside an inline table). Dots
// inside strings and comments join nothing; a number or date-time has at most one dot, so values never come near.
std::optional<std::size_t> find_deep_toml_key(std::string_view text);

}  // namespace sprintnet
