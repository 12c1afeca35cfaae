#include "sprintnet/memory/pinned_host_pool.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/error.h"
#include "sprintnet/core/graph_capture_lock.h"

namespace sprintnet {
namespace {

constexpr std::size_t kSlotsPerChunk = 16;  // one cudaHostAlloc of 64 KiB serves 16 records

// A slot: kMaxBytes of a chunk, by its host address and the address kernels use (the same under
// unified addressing, which every 64-bit platform CUDA supports has; taken from the driver all the same).
struct Slot {
  void* host;
  void* device;
};

// Free slots. Chunks are never freed (the process keeps them; cudaFreeHost at exit would only wait for
// the device).
struct Pool {
  std::mutex mutex;
  std::vector<Slot> free;
};

Pool& pool() {
  static auto* p = new Pool;  // never destroyed, like its chunks
  return *p;
}

Slot take_slot() {
  Pool& p = pool();
  {
    const std::lock_guard lock(p.mutex);
    if (!p.free.empty()) {
      const Slot slot = p.free.back();
      p.free.pop_back();
      return slot;
    }
  }
  // A new chunk, outside the pool's lock. Portable: every device's context may use it (a sweep over
  // several GPUs); mapped: kernels write into it.
  void* chunk = nullptr;
  {
    const std::unique_lock no_capture(graph_capture_mutex());  // graph_capture_lock.h
    SN_CUDA_CHECK(cudaHostAlloc(&chunk, kSlotsPerChunk * PinnedHostRecord::kMaxBytes,
                                cudaHostAllocMapped | cudaHostAllocPortable));
  }
  void* mapped = nullptr;
  SN_CUDA_CHECK(cudaHostGetDevicePointer(&mapped, chunk, 0));
  auto* host = static_cast<unsigned char*>(chunk);
  auto* device = static_cast<unsigned char*>(mapped);
  const std::lock_guard lock(p.mutex);
  for (std::size_t i = 1; i < kSlotsPerChunk; ++i) {
    p.free.push_back({host + i * PinnedHostRecord::kMaxBytes, device + i * PinnedHostRecord::kMaxBytes});
  }
  return {chunk, mapped};
}

}  // namespace

PinnedHostRecord::PinnedHostRecord(std::size_t bytes) {
  SN_CHECK(bytes <= kMaxBytes, "a pinned host record of {} bytes: at most {}", bytes, kMaxBytes);
  const Slot slot = take_slot();
  host_ = slot.host;
  device_ = slot.device;
  std::memset(host_, 0, kMaxBytes);
}

PinnedHostRecord::~PinnedHostRecord() { release(); }

PinnedHostRecord::PinnedHostRecord(PinnedHostRecord&& other) noexcept
    : host_(std::exchange(other.host_, nullptr)), device_(std::exchange(other.device_, nullptr)) {}

PinnedHostRecord& PinnedHostRecord::operator=(PinnedHostRecord&& other) noexcept {
  if (this != &other) {
    release();
    host_ = std::exchange(other.host_, nullptr);
    device_ = std::exchange(other.device_, nullptr);
  }
  return *this;
}

void PinnedHostRecord::release() noexcept {
  if (host_ == nullptr) return;
  Pool& p = pool();
  try {
    const std::lock_guard lock(p.mutex);
    p.free.push_back({host_, device_});
  } catch (...) {  // a lock or allocation failure leaks the slot, nothing worse
  }
  host_ = nullptr;
  device_ = nullptr;
}

}  // namespace sprintnet
