#pragma once
// One error type for the whole library, and the check macros that throw it.
// Every message names what is wrong (a file, a key, a shape) and where the
// check lives, so a user sees the cause and a developer finds the line.
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "sprintnet/core/check_failure.h"

namespace sprintnet {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace sprintnet

// SN_CHECK(cond, "format {}", args...): throws sprintnet::Error when cond is false.
#define SN_CHECK(cond, ...)                                                                     \
  do {                                                                                          \
    if (!(cond)) [[unlikely]] {                                                                 \
      ::sprintnet::detail::throw_check_failure(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
    }                                                                                           \
  } while (false)

// SN_FAIL("format {}", args...): unconditional error with the same formatting.
#define SN_FAIL(...) ::sprintnet::detail::throw_check_failure(__FILE__, __LINE__, nullptr, fmt::format(__VA_ARGS__))
