#include "sprintnet/core/error.h"

#include <string_view>

namespace sprintnet::detail {

void throw_check_failure(const char* file, int line, const char* expr, const std::string& message) {
  // Strip the directories: the basename and line are enough to find the check.
  std::string_view path(file);
  if (auto slash = path.rfind('/'); slash != std::string_view::npos) path.remove_prefix(slash + 1);
  if (expr != nullptr) throw Error(fmt::format("{} [{}:{}: {}]", message, path, line, expr));
  throw Error(fmt::format("{} [{}:{}]", message, path, line));
}

}  // namespace sprintnet::detail
