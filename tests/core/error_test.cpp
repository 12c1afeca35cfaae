// The functions the check macros end in: the message, then the check's file (basename), line and
// expression; out of memory as its own type, which is still an Error.
#include "sprintnet/core/error.h"

#include <gtest/gtest.h>

#include <string>

#include "sprintnet/core/out_of_memory_error.h"

namespace sprintnet {
namespace {

// What `thrower` threw as an OutOfMemoryError; "" (and a test failure) for anything else.
template <typename Thrower>
std::string out_of_memory_message(Thrower thrower) {
  try {
    thrower();
  } catch (const OutOfMemoryError& e) {
    return e.what();
  } catch (const Error& e) {
    ADD_FAILURE() << "an Error that is not an OutOfMemoryError: " << e.what();
    return {};
  }
  ADD_FAILURE() << "nothing thrown";
  return {};
}

// What SN_CUDA_CHECK calls for cudaErrorMemoryAllocation (core/cuda_check.h): the call must stay
// in the message, as it does for every other CUDA error.
TEST(CheckFailure, OutOfMemoryNamesTheMessageFileLineAndExpression) {
  EXPECT_EQ(out_of_memory_message([] {
              detail::throw_out_of_memory("src/sprintnet/ops/cuda/gemm.cpp", 112, "cudaMalloc(&workspace_, bytes)",
                                          "CUDA error cudaErrorMemoryAllocation (out of memory)");
            }),
            "CUDA error cudaErrorMemoryAllocation (out of memory) [gemm.cpp:112: cudaMalloc(&workspace_, bytes)]");
}

TEST(CheckFailure, FailOutOfMemoryNamesTheFileAndLineAndIsAnError) {
  const int line = __LINE__ + 1;
  const auto fail = [] { SN_FAIL_OUT_OF_MEMORY("cannot allocate {} bytes", 8); };
  EXPECT_EQ(out_of_memory_message(fail), "cannot allocate 8 bytes [error_test.cpp:" + std::to_string(line) + "]");
  EXPECT_THROW(fail(), Error);  // so every existing `catch (const Error&)` still reports it
}

}  // namespace
}  // namespace sprintnet
