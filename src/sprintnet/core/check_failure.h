#pragma once
// The functions every check macro ends in (SN_CHECK, SN_FAIL_OUT_OF_MEMORY, SN_CUDA_CHECK), declared
// without fmt: fmt 9's headers do not compile under nvcc in C++20 mode, and core/cuda_check.h, which
// .cu files include, needs them too. Defined in core/error.cpp.
#include <string>

namespace sprintnet::detail {

// Throw `message` followed by "[file:line: expr]" (expr may be nullptr): as sprintnet::Error...
[[noreturn]] void throw_check_failure(const char* file, int line, const char* expr, const std::string& message);
// ...or as sprintnet::OutOfMemoryError (core/out_of_memory_error.h), for the device (or, `host`, the host)
// having no room.
[[noreturn]] void throw_out_of_memory(const char* file, int line, const char* expr, const std::string& message,
                                      bool host = false);

}  // namespace sprintnet::detail
