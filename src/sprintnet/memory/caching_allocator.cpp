#include "sprintnet/memory/caching_allocator.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <limits>
#include <tuple>

#include "sprintnet/core/error.h"
#include "sprintnet/core/out_of_memory_error.h"

namespace sprintnet {
namespace {

constexpr std::size_t round_up(std::size_t bytes, std::size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

// Larger requests would overflow the rounding; no device has that much memory anyway.
constexpr std::size_t kMaxRequestBytes = std::numeric_limits<std::size_t>::max() / 2;

}  // namespace

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  return std::tie(a->stream, a->size, a->address) < std::tie(b->stream, b->size, b->address);
}

CachingAllocator::CachingAllocator(DeviceMemoryApi& device) : device_(device) {}

CachingAllocator::~CachingAllocator() {
  try {
    std::lock_guard lock(mutex_);
    release_free_segments();
  } catch (...) {
    // A destructor must not throw; the device (or its driver) is going away anyway.
  }
}

void* CachingAllocator::allocate(std::size_t bytes, StreamHandle stream) {
  if (bytes == 0) return nullptr;
  SN_CHECK(bytes <= kMaxRequestBytes, "cannot allocate {} bytes of device memory: larger than any device", bytes);
  const std::size_t size = round_up(bytes, kAllocationRoundingBytes);
  const bool small = size <= kSmallRequestMaxBytes;

  std::lock_guard lock(mutex_);
  FreeBlocks& pool = small ? small_pool_ : large_pool_;
  Block* block = take_best_fit(pool, stream, size);
  if (block != nullptr) {
    ++stats_.num_cache_hits;
  } else {
    const std::size_t segment_bytes = small ? kSmallSegmentBytes : round_up(size, kLargeSegmentRoundingBytes);
    block = allocate_segment(pool, segment_bytes, stream, bytes);
  }
  split(*block, size);
  block->in_use = true;
  stats_.allocated_bytes += block->size;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  ++stats_.num_allocations;
  return reinterpret_cast<void*>(block->address);
}

void CachingAllocator::deallocate(void* ptr) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  const auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == blocks_.end() || !it->second->in_use) {
    note_invalid_free(ptr);
    return;
  }
  Block* block = it->second.get();
  block->in_use = false;
  stats_.allocated_bytes -= block->size;
  block = merge_with_free_neighbours(block);
  block->pool->insert(block);
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  release_free_segments();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
}

CachingAllocator::Block* CachingAllocator::take_best_fit(FreeBlocks& pool, StreamHandle stream, std::size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  const auto it = pool.lower_bound(&key);  // the smallest block of this stream with at least `size` bytes
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  pool.erase(it);
  return block;
}

CachingAllocator::Block* CachingAllocator::allocate_segment(FreeBlocks& pool, std::size_t segment_bytes,
                                                            StreamHandle stream, std::size_t request_bytes) {
  void* ptr = device_.malloc(segment_bytes);
  if (ptr == nullptr) {
    const std::size_t released_bytes = release_free_segments();
    ptr = device_.malloc(segment_bytes);
    if (ptr == nullptr) {
      SN_FAIL_OUT_OF_MEMORY(
          "out of device memory: cannot allocate {} bytes (a {} byte segment); {} bytes are allocated and {} "
          "cached by this allocator (released {} cached bytes and retried); the device says: {}",
          request_bytes, segment_bytes, stats_.allocated_bytes, stats_.reserved_bytes - stats_.allocated_bytes,
          released_bytes, device_.describe_last_failure());
    }
    ++stats_.num_ooms_recovered;
  }
  ++stats_.num_device_mallocs;
  stats_.reserved_bytes += segment_bytes;

  auto block = std::make_unique<Block>();
  block->address = reinterpret_cast<std::uintptr_t>(ptr);
  block->size = segment_bytes;
  block->stream = stream;
  block->pool = &pool;
  Block* raw = block.get();
  blocks_.emplace(raw->address, std::move(block));
  return raw;
}

void CachingAllocator::split(Block& block, std::size_t size) {
  const std::size_t remainder = block.size - size;
  const bool worth_keeping = block.pool == &small_pool_ ? remainder >= kAllocationRoundingBytes
                                                        : remainder > kSmallRequestMaxBytes;
  if (!worth_keeping) return;

  auto owned = std::make_unique<Block>();
  Block* rest = owned.get();
  rest->address = block.address + size;
  rest->size = remainder;
  rest->stream = block.stream;
  rest->pool = block.pool;
  rest->prev = &block;
  rest->next = block.next;
  blocks_.emplace(rest->address, std::move(owned));
  if (block.next != nullptr) block.next->prev = rest;
  block.next = rest;
  block.size = size;
  rest->pool->insert(rest);
}

CachingAllocator::Block* CachingAllocator::merge_with_free_neighbours(Block* block) {
  // The lower block of a pair absorbs the upper one, so surviving blocks keep their address (their key in blocks_).
  if (Block* next = block->next; next != nullptr && !next->in_use) {
    next->pool->erase(next);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    blocks_.erase(next->address);
  }
  if (Block* prev = block->prev; prev != nullptr && !prev->in_use) {
    prev->pool->erase(prev);  // before its size (part of the set's order) changes
    prev->size += block->size;
    prev->next = block->next;
    if (prev->next != nullptr) prev->next->prev = prev;
    blocks_.erase(block->address);
    block = prev;
  }
  return block;
}

std::size_t CachingAllocator::release_free_segments() {
  std::size_t released_bytes = 0;
  for (FreeBlocks* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* block = *it;
      if (block->prev != nullptr || block->next != nullptr) {  // part of a segment still in use
        ++it;
        continue;
      }
      device_.free(reinterpret_cast<void*>(block->address));
      ++stats_.num_device_frees;
      stats_.reserved_bytes -= block->size;
      released_bytes += block->size;
      it = pool->erase(it);
      blocks_.erase(block->address);
    }
  }
  return released_bytes;
}

void CachingAllocator::note_invalid_free(void* ptr) noexcept {
  assert(false && "CachingAllocator::deallocate: pointer not handed out by this allocator, or freed twice");
  if (stats_.num_invalid_frees++ == 0) {
    std::fprintf(stderr,
                 "sprintnet: warning: ignoring deallocate(%p): not allocated by this caching allocator, or freed "
                 "twice (further ones are only counted)\n",
                 ptr);
  }
}

}  // namespace sprintnet
