// CachingAllocator against a fake device: size classes, reuse, best fit,
// split/coalesce, streams, out-of-memory recovery, statistics, and a random
// stress test that proves live blocks never overlap.
#include "sprintnet/memory/caching_allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "sprintnet/core/error.h"
#include "sprintnet/core/out_of_memory_error.h"
#include "sprintnet/core/random.h"
#include "support/test_util.h"
#include "memory/fake_device_memory.h"

namespace sprintnet {
namespace {

using test::FakeDeviceMemory;

constexpr std::size_t kKiB = std::size_t{1} << 10;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr StreamHandle kStream1 = 0x1000;  // stands for a cudaStream_t
constexpr StreamHandle kStream2 = 0x2000;

std::size_t rounded(std::size_t bytes) {
  return (bytes + kAllocationRoundingBytes - 1) / kAllocationRoundingBytes * kAllocationRoundingBytes;
}

std::uintptr_t address(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }

// Every live block is filled with its own 64-bit tag; a block that overlaps another loses it.
// Blocks are 512-byte aligned, so the words are aligned.
void fill_with_tag(void* ptr, std::size_t bytes, std::uint64_t tag) {
  auto* words = static_cast<std::uint64_t*>(ptr);
  std::fill_n(words, bytes / sizeof(tag), tag);
  std::memset(static_cast<unsigned char*>(ptr) + bytes / sizeof(tag) * sizeof(tag), static_cast<int>(tag & 0xFF),
              bytes % sizeof(tag));
}

bool holds_tag(const void* ptr, std::size_t bytes, std::uint64_t tag) {
  const auto* words = static_cast<const std::uint64_t*>(ptr);
  if (!std::all_of(words, words + bytes / sizeof(tag), [tag](std::uint64_t w) { return w == tag; })) return false;
  const auto* tail = static_cast<const unsigned char*>(ptr) + bytes / sizeof(tag) * sizeof(tag);
  return std::all_of(tail, tail + bytes % sizeof(tag), [tag](unsigned char c) { return c == (tag & 0xFF); });
}

// Distinct and never zero, so a block left at zero (or at a neighbour's tag) shows.
std::uint64_t tag_of(std::uint64_t id) { return (id + 1) * 0x9E3779B97F4A7C15ULL; }

// Uniform in [low, high].
std::size_t uniform_size(Generator& gen, std::size_t low, std::size_t high) { return low + gen.below(high - low + 1); }

TEST(CachingAllocator, ZeroBytesGiveNullptrAndTouchNothing) {
  FakeDeviceMemory device;
  CachingAllocator allocator(device);
  EXPECT_EQ(allocator.allocate(0, kStream1), nullptr);
  allocator.deallocate(nullptr);
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.num_allocations, 0u);
  EXPECT_EQ(stats.reserved_bytes, 0u);
  EXPECT_EQ(stats.num_invalid_frees, 0u);
  EXPECT_EQ(device.malloc_calls(), 0u);
}

TEST(CachingAllocator, RoundsRequestsToSizeClasses) {
  Generator gen(test::test_seed());
  const std::size_t k = uniform_size(gen, 1, 2000);
  const std::size_t large_segments = uniform_size(gen, 2, 8);
  struct Case {
    std::size_t request, block, segment;
  };
  const Case cases[] = {
      {1, kAllocationRoundingBytes, kSmallSegmentBytes},
      // Anything in (k*512, (k+1)*512] takes (k+1)*512 bytes.
      {k * kAllocationRoundingBytes + uniform_size(gen, 1, kAllocationRoundingBytes),
       (k + 1) * kAllocationRoundingBytes, kSmallSegmentBytes},
      {kSmallRequestMaxBytes, kSmallRequestMaxBytes, kSmallSegmentBytes},
      // Just above the small limit: a 2 MiB large segment whose 1 MiB - 512 B rest is too small to split off.
      {kSmallRequestMaxBytes + 1, 2 * kMiB, 2 * kMiB},
      // 3 MiB: a 4 MiB segment; a 1 MiB rest could only serve small requests, so it stays with the block.
      {3 * kMiB, 4 * kMiB, 4 * kMiB},
      // 2.5 MiB: a 4 MiB segment whose 1.5 MiB rest is split off.
      {5 * kMiB / 2, 5 * kMiB / 2, 4 * kMiB},
      {large_segments * 2 * kMiB, large_segments * 2 * kMiB, large_segments * 2 * kMiB},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "request " << c.request << " bytes");
    FakeDeviceMemory device;
    CachingAllocator allocator(device);
    void* ptr = allocator.allocate(c.request, kStream1);
    ASSERT_NE(ptr, nullptr);
    fill_with_tag(ptr, c.request, tag_of(1));  // the request's bytes must all be usable
    const AllocatorStats stats = allocator.stats();
    EXPECT_EQ(stats.allocated_bytes, c.block);
    EXPECT_EQ(stats.reserved_bytes, c.segment);
    EXPECT_EQ(device.held_bytes(), c.segment);
    EXPECT_EQ(address(ptr) % kAllocationRoundingBytes, 0u);
    allocator.deallocate(ptr);
  }
}

TEST(CachingAllocator, FreedBlockIsReusedWithoutDeviceMalloc) {
  Generator gen(test::test_seed());
  for (const std::size_t bytes : {uniform_size(gen, 1, kSmallRequestMaxBytes),
                                  uniform_size(gen, kSmallRequestMaxBytes + 1, 64 * kMiB)}) {
    SCOPED_TRACE(testing::Message() << "request " << bytes << " bytes");
    FakeDeviceMemory device;
    CachingAllocator allocator(device);
    void* first = allocator.allocate(bytes, kStream1);
    allocator.deallocate(first);
    void* second = allocator.allocate(bytes, kStream1);
    EXPECT_EQ(second, first);
    EXPECT_EQ(device.malloc_calls(), 1u);
    const AllocatorStats stats = allocator.stats();
    EXPECT_EQ(stats.num_device_mallocs, 1u);
    EXPECT_EQ(stats.num_cache_hits, 1u);
    EXPECT_EQ(stats.num_allocations, 2u);
    allocator.deallocate(second);
  }
}

TEST(CachingAllocator, BestFitTakesTheSmallestBlockThatFits) {
  Generator gen(test::test_seed());
  // Four large segments of distinct sizes (multiples of 2 MiB, so each is exactly one block).
  std::vector<std::size_t> sizes = {2 * kMiB, 4 * kMiB, 6 * kMiB, 8 * kMiB, 10 * kMiB, 12 * kMiB, 14 * kMiB};
  for (std::size_t i = sizes.size() - 1; i > 0; --i) std::swap(sizes[i], sizes[gen.below(i + 1)]);
  sizes.resize(4);

  FakeDeviceMemory device;
  CachingAllocator allocator(device);
  std::vector<void*> segments;
  for (const std::size_t bytes : sizes) segments.push_back(allocator.allocate(bytes, kStream1));
  for (void* ptr : segments) allocator.deallocate(ptr);  // different segments: they cannot merge

  std::vector<std::size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return sizes[a] < sizes[b]; });
  const std::size_t target = gen.below(order.size());  // the rank of the block that must be chosen
  const std::size_t below = target == 0 ? kSmallRequestMaxBytes : sizes[order[target - 1]];
  const std::size_t request = uniform_size(gen, below + 1, sizes[order[target]]);
  SCOPED_TRACE(testing::Message() << "request " << request << " bytes; free blocks " << testing::PrintToString(sizes));

  void* ptr = allocator.allocate(request, kStream1);
  EXPECT_EQ(ptr, segments[order[target]]);
  EXPECT_EQ(device.malloc_calls(), sizes.size());
  allocator.deallocate(ptr);
}

TEST(CachingAllocator, SplitsSmallBlocksAndCoalescesThemOnFree) {
  Generator gen(test::test_seed());
  // A + B + C = 1 MiB and D = 1 MiB fill one 2 MiB segment, each carved from the rest of the one before.
  constexpr std::size_t kUnitsPerMiB = kSmallRequestMaxBytes / kAllocationRoundingBytes;
  const std::size_t a_units = uniform_size(gen, 1, 1000);
  const std::size_t b_units = uniform_size(gen, 1, kUnitsPerMiB - 1 - a_units);  // leaves C at least one unit
  const std::size_t a = kAllocationRoundingBytes * a_units;
  const std::size_t b = kAllocationRoundingBytes * b_units;
  const std::size_t c = kSmallRequestMaxBytes - a - b;
  const std::size_t d = kSmallRequestMaxBytes;
  SCOPED_TRACE(testing::Message() << "A " << a << ", B " << b << ", C " << c << " bytes");

  FakeDeviceMemory device;
  CachingAllocator allocator(device);
  void* pa = allocator.allocate(a, kStream1);
  void* pb = allocator.allocate(b, kStream1);
  void* pc = allocator.allocate(c, kStream1);
  void* pd = allocator.allocate(d, kStream1);
  ASSERT_EQ(device.malloc_calls(), 1u);
  EXPECT_EQ(address(pb), address(pa) + a);
  EXPECT_EQ(address(pc), address(pb) + b);
  EXPECT_EQ(address(pd), address(pc) + c);
  EXPECT_EQ(allocator.stats().allocated_bytes, kSmallSegmentBytes);

  // Free A, B, C in a random order (the last one freed may have free neighbours on both sides).
  std::vector<void*> to_free = {pa, pb, pc};
  for (std::size_t i = to_free.size() - 1; i > 0; --i) std::swap(to_free[i], to_free[gen.below(i + 1)]);
  for (void* ptr : to_free) allocator.deallocate(ptr);

  // Only a block merged from all three can serve their total.
  void* merged = allocator.allocate(a + b + c, kStream1);
  EXPECT_EQ(merged, pa);
  EXPECT_EQ(device.malloc_calls(), 1u);
  EXPECT_EQ(allocator.stats().num_cache_hits, 4u);  // B, C, D and the merged block

  // With D freed too the segment is whole again, which is what lets empty_cache return it.
  allocator.deallocate(merged);
  allocator.deallocate(pd);
  allocator.empty_cache();
  EXPECT_EQ(device.free_calls(), 1u);
  EXPECT_EQ(device.held_bytes(), 0u);
}

TEST(CachingAllocator, CoalescesLargeBlocksFreedInAnyOrder) {
  Generator gen(test::test_seed());
  const std::size_t total = 2 * kMiB * uniform_size(gen, 3, 8);
  FakeDeviceMemory device;
  CachingAllocator allocator(device);
  allocator.deallocate(allocator.allocate(total, kStream1));

  // Random pieces of the cached segment, multiples of 2 MiB (so every rest is worth splitting off).
  std::vector<void*> pieces;
  std::vector<std::size_t> piece_bytes;
  std::uintptr_t expected = 0;
  for (std::size_t left = total; left > 0;) {
    const std::size_t bytes = 2 * kMiB * uniform_size(gen, 1, left / (2 * kMiB));
    void* ptr = allocator.allocate(bytes, kStream1);
    if (!pieces.empty()) {
      EXPECT_EQ(address(ptr), expected);
    }
    expected = address(ptr) + bytes;
    pieces.push_back(ptr);
    piece_bytes.push_back(bytes);
    left -= bytes;
  }
  EXPECT_EQ(device.malloc_calls(), 1u);
  SCOPED_TRACE(testing::Message() << "pieces " << testing::PrintToString(piece_bytes));

  void* base = pieces.front();
  for (std::size_t i = pieces.size() - 1; i > 0; --i) std::swap(pieces[i], pieces[gen.below(i + 1)]);
  for (void* ptr : pieces) allocator.deallocate(ptr);
  EXPECT_EQ(allocator.allocate(total, kStream1), base);
  EXPECT_EQ(device.malloc_calls(), 1u);
}

TEST(CachingAllocator, BlockFreedOnOneStreamServesOnlyThatStream) {
  Generator gen(test::test_seed());
  // Both directions: the free set is ordered by stream, so a lookup must not just land past the other's blocks.
  for (const auto& [freed_on, asked_on] : {std::pair{kStream1, kStream2}, std::pair{kStream2, kStream1}}) {
    for (const std::size_t bytes : {uniform_size(gen, 1, kSmallRequestMaxBytes),
                                    uniform_size(gen, kSmallRequestMaxBytes + 1, 64 * kMiB)}) {
      SCOPED_TRACE(testing::Message() << "request " << bytes << " bytes, freed on " << freed_on);
      FakeDeviceMemory device;
      CachingAllocator allocator(device);
      void* first = allocator.allocate(bytes, freed_on);
      allocator.deallocate(first);

      void* other = allocator.allocate(bytes, asked_on);
      EXPECT_EQ(device.malloc_calls(), 2u);
      EXPECT_TRUE(address(other) + bytes <= address(first) || address(first) + bytes <= address(other))
          << "a block of the other stream's cached segment was handed out";

      EXPECT_EQ(allocator.allocate(bytes, freed_on), first);
      EXPECT_EQ(device.malloc_calls(), 2u);
    }
  }
}

TEST(CachingAllocator, OutOfMemoryReleasesCachedSegmentsAndRetries) {
  Generator gen(test::test_seed());
  FakeDeviceMemory device(6 * kMiB);
  CachingAllocator allocator(device);
  // A cached 2 MiB segment of stream 1, and a partly used small segment of stream 2.
  allocator.deallocate(allocator.allocate(2 * kMiB, kStream1));
  const std::size_t live_bytes = uniform_size(gen, 1, kSmallRequestMaxBytes);
  void* live = allocator.allocate(live_bytes, kStream2);
  fill_with_tag(live, live_bytes, tag_of(7));
  ASSERT_EQ(device.held_bytes(), 4 * kMiB);

  // 4 more MiB do not fit beside the 4 held; releasing the cached segment makes room.
  void* big = allocator.allocate(4 * kMiB, kStream2);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(device.refusals(), 1u);
  EXPECT_EQ(device.free_calls(), 1u);  // only the wholly free segment went back
  EXPECT_TRUE(holds_tag(live, live_bytes, tag_of(7)));
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.num_ooms_recovered, 1u);
  EXPECT_EQ(stats.num_device_frees, 1u);
  EXPECT_EQ(stats.reserved_bytes, 6 * kMiB);
  EXPECT_EQ(stats.reserved_bytes, device.held_bytes());
  allocator.deallocate(big);
  allocator.deallocate(live);
}

TEST(CachingAllocator, OutOfMemoryWithNothingToReleaseThrowsAnOutOfMemoryErrorNamingTheSize) {
  Generator gen(test::test_seed());
  FakeDeviceMemory device(4 * kMiB);
  CachingAllocator allocator(device);
  void* live = allocator.allocate(3 * kMiB, kStream1);  // a 4 MiB segment, all of it in use
  const std::size_t request = uniform_size(gen, 1, 4 * kMiB);
  try {
    allocator.allocate(request, kStream1);
    FAIL() << "allocating " << request << " bytes on a full device did not throw";
  } catch (const OutOfMemoryError& e) {  // its own type, for the code that knows what sized the request
    const std::string message = e.what();
    EXPECT_THAT(message, testing::HasSubstr(std::to_string(request) + " bytes"));
    EXPECT_THAT(message, testing::HasSubstr(std::to_string(4 * kMiB) + " bytes are allocated"));
    EXPECT_THAT(message, testing::HasSubstr("0 cached"));
    EXPECT_THAT(message, testing::HasSubstr("fake device full"));
  }
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.num_allocations, 1u);
  EXPECT_EQ(stats.reserved_bytes, 4 * kMiB);
  EXPECT_EQ(stats.num_ooms_recovered, 0u);

  // Once the block is freed the same request succeeds: a large one from the cached segment, a small
  // one (the pools do not share) only after that segment is released to make room.
  allocator.deallocate(live);
  void* ptr = allocator.allocate(request, kStream1);
  EXPECT_NE(ptr, nullptr);
  EXPECT_EQ(allocator.stats().num_ooms_recovered, request <= kSmallRequestMaxBytes ? 1u : 0u);
  allocator.deallocate(ptr);
}

TEST(CachingAllocator, StatsCountBytesCallsAndPeak) {
  Generator gen(test::test_seed());
  FakeDeviceMemory device;
  CachingAllocator allocator(device);
  const std::size_t small = uniform_size(gen, 1, kSmallRequestMaxBytes);
  const std::size_t large = 2 * kMiB * uniform_size(gen, 1, 8);  // exactly one segment
  void* ps = allocator.allocate(small, kStream1);
  void* pl = allocator.allocate(large, kStream1);
  AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.allocated_bytes, rounded(small) + large);
  EXPECT_EQ(stats.reserved_bytes, kSmallSegmentBytes + large);
  EXPECT_EQ(stats.peak_allocated_bytes, rounded(small) + large);
  EXPECT_EQ(stats.num_device_mallocs, 2u);
  EXPECT_EQ(stats.num_allocations, 2u);
  EXPECT_EQ(stats.num_cache_hits, 0u);

  allocator.deallocate(pl);
  stats = allocator.stats();
  EXPECT_EQ(stats.allocated_bytes, rounded(small));
  EXPECT_EQ(stats.reserved_bytes, kSmallSegmentBytes + large);  // cached, still held
  EXPECT_EQ(stats.peak_allocated_bytes, rounded(small) + large);

  allocator.reset_peak();
  EXPECT_EQ(allocator.stats().peak_allocated_bytes, rounded(small));
  pl = allocator.allocate(large, kStream1);
  stats = allocator.stats();
  EXPECT_EQ(stats.num_cache_hits, 1u);
  EXPECT_EQ(stats.num_allocations, 3u);
  EXPECT_EQ(stats.peak_allocated_bytes, rounded(small) + large);
  EXPECT_EQ(stats.num_device_frees, 0u);
  allocator.deallocate(pl);
  allocator.deallocate(ps);
  EXPECT_EQ(allocator.stats().allocated_bytes, 0u);
}

TEST(CachingAllocator, EmptyCacheReturnsEveryUnusedSegment) {
  Generator gen(test::test_seed());
  FakeDeviceMemory device;
  CachingAllocator allocator(device);
  std::vector<void*> blocks;
  for (int i = 0; i < 20; ++i) {
    const bool large = gen.below(2) == 1;
    const std::size_t bytes = large ? uniform_size(gen, kSmallRequestMaxBytes + 1, 16 * kMiB)
                                    : uniform_size(gen, 1, kSmallRequestMaxBytes);
    blocks.push_back(allocator.allocate(bytes, gen.below(2) == 1 ? kStream1 : kStream2));
  }
  const std::size_t keep_bytes = uniform_size(gen, 1, kSmallRequestMaxBytes);
  void* kept = allocator.allocate(keep_bytes, kStream1);
  fill_with_tag(kept, keep_bytes, tag_of(3));
  for (void* ptr : blocks) allocator.deallocate(ptr);
  const std::size_t segments = device.num_segments();
  ASSERT_GT(segments, 1u);

  // Everything but the kept block's segment goes back.
  allocator.empty_cache();
  EXPECT_EQ(device.num_segments(), 1u);
  EXPECT_EQ(device.held_bytes(), kSmallSegmentBytes);
  EXPECT_EQ(allocator.stats().reserved_bytes, kSmallSegmentBytes);
  EXPECT_EQ(allocator.stats().num_device_frees, segments - 1);
  EXPECT_TRUE(holds_tag(kept, keep_bytes, tag_of(3)));

  allocator.deallocate(kept);
  allocator.empty_cache();
  EXPECT_EQ(device.held_bytes(), 0u);
  EXPECT_EQ(allocator.stats().reserved_bytes, 0u);
  EXPECT_EQ(allocator.stats().num_device_frees, segments);
}

TEST(CachingAllocator, DestructorReturnsCachedSegments) {
  Generator gen(test::test_seed());
  FakeDeviceMemory device;
  {
    CachingAllocator allocator(device);
    allocator.deallocate(allocator.allocate(uniform_size(gen, 1, 32 * kMiB), kStream1));
    allocator.deallocate(allocator.allocate(uniform_size(gen, 1, 32 * kMiB), kStream2));
    EXPECT_GT(device.held_bytes(), 0u);
  }
  EXPECT_EQ(device.held_bytes(), 0u);
}

TEST(CachingAllocator, UnknownOrDoubleFreeIsCaughtWithoutCorruptingState) {
  FakeDeviceMemory device;
  CachingAllocator allocator(device);
  void* ptr = allocator.allocate(4 * kKiB, kStream1);
  int not_from_the_allocator = 0;
#ifdef NDEBUG
  // Release builds ignore and count them.
  allocator.deallocate(&not_from_the_allocator);
  allocator.deallocate(static_cast<char*>(ptr) + kAllocationRoundingBytes);  // inside a block, not its start
  EXPECT_EQ(allocator.stats().num_invalid_frees, 2u);
  EXPECT_EQ(allocator.stats().allocated_bytes, 4 * kKiB);
  allocator.deallocate(ptr);
  allocator.deallocate(ptr);  // twice
  AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.num_invalid_frees, 3u);
  EXPECT_EQ(stats.allocated_bytes, 0u);
  // The block is in the free set once, not twice: two requests get two different blocks.
  void* first = allocator.allocate(4 * kKiB, kStream1);
  void* second = allocator.allocate(4 * kKiB, kStream1);
  EXPECT_NE(first, second);
  allocator.deallocate(first);
  allocator.deallocate(second);
#else
  // Debug builds stop at the bug.
  EXPECT_DEATH(allocator.deallocate(&not_from_the_allocator), "not handed out by this allocator");
  allocator.deallocate(ptr);
  EXPECT_DEATH(allocator.deallocate(ptr), "not handed out by this allocator");
#endif
}

TEST(CachingAllocator, SecondIdenticalCycleNeedsNoDeviceMalloc) {
  Generator gen(test::test_seed());
  std::vector<std::size_t> sizes(200);
  for (std::size_t& bytes : sizes) {
    bytes = gen.below(4) == 0 ? uniform_size(gen, kSmallRequestMaxBytes + 1, 32 * kMiB)
                              : uniform_size(gen, 1, kSmallRequestMaxBytes);
  }
  FakeDeviceMemory device;
  CachingAllocator allocator(device);
  const auto cycle = [&] {
    std::vector<void*> blocks;
    for (const std::size_t bytes : sizes) blocks.push_back(allocator.allocate(bytes, kStream1));
    for (void* ptr : blocks) allocator.deallocate(ptr);
  };
  cycle();
  const AllocatorStats warm = allocator.stats();
  cycle();
  const AllocatorStats again = allocator.stats();
  EXPECT_EQ(again.num_device_mallocs, warm.num_device_mallocs);
  EXPECT_EQ(again.num_cache_hits - warm.num_cache_hits, sizes.size());
  EXPECT_EQ(again.reserved_bytes, warm.reserved_bytes);
}

// Thousands of random allocations and frees on two streams. Each live block holds its own tag,
// checked when it is freed: two live blocks that overlapped would clobber each other's tags.
TEST(CachingAllocator, RandomStressKeepsLiveBlocksDisjoint) {
  Generator gen(test::test_seed());
  FakeDeviceMemory device;
  CachingAllocator allocator(device);
  struct Live {
    void* ptr;
    std::size_t bytes;
    std::uint64_t tag;
  };
  std::vector<Live> live;
  std::size_t live_rounded_bytes = 0;
  constexpr int kOperations = 4000;
  constexpr std::size_t kMaxLiveBlocks = 200;
  for (int op = 0; op < kOperations; ++op) {
    const bool allocate = live.empty() || (live.size() < kMaxLiveBlocks && gen.below(100) < 55);
    if (allocate) {
      const std::uint64_t kind = gen.below(100);
      const std::size_t bytes = kind < 70   ? uniform_size(gen, 1, 64 * kKiB)
                                : kind < 95 ? uniform_size(gen, 64 * kKiB, kSmallRequestMaxBytes)
                                            : uniform_size(gen, kSmallRequestMaxBytes + 1, 8 * kMiB);
      void* ptr = allocator.allocate(bytes, gen.below(2) == 0 ? kStream1 : kStream2);
      ASSERT_NE(ptr, nullptr);
      ASSERT_EQ(address(ptr) % kAllocationRoundingBytes, 0u);
      const std::uint64_t tag = tag_of(static_cast<std::uint64_t>(op));
      fill_with_tag(ptr, bytes, tag);
      live.push_back({ptr, bytes, tag});
      live_rounded_bytes += rounded(bytes);
    } else {
      const std::size_t i = gen.below(live.size());
      ASSERT_TRUE(holds_tag(live[i].ptr, live[i].bytes, live[i].tag))
          << "block of " << live[i].bytes << " bytes at " << live[i].ptr << " was overwritten (operation " << op << ")";
      allocator.deallocate(live[i].ptr);
      live_rounded_bytes -= rounded(live[i].bytes);
      live[i] = live.back();
      live.pop_back();
    }
    const AllocatorStats stats = allocator.stats();
    ASSERT_GE(stats.allocated_bytes, live_rounded_bytes);  // a large block may keep an unsplittable rest
    ASSERT_EQ(stats.reserved_bytes, device.held_bytes());
    ASSERT_LE(stats.allocated_bytes, stats.reserved_bytes);
  }
  for (const Live& block : live) {
    ASSERT_TRUE(holds_tag(block.ptr, block.bytes, block.tag)) << "block at " << block.ptr << " was overwritten";
    allocator.deallocate(block.ptr);
  }
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.allocated_bytes, 0u);
  EXPECT_EQ(stats.num_invalid_frees, 0u);
  EXPECT_GT(stats.num_cache_hits, 0u);
  allocator.empty_cache();
  EXPECT_EQ(device.held_bytes(), 0u);  // every segment coalesced back to one piece
  EXPECT_EQ(device.malloc_calls(), device.free_calls());
}

TEST(CachingAllocator, ConcurrentThreadsKeepLiveBlocksDisjoint) {
  const std::uint64_t seed = test::test_seed();
  FakeDeviceMemory device;
  CachingAllocator allocator(device);
  constexpr int kThreads = 4;
  constexpr int kOperationsPerThread = 1000;
  std::atomic<int> overwritten{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Generator gen(seed, static_cast<std::uint64_t>(t) + 1);
      const StreamHandle stream = static_cast<StreamHandle>(t % 2 == 0 ? kStream1 : kStream2);
      struct Live {
        void* ptr;
        std::size_t bytes;
        std::uint64_t tag;
      };
      std::vector<Live> live;
      for (int op = 0; op < kOperationsPerThread; ++op) {
        if (live.empty() || gen.below(2) == 0) {
          const std::size_t bytes = uniform_size(gen, 1, gen.below(10) == 0 ? 4 * kMiB : 64 * kKiB);
          const std::uint64_t tag = tag_of((static_cast<std::uint64_t>(t) << 32) | static_cast<std::uint64_t>(op));
          void* ptr = allocator.allocate(bytes, stream);
          fill_with_tag(ptr, bytes, tag);
          live.push_back({ptr, bytes, tag});
        } else {
          const std::size_t i = gen.below(live.size());
          if (!holds_tag(live[i].ptr, live[i].bytes, live[i].tag)) ++overwritten;
          allocator.deallocate(live[i].ptr);
          live[i] = live.back();
          live.pop_back();
        }
      }
      for (const Live& block : live) {
        if (!holds_tag(block.ptr, block.bytes, block.tag)) ++overwritten;
        allocator.deallocate(block.ptr);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(overwritten.load(), 0);
  EXPECT_EQ(allocator.stats().allocated_bytes, 0u);
  EXPECT_EQ(allocator.stats().num_allocations, allocator.stats().num_device_mallocs + allocator.stats().num_cache_hits);
}

}  // namespace
}  // namespace sprintnet
