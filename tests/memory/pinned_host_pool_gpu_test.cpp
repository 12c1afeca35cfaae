// PinnedHostRecord: zeroed pinned host memory the device writes through device(), taken again from the
// pool once released (zeroed again), and more records than a chunk holds.
#include "sprintnet/memory/pinned_host_pool.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/error.h"
#include "support/gpu.h"

namespace sprintnet {
namespace {

bool all_bytes(const PinnedHostRecord& r, unsigned char value) {
  const auto* p = static_cast<const unsigned char*>(r.host());
  for (std::size_t i = 0; i < PinnedHostRecord::kMaxBytes; ++i) {
    if (p[i] != value) return false;
  }
  return true;
}

TEST(PinnedHostRecordGpu, TheDeviceWritesWhatTheHostReadsAndAReusedRecordIsZeroed) {
  SN_REQUIRE_GPU();
  SN_CUDA_CHECK(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  SN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const void* first_address = nullptr;
  {
    PinnedHostRecord record(PinnedHostRecord::kMaxBytes);
    first_address = record.host();
    ASSERT_NE(record.device(), nullptr);
    EXPECT_TRUE(all_bytes(record, 0)) << "a new record is zeroed";
    SN_CUDA_CHECK(cudaMemsetAsync(record.device(), 0xA5, PinnedHostRecord::kMaxBytes, stream));
    SN_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(all_bytes(record, 0xA5)) << "the device's writes through device() land in host()";
  }
  // The pool hands the released slot out again, zeroed.
  PinnedHostRecord again(16);
  EXPECT_EQ(again.host(), first_address);
  EXPECT_TRUE(all_bytes(again, 0));
  // More records at once than one chunk holds: each its own kMaxBytes, none overlapping, each mapped.
  std::vector<PinnedHostRecord> many;
  std::set<const void*> addresses{again.host()};
  for (int i = 0; i < 40; ++i) {
    many.emplace_back(64);
    EXPECT_TRUE(addresses.insert(many.back().host()).second) << "record " << i << " reuses a live slot";
    SN_CUDA_CHECK(cudaMemsetAsync(many.back().device(), i + 1, PinnedHostRecord::kMaxBytes, stream));
  }
  SN_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int i = 0; i < 40; ++i) {
    EXPECT_TRUE(all_bytes(many[static_cast<std::size_t>(i)], static_cast<unsigned char>(i + 1))) << "record " << i;
  }
  EXPECT_TRUE(all_bytes(again, 0)) << "no other record's write reached this one";
  SN_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(PinnedHostRecordGpu, ARecordLargerThanASlotIsRefused) {
  SN_REQUIRE_GPU();
  EXPECT_THROW(PinnedHostRecord(PinnedHostRecord::kMaxBytes + 1), Error);
}

}  // namespace
}  // namespace sprintnet
