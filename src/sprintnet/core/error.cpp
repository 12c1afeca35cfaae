#include "sprintnet/core/error.h"

#include <string_view>

#include "sprintnet/core/out_of_memory_error.h"

namespace sprintnet::detail {
namespace {

// `message` followed by where the check lives: the basename and line are enough to find it.
std::string with_location(const char* file, int line, const char* expr, const std::string& message) {
  std::string_view path(file);
  if (auto slash = path.rfind('/'); slash != std::string_view::npos) path.remove_prefix(slash + 1);
  if (expr != nullptr) return fmt::format("{} [{}:{}: {}]", message, path, line, expr);
  return fmt::format("{} [{}:{}]", message, path, line);
}

}  // namespace

void throw_check_failure(const char* file, int line, const char* expr, const std::string& message) {
  throw Error(with_location(file, line, expr, message));
}

void throw_out_of_memory(const char* file, int line, const char* expr, const std::string& message, bool host) {
  throw OutOfMemoryError(with_location(file, line, expr, message), host ? MemoryKind::kHost : MemoryKind::kDevice);
}

}  // namespace sprintnet::detail
