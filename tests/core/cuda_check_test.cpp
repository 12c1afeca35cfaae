// SN_CUDA_CHECK throws naming the CUDA error, the call, file and line; out of device memory as an
// OutOfMemoryError, so that the command that knows the run's config can say what to lower
// (train/out_of_memory_advice.h), whichever CUDA call ran out: an allocator's or any other.
#include "sprintnet/core/cuda_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include <cuda_runtime_api.h>

#include "sprintnet/core/error.h"
#include "sprintnet/core/out_of_memory_error.h"
#include "support/gpu.h"

namespace sprintnet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Stand-ins for CUDA calls that fail, so that no GPU is needed.
cudaError_t no_room_on_the_device() { return cudaErrorMemoryAllocation; }
cudaError_t a_bad_argument() { return cudaErrorInvalidValue; }

TEST(CudaCheck, OutOfMemoryIsAnOutOfMemoryErrorNamingTheCallFileAndLine) {
  const int line = __LINE__ + 2;
  try {
    SN_CUDA_CHECK(no_room_on_the_device());
    FAIL() << "SN_CUDA_CHECK of a failed call did not throw";
  } catch (const OutOfMemoryError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("CUDA error cudaErrorMemoryAllocation"),
                                HasSubstr(fmt::format("[cuda_check_test.cpp:{}: no_room_on_the_device()]", line))));
  } catch (const Error& e) {
    FAIL() << "out of memory came as a plain Error, which no out-of-memory advice catches: " << e.what();
  }
}

TEST(CudaCheck, OtherErrorsStayPlainErrors) {
  try {
    SN_CUDA_CHECK(a_bad_argument());
    FAIL() << "SN_CUDA_CHECK of a failed call did not throw";
  } catch (const OutOfMemoryError& e) {
    FAIL() << "an invalid argument became an out-of-memory error: " << e.what();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("cudaErrorInvalidValue"), HasSubstr("a_bad_argument()")));
  }
}

// The real thing: a cudaMalloc of twice the device, checked outside any allocator (as the cuBLASLt
// workspace is), and CUDA still usable after it.
TEST(CudaCheck, ARealCudaMallocTooBigIsAnOutOfMemoryError) {
  SN_REQUIRE_GPU();
  std::size_t free_bytes = 0, total_bytes = 0;
  SN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  void* ptr = nullptr;
  EXPECT_THROW(SN_CUDA_CHECK(cudaMalloc(&ptr, 2 * total_bytes)), OutOfMemoryError);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // reported, not left for the next launch check
  SN_CUDA_CHECK(cudaMalloc(&ptr, 4096));
  SN_CUDA_CHECK(cudaFree(ptr));
}

}  // namespace
}  // namespace sprintnet
