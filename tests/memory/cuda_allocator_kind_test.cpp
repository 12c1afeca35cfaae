// Choosing the CUDA allocator: by name (the config) or by ALLOCATOR_TYPE. Works in every build.
// The choice is process-wide state, so one test walks through it in order; no other test in
// this executable touches it.
#include "sprintnet/memory/cuda_allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "sprintnet/core/error.h"

namespace sprintnet {
namespace {

TEST(CudaAllocatorKind, ParsesConfigNames) {
  EXPECT_EQ(parse_cuda_allocator_kind("caching"), CudaAllocatorKind::kCaching);
  EXPECT_EQ(parse_cuda_allocator_kind("async"), CudaAllocatorKind::kAsync);
  EXPECT_EQ(cuda_allocator_kind_name(CudaAllocatorKind::kCaching), "caching");
  EXPECT_EQ(cuda_allocator_kind_name(CudaAllocatorKind::kAsync), "async");
  try {
    parse_cuda_allocator_kind("cudaMallocAsync");
    FAIL() << "an unknown allocator name was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("'cudaMallocAsync'"));
  }
}

TEST(CudaAllocatorKind, EnvironmentThenCodeThenFixed) {
  ASSERT_EQ(::setenv("ALLOCATOR_TYPE", "bogus", 1), 0);
  try {
    cuda_allocator_kind();
    FAIL() << "ALLOCATOR_TYPE=bogus was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("ALLOCATOR_TYPE"));
    EXPECT_THAT(e.what(), testing::HasSubstr("bogus"));
  }
  ASSERT_EQ(::setenv("ALLOCATOR_TYPE", "cuda", 1), 0);
  EXPECT_EQ(cuda_allocator_kind(), CudaAllocatorKind::kAsync);
  ASSERT_EQ(::unsetenv("ALLOCATOR_TYPE"), 0);

  // The config overrides the environment, any number of times until an allocator exists...
  set_cuda_allocator_kind(CudaAllocatorKind::kCaching);
  EXPECT_EQ(cuda_allocator_kind(), CudaAllocatorKind::kCaching);
  set_cuda_allocator_kind(CudaAllocatorKind::kAsync);
  EXPECT_EQ(detail::fix_cuda_allocator_kind(), CudaAllocatorKind::kAsync);
  // ...and then only to the same kind.
  EXPECT_NO_THROW(set_cuda_allocator_kind(CudaAllocatorKind::kAsync));
  try {
    set_cuda_allocator_kind(CudaAllocatorKind::kCaching);
    FAIL() << "the allocator kind changed after it was fixed";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("already in use"));
  }
  EXPECT_EQ(cuda_allocator_kind(), CudaAllocatorKind::kAsync);
}

}  // namespace
}  // namespace sprintnet
