#pragma once
// The error a device allocator throws when the device has no room for a request: a
// sprintnet::Error of its own type, so the code that knows what sized the request (a run's
// config, in train/out_of_memory_advice.h) can catch exactly this and say what to change,
// while everything else still sees an Error.
#include <string>

#include <fmt/format.h>

#include "sprintnet/core/error.h"

namespace sprintnet {

class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

namespace detail {
// Throws OutOfMemoryError with `message` and the check's place, as throw_check_failure does.
[[noreturn]] void throw_out_of_memory(const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace sprintnet

// SN_FAIL_OUT_OF_MEMORY("format {}", args...): SN_FAIL, throwing OutOfMemoryError.
#define SN_FAIL_OUT_OF_MEMORY(...) \
  ::sprintnet::detail::throw_out_of_memory(__FILE__, __LINE__, fmt::format(__VA_ARGS__))
