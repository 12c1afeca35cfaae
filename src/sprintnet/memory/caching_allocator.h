#pragma once
// A caching allocator for device memory. Asking the device for memory
// (cudaMalloc) is slow and synchronises the GPU, and a training step asks for
// the same sizes every step; so freed blocks are kept and handed out again.
//
// Policy
// - Size classes. Every request is rounded up to kAllocationRoundingBytes.
//   Requests up to kSmallRequestMaxBytes come from the small pool, carved out
//   of kSmallSegmentBytes segments; bigger ones from the large pool, whose
//   segments are the request rounded up to kLargeSegmentRoundingBytes. The
//   pools never lend to each other, so many small tensors cannot fragment the
//   memory the big ones need.
// - Best fit. Each pool keeps its free blocks ordered by (stream, size,
//   address); a request takes the smallest free block of its stream that fits.
// - Splitting. When the chosen block is bigger than needed, the rest becomes a
//   free block of its own if it can serve a later request of the same pool:
//   any remainder in the small pool, more than kSmallRequestMaxBytes in the
//   large one (a smaller remainder could only ever serve small requests, which
//   never come to the large pool); otherwise the request keeps the whole block.
// - Coalescing. A freed block merges with free neighbours of its segment, so
//   segments return to one piece when everything in them is freed.
// - Streams. A block belongs to the stream it was allocated on and, once
//   freed, only serves later requests on that stream: work queued on the
//   stream before the free finishes before any later use, with no host
//   synchronisation. Memory used on another stream is the caller's to order.
// - Out of memory. When the device refuses, every cached segment that is
//   wholly free is released to the device and the request tried once more; if
//   that fails too, sprintnet::OutOfMemoryError names the request, the bytes
//   allocated and cached, and the device's answer. Partly used segments stay.
// - Nothing goes back to the device otherwise, except by empty_cache().
// - Deallocating a pointer this allocator did not hand out (or twice) is a
//   bug in the caller: debug builds stop on an assert; release builds ignore
//   it, count it in AllocatorStats::num_invalid_frees and warn once on stderr.
//
// The device is reached only through DeviceMemoryApi, so tests can fake it.
// All public members are thread-safe (one mutex).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

namespace sprintnet {

inline constexpr std::size_t kAllocationRoundingBytes = 512;
inline constexpr std::size_t kSmallRequestMaxBytes = std::size_t{1} << 20;       // 1 MiB
inline constexpr std::size_t kSmallSegmentBytes = std::size_t{2} << 20;          // 2 MiB
inline constexpr std::size_t kLargeSegmentRoundingBytes = std::size_t{2} << 20;  // 2 MiB

// Where the memory really comes from (cudaMalloc/cudaFree, or a test's fake).
class DeviceMemoryApi {
 public:
  virtual ~DeviceMemoryApi() = default;
  // nullptr when the device is out of memory; other failures throw.
  virtual void* malloc(std::size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  // Why the last malloc returned nullptr, for the error message.
  virtual std::string describe_last_failure() { return "out of memory"; }
};

// A stream's identity (a cudaStream_t cast to an integer; 0 is the default stream).
using StreamHandle = std::uintptr_t;

struct AllocatorStats {
  std::size_t allocated_bytes = 0;       // in blocks handed out (rounded sizes)
  std::size_t reserved_bytes = 0;        // held from the device: allocated + cached
  std::size_t peak_allocated_bytes = 0;  // since construction or reset_peak()
  std::size_t num_device_mallocs = 0;    // successful device mallocs (segments)
  std::size_t num_device_frees = 0;
  std::size_t num_allocations = 0;       // non-empty requests served
  std::size_t num_cache_hits = 0;        // requests served without a device malloc
  std::size_t num_ooms_recovered = 0;    // device refused, then succeeded after releasing the cache
  std::size_t num_invalid_frees = 0;     // unknown or double deallocations ignored (release builds)
};

class CachingAllocator {
 public:
  explicit CachingAllocator(DeviceMemoryApi& device);
  // Releases the cached segments; blocks still handed out are left alone.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // nullptr for 0 bytes; throws sprintnet::OutOfMemoryError when the device has no room.
  void* allocate(std::size_t bytes, StreamHandle stream);
  void deallocate(void* ptr) noexcept;
  // Returns every wholly free segment to the device.
  void empty_cache();
  AllocatorStats stats() const;
  // Starts peak_allocated_bytes again from the bytes allocated now.
  void reset_peak();

 private:
  struct Block;
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeBlocks = std::set<Block*, BlockOrder>;

  // A piece of a segment; the pieces of one segment form a list by address.
  struct Block {
    std::uintptr_t address = 0;
    std::size_t size = 0;
    StreamHandle stream = 0;
    FreeBlocks* pool = nullptr;  // the free set it returns to
    bool in_use = false;
    Block* prev = nullptr;  // neighbours in the same segment
    Block* next = nullptr;
  };

  Block* take_best_fit(FreeBlocks& pool, StreamHandle stream, std::size_t size);
  Block* allocate_segment(FreeBlocks& pool, std::size_t segment_bytes, StreamHandle stream, std::size_t request_bytes);
  void split(Block& block, std::size_t size);
  Block* merge_with_free_neighbours(Block* block);
  std::size_t release_free_segments();
  void note_invalid_free(void* ptr) noexcept;

  DeviceMemoryApi& device_;
  mutable std::mutex mutex_;
  // Every block, free or in use, by its start address (the owner of the Blocks).
  std::unordered_map<std::uintptr_t, std::unique_ptr<Block>> blocks_;
  FreeBlocks small_pool_;
  FreeBlocks large_pool_;
  AllocatorStats stats_;
};

}  // namespace sprintnet
