#pragma once
// A DeviceMemoryApi that hands out host memory, counts the calls, and can be
// told to refuse (out of memory) once a number of bytes is held.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <limits>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "sprintnet/memory/caching_allocator.h"

namespace sprintnet::test {

class FakeDeviceMemory final : public DeviceMemoryApi {
 public:
  // cudaMalloc returns at least 256-byte aligned memory; 512 makes every block start aligned to its size class.
  static constexpr std::size_t kAlignmentBytes = kAllocationRoundingBytes;

  explicit FakeDeviceMemory(std::size_t limit_bytes = std::numeric_limits<std::size_t>::max())
      : limit_bytes_(limit_bytes) {}
  ~FakeDeviceMemory() override {
    for (const auto& [ptr, bytes] : segments_) std::free(ptr);
  }
  FakeDeviceMemory(const FakeDeviceMemory&) = delete;
  FakeDeviceMemory& operator=(const FakeDeviceMemory&) = delete;

  void* malloc(std::size_t bytes) override {
    ++malloc_calls_;
    if (held_bytes_ > limit_bytes_ || bytes > limit_bytes_ - held_bytes_) {
      ++refusals_;
      return nullptr;
    }
    void* ptr = std::aligned_alloc(kAlignmentBytes, (bytes + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes);
    if (ptr == nullptr) ADD_FAILURE() << "host out of memory allocating " << bytes << " bytes for the fake device";
    segments_.emplace(ptr, bytes);
    held_bytes_ += bytes;
    return ptr;
  }

  void free(void* ptr) override {
    ++free_calls_;
    const auto it = segments_.find(ptr);
    if (it == segments_.end()) {
      ADD_FAILURE() << "free of " << ptr << ", which the fake device did not hand out";
      return;
    }
    held_bytes_ -= it->second;
    segments_.erase(it);
    std::free(ptr);
  }

  std::string describe_last_failure() override {
    return fmt::format("fake device full ({} of {} bytes held)", held_bytes_, limit_bytes_);
  }

  void set_limit_bytes(std::size_t limit_bytes) { limit_bytes_ = limit_bytes; }
  std::size_t held_bytes() const { return held_bytes_; }
  std::size_t num_segments() const { return segments_.size(); }
  std::size_t malloc_calls() const { return malloc_calls_; }  // refused ones included
  std::size_t free_calls() const { return free_calls_; }
  std::size_t refusals() const { return refusals_; }

 private:
  std::size_t limit_bytes_;
  std::size_t held_bytes_ = 0;
  std::unordered_map<void*, std::size_t> segments_;
  std::size_t malloc_calls_ = 0;
  std::size_t free_calls_ = 0;
  std::size_t refusals_ = 0;
};

}  // namespace sprintnet::test
