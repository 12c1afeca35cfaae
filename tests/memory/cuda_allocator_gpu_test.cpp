// cuda_allocator(0) on a real GPU, with whichever kind ALLOCATOR_TYPE selects (CMake runs these
// tests once as they are and once with ALLOCATOR_TYPE=cuda).
#include "sprintnet/memory/cuda_allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/error.h"
#include "sprintnet/core/out_of_memory_error.h"
#include "sprintnet/core/random.h"
#include "support/gpu.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

constexpr std::size_t kKiB = std::size_t{1} << 10;
constexpr std::size_t kMiB = std::size_t{1} << 20;

std::string_view expected_kind() {
  const char* value = std::getenv("ALLOCATOR_TYPE");
  return value != nullptr && std::string_view(value) == "cuda" ? "async" : "caching";
}

std::size_t uniform_size(Generator& gen, std::size_t low, std::size_t high) { return low + gen.below(high - low + 1); }

// A mix of small-pool and large-pool requests.
std::vector<std::size_t> random_sizes(Generator& gen, std::size_t count) {
  std::vector<std::size_t> sizes(count);
  for (std::size_t& bytes : sizes) {
    bytes = gen.below(4) == 0 ? uniform_size(gen, kMiB + 1, 24 * kMiB) : uniform_size(gen, 1, 256 * kKiB);
  }
  return sizes;
}

TEST(CudaAllocatorGpu, KindFollowsTheEnvironment) {
  SN_REQUIRE_GPU();
  Allocator& allocator = cuda_allocator(0);
  EXPECT_EQ(allocator.device(), Device::cuda(0));
  EXPECT_EQ(cuda_allocator_name(0), expected_kind());
  EXPECT_EQ(&cuda_allocator(0), &allocator);  // one per device
  EXPECT_EQ(allocator.allocate(0), nullptr);
}

// Every block is written in full while all are live, then read back: blocks that overlapped
// would read back each other's bytes.
TEST(CudaAllocatorGpu, BlocksHoldWhatIsCopiedIntoThem) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  Allocator& allocator = cuda_allocator(0);
  const std::size_t allocated_before = cuda_allocator_stats(0).allocated_bytes;

  const std::vector<std::size_t> sizes = random_sizes(gen, 40);
  std::vector<void*> blocks;
  std::vector<std::vector<std::uint8_t>> written;
  for (const std::size_t bytes : sizes) {
    blocks.push_back(allocator.allocate(bytes));
    ASSERT_NE(blocks.back(), nullptr);
    std::vector<std::uint8_t> data(bytes);
    for (std::size_t j = 0; j < bytes; j += 4) {  // four random bytes per draw
      const std::uint32_t word = gen.next_u32();
      std::memcpy(data.data() + j, &word, std::min<std::size_t>(4, bytes - j));
    }
    written.push_back(std::move(data));
  }
  EXPECT_GT(cuda_allocator_stats(0).allocated_bytes, allocated_before);
  // The allocations are ordered on the allocator's stream; cudaMemcpy runs on the legacy stream.
  SN_CUDA_CHECK(cudaDeviceSynchronize());
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    SN_CUDA_CHECK(cudaMemcpy(blocks[i], written[i].data(), sizes[i], cudaMemcpyHostToDevice));
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    std::vector<std::uint8_t> read(sizes[i], 0x5A);
    SN_CUDA_CHECK(cudaMemcpy(read.data(), blocks[i], sizes[i], cudaMemcpyDeviceToHost));
    EXPECT_EQ(read, written[i]) << "block " << i << " of " << sizes[i] << " bytes";
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) allocator.deallocate(blocks[i], sizes[i]);
  SN_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(cuda_allocator_stats(0).allocated_bytes, allocated_before);
}

TEST(CudaAllocatorGpu, SecondIdenticalCycleMakesNoDeviceMalloc) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  Allocator& allocator = cuda_allocator(0);
  const std::vector<std::size_t> sizes = random_sizes(gen, 100);
  const auto cycle = [&] {
    std::vector<void*> blocks;
    for (const std::size_t bytes : sizes) blocks.push_back(allocator.allocate(bytes));
    for (std::size_t i = 0; i < blocks.size(); ++i) allocator.deallocate(blocks[i], sizes[i]);
  };
  cycle();
  const AllocatorStats warm = cuda_allocator_stats(0);
  EXPECT_GT(warm.num_device_mallocs, 0u);
  cycle();
  const AllocatorStats again = cuda_allocator_stats(0);
  EXPECT_EQ(again.num_device_mallocs, warm.num_device_mallocs);
  EXPECT_EQ(again.num_allocations - warm.num_allocations, sizes.size());
  EXPECT_EQ(again.num_cache_hits - warm.num_cache_hits, sizes.size());
  EXPECT_GT(again.reserved_bytes, 0u);
  SN_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST(CudaAllocatorGpu, EmptyCacheReturnsUnusedMemory) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  Allocator& allocator = cuda_allocator(0);
  const std::vector<std::size_t> sizes = random_sizes(gen, 20);
  std::vector<void*> blocks;
  for (const std::size_t bytes : sizes) blocks.push_back(allocator.allocate(bytes));
  for (std::size_t i = 0; i < blocks.size(); ++i) allocator.deallocate(blocks[i], sizes[i]);
  const AllocatorStats before = cuda_allocator_stats(0);
  ASSERT_EQ(before.allocated_bytes, 0u);
  ASSERT_GT(before.reserved_bytes, 0u);
  empty_cuda_allocator_cache(0);
  const AllocatorStats after = cuda_allocator_stats(0);
  EXPECT_EQ(after.reserved_bytes, 0u);
  EXPECT_GT(after.num_device_frees, before.num_device_frees);
}

TEST(CudaAllocatorGpu, OutOfMemoryThrowsNamingTheSizeAndLeavesCudaUsable) {
  SN_REQUIRE_GPU();
  std::size_t free_bytes = 0, total_bytes = 0;
  SN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  Allocator& allocator = cuda_allocator(0);
  const std::size_t reserved_before = cuda_allocator_stats(0).reserved_bytes;
  const std::size_t request = 2 * total_bytes;
  try {
    allocator.allocate(request);
    FAIL() << "allocating twice the device's memory did not throw";
  } catch (const OutOfMemoryError& e) {  // either kind: its own type, for the code that knows what sized it
    EXPECT_THAT(e.what(), testing::HasSubstr(std::to_string(request) + " bytes"));
    EXPECT_THAT(e.what(), testing::HasSubstr("out of memory"));
  }
  // The failure was reported, not left behind for the next kernel launch check to find.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // Nor does the failed request keep memory (CUDA's pool may reserve a lot while trying).
  EXPECT_LE(cuda_allocator_stats(0).reserved_bytes, reserved_before);
  void* ptr = allocator.allocate(4 * kKiB);
  EXPECT_NE(ptr, nullptr);
  SN_CUDA_CHECK(cudaMemset(ptr, 0, 4 * kKiB));
  allocator.deallocate(ptr, 4 * kKiB);
  SN_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace sprintnet
