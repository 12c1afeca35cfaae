// The two CUDA allocators behind cuda_allocator(index), and the per-device registry that builds them.
//
// caching: CachingAllocator (policy in caching_allocator.h) over cudaMalloc/cudaFree. Its statistics
//   are exact: every device malloc and free goes through it.
// async: cudaMallocFromPoolAsync/cudaFreeAsync on a pool of our own whose release threshold is
//   UINT64_MAX, so freed memory stays in the pool instead of going back to the driver at each
//   synchronisation. What its statistics can and cannot say:
//   - allocated_bytes, peak, num_allocations: counted here, in requested bytes (the pool's rounding
//     is not visible; cudaMemPoolAttrUsedMemCurrent would show the rounded total).
//   - reserved_bytes: the pool's cudaMemPoolAttrReservedMemCurrent, read when stats are asked for.
//   - num_device_mallocs: allocations after which the pool's reserved memory had grown. The driver's
//     own allocations are not visible; one growth may be several of them, and is counted once.
//   - num_cache_hits: allocations that did not grow the pool.
//   - num_device_frees: trims that shrank the pool (empty_cuda_allocator_cache, and around a request
//     CUDA refused: a failed cudaMallocAsync can leave the pool holding what it reserved for it).
//   Reading the attribute costs one driver call per allocation; allocations are serialised by a mutex
//   so each growth is charged to the allocation that caused it.
#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <cuda_runtime_api.h>

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/error.h"
#include "sprintnet/core/out_of_memory_error.h"
#include "sprintnet/memory/cuda_allocator.h"

namespace sprintnet {
namespace {

bool allocation_logging_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("SPRINTNET_LOG_ALLOC");
    return value != nullptr && std::string_view(value) == "1";
  }();
  return enabled;
}

void log_allocation(std::string_view what, std::size_t bytes, int index, std::size_t reserved_bytes) {
  if (!allocation_logging_enabled()) return;
  fmt::print(stderr, "sprintnet: {} {} bytes on cuda:{} (reserved {})\n", what, bytes, index, reserved_bytes);
}

// Makes `index` the current device for its lifetime, then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    SN_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != index) SN_CUDA_CHECK(cudaSetDevice(index));
    switched_ = previous_ != index;
  }
  ~DeviceGuard() {
    if (switched_) SN_CUDA_WARN(cudaSetDevice(previous_));
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

std::string describe_out_of_memory(cudaError_t status) {
  std::size_t free_bytes = 0, total_bytes = 0;
  std::string text = detail::describe_cuda_error(status);
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    text += fmt::format("; {} of {} bytes free on the device", free_bytes, total_bytes);
  } else {
    static_cast<void>(cudaGetLastError());
  }
  return text;
}

cudaStream_t cuda_stream(StreamHandle stream) { return reinterpret_cast<cudaStream_t>(stream); }

// set_thread_cuda_allocator_stream(): this thread's stream for one device (a worker serves one).
thread_local int thread_stream_device = -1;
thread_local StreamHandle thread_stream = 0;

// The stream this thread's allocation on `index` is ordered on.
StreamHandle stream_for_this_thread(int index, const std::atomic<StreamHandle>& device_stream) {
  return thread_stream_device == index ? thread_stream : device_stream.load();
}

// cudaMalloc/cudaFree on one device, for CachingAllocator (which serialises the calls).
class CudaDeviceMemory final : public DeviceMemoryApi {
 public:
  explicit CudaDeviceMemory(int index) : index_(index) {}

  void* malloc(std::size_t bytes) override {
    DeviceGuard guard(index_);
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
      static_cast<void>(cudaGetLastError());  // not sticky: clear it so later launch checks do not report it
      last_failure_ = describe_out_of_memory(status);
      return nullptr;
    }
    if (status != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      SN_FAIL("cudaMalloc of {} bytes on cuda:{} failed: {}", bytes, index_, detail::describe_cuda_error(status));
    }
    segment_bytes_.emplace(ptr, bytes);
    reserved_bytes_ += bytes;
    log_allocation("cudaMalloc", bytes, index_, reserved_bytes_);
    return ptr;
  }

  void free(void* ptr) override {
    DeviceGuard guard(index_);
    SN_CUDA_CHECK(cudaFree(ptr));  // waits for the device, so no queued kernel still uses the memory
    const auto it = segment_bytes_.find(ptr);
    const std::size_t bytes = it != segment_bytes_.end() ? it->second : 0;
    if (it != segment_bytes_.end()) segment_bytes_.erase(it);
    reserved_bytes_ -= bytes;
    log_allocation("cudaFree", bytes, index_, reserved_bytes_);
  }

  std::string describe_last_failure() override { return last_failure_; }

 private:
  int index_;
  std::unordered_map<void*, std::size_t> segment_bytes_;  // for the log line: cudaFree is not told the size
  std::size_t reserved_bytes_ = 0;
  std::string last_failure_;
};

// What the registry needs of either kind beyond the Allocator interface.
class CudaDeviceAllocator : public Allocator {
 public:
  virtual AllocatorStats stats() const = 0;
  virtual std::string_view name() const = 0;
  virtual void set_stream(StreamHandle stream) = 0;
  virtual void empty_cache() = 0;
};

class CudaCachingAllocator final : public CudaDeviceAllocator {
 public:
  CudaCachingAllocator(int index, StreamHandle stream)
      : index_(index), memory_(index), cache_(memory_), stream_(stream) {}

  void* allocate(std::size_t bytes) override { return cache_.allocate(bytes, stream_for_this_thread(index_, stream_)); }
  void deallocate(void* ptr, std::size_t /*bytes*/) noexcept override { cache_.deallocate(ptr); }
  Device device() const override { return Device::cuda(index_); }
  AllocatorStats stats() const override { return cache_.stats(); }
  std::string_view name() const override { return cuda_allocator_kind_name(CudaAllocatorKind::kCaching); }
  void set_stream(StreamHandle stream) override { stream_.store(stream); }
  void empty_cache() override {
    DeviceGuard guard(index_);
    SN_CUDA_CHECK(cudaDeviceSynchronize());
    cache_.empty_cache();
  }

 private:
  int index_;
  CudaDeviceMemory memory_;  // before cache_, which uses it
  CachingAllocator cache_;
  std::atomic<StreamHandle> stream_;
};

class CudaAsyncAllocator final : public CudaDeviceAllocator {
 public:
  CudaAsyncAllocator(int index, StreamHandle stream) : index_(index), stream_(stream) {
    DeviceGuard guard(index_);
    int supported = 0;
    SN_CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, index_));
    SN_CHECK(supported != 0,
             "cuda:{} does not support stream-ordered allocation (cudaMallocAsync): set device.allocator = "
             "\"caching\" or unset ALLOCATOR_TYPE",
             index_);
    // A pool of our own rather than the device's default one: its counters then describe only our memory.
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = index_;
    SN_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
    std::uint64_t keep_all_bytes = std::numeric_limits<std::uint64_t>::max();
    SN_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_all_bytes));
  }

  void* allocate(std::size_t bytes) override {
    if (bytes == 0) return nullptr;
    std::lock_guard lock(mutex_);
    DeviceGuard guard(index_);  // stream 0 means the current device's default stream
    const StreamHandle stream = stream_for_this_thread(index_, stream_);
    void* ptr = nullptr;
    cudaError_t status = cudaMallocFromPoolAsync(&ptr, bytes, pool_, cuda_stream(stream));
    if (status == cudaErrorMemoryAllocation) {
      static_cast<void>(cudaGetLastError());
      trim_locked();
      status = cudaMallocFromPoolAsync(&ptr, bytes, pool_, cuda_stream(stream));
      if (status != cudaSuccess) {
        static_cast<void>(cudaGetLastError());
        // A failed request can leave the pool holding whatever the driver managed to reserve for it
        // (seen on an H100: all of the device's free memory); give that back before reporting.
        try {
          release_unused_locked();
        } catch (const Error&) {
          // The out-of-memory error below is the one to report.
        }
        SN_FAIL_OUT_OF_MEMORY(
            "out of device memory: cannot allocate {} bytes on cuda:{} with cudaMallocAsync; {} bytes are "
            "allocated and the pool reserves {} (trimmed the pool and retried); the device says: {}",
            bytes, index_, stats_.allocated_bytes, reserved_bytes_locked(), describe_out_of_memory(status));
      }
      ++stats_.num_ooms_recovered;
    }
    if (status != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      SN_FAIL("cudaMallocAsync of {} bytes on cuda:{} failed: {}", bytes, index_, detail::describe_cuda_error(status));
    }
    live_.emplace(ptr, Live{bytes, stream});
    stats_.allocated_bytes += bytes;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    ++stats_.num_allocations;
    const std::size_t reserved = reserved_bytes_locked();
    if (reserved > last_reserved_bytes_) {
      ++stats_.num_device_mallocs;
      log_allocation("cudaMallocAsync pool grew by", reserved - last_reserved_bytes_, index_, reserved);
    } else {
      ++stats_.num_cache_hits;
    }
    last_reserved_bytes_ = reserved;
    return ptr;
  }

  void deallocate(void* ptr, std::size_t /*bytes*/) noexcept override {
    if (ptr == nullptr) return;
    std::lock_guard lock(mutex_);
    const auto it = live_.find(ptr);
    if (it == live_.end()) {
      assert(false && "async CUDA allocator: deallocate of a pointer it did not hand out, or freed twice");
      if (stats_.num_invalid_frees++ == 0) {
        std::fprintf(stderr,
                     "sprintnet: warning: ignoring deallocate(%p) on cuda:%d: not allocated here, or freed twice\n",
                     ptr, index_);
      }
      return;
    }
    try {
      DeviceGuard guard(index_);
      // On the stream it was allocated on, so it is reused only after the work queued there.
      SN_CUDA_WARN(cudaFreeAsync(ptr, cuda_stream(it->second.stream)));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sprintnet: warning: cannot free device memory on cuda:%d: %s\n", index_, e.what());
    }
    stats_.allocated_bytes -= it->second.bytes;
    live_.erase(it);
  }

  Device device() const override { return Device::cuda(index_); }

  AllocatorStats stats() const override {
    std::lock_guard lock(mutex_);
    AllocatorStats stats = stats_;
    stats.reserved_bytes = reserved_bytes_locked();
    return stats;
  }

  std::string_view name() const override { return cuda_allocator_kind_name(CudaAllocatorKind::kAsync); }
  void set_stream(StreamHandle stream) override { stream_.store(stream); }

  void empty_cache() override {
    std::lock_guard lock(mutex_);
    DeviceGuard guard(index_);
    trim_locked();
  }

 private:
  struct Live {
    std::size_t bytes;
    StreamHandle stream;
  };

  // Releases the pool's unused memory. Synchronises first: memory freed in stream order returns to the
  // pool only when its stream reaches the free.
  void trim_locked() {
    SN_CUDA_CHECK(cudaDeviceSynchronize());
    release_unused_locked();
  }

  void release_unused_locked() {
    const std::size_t before = reserved_bytes_locked();
    SN_CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0));
    const std::size_t after = reserved_bytes_locked();
    if (after < before) {
      ++stats_.num_device_frees;
      log_allocation("cudaMemPoolTrimTo released", before - after, index_, after);
    }
    last_reserved_bytes_ = after;
  }

  std::size_t reserved_bytes_locked() const {
    std::uint64_t reserved = 0;
    SN_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved));
    return static_cast<std::size_t>(reserved);
  }

  int index_;
  std::atomic<StreamHandle> stream_;
  cudaMemPool_t pool_ = nullptr;  // never destroyed: the allocator lives as long as the process
  mutable std::mutex mutex_;
  std::unordered_map<void*, Live> live_;
  AllocatorStats stats_;
  std::size_t last_reserved_bytes_ = 0;
};

struct DeviceSlot {
  std::unique_ptr<CudaDeviceAllocator> allocator;
  StreamHandle stream = 0;
};

struct Registry {
  std::mutex mutex;
  std::vector<DeviceSlot> slots;  // one per visible device, sized on first use
};

// Never destroyed, on purpose: tensors freed during static destruction still need their allocator,
// and at that point the CUDA runtime may already be unloaded, so cudaFree cannot be called anyway.
Registry& registry() {
  static Registry* instance = new Registry;
  return *instance;
}

// Requires the lock on registry.mutex.
DeviceSlot& slot(Registry& reg, int index) {
  if (reg.slots.empty()) {
    int count = 0;
    SN_CUDA_CHECK(cudaGetDeviceCount(&count));
    reg.slots.resize(static_cast<std::size_t>(count));
  }
  SN_CHECK(index >= 0 && static_cast<std::size_t>(index) < reg.slots.size(),
           "cuda:{} does not exist: {} CUDA device(s) are visible", index, reg.slots.size());
  return reg.slots[static_cast<std::size_t>(index)];
}

}  // namespace

Allocator& cuda_allocator(int index) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  DeviceSlot& device_slot = slot(reg, index);
  if (!device_slot.allocator) {
    if (detail::fix_cuda_allocator_kind() == CudaAllocatorKind::kAsync) {
      device_slot.allocator = std::make_unique<CudaAsyncAllocator>(index, device_slot.stream);
    } else {
      device_slot.allocator = std::make_unique<CudaCachingAllocator>(index, device_slot.stream);
    }
  }
  return *device_slot.allocator;
}

AllocatorStats cuda_allocator_stats(int index) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  const DeviceSlot& device_slot = slot(reg, index);
  return device_slot.allocator ? device_slot.allocator->stats() : AllocatorStats{};
}

std::string_view cuda_allocator_name(int index) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  const DeviceSlot& device_slot = slot(reg, index);
  return device_slot.allocator ? device_slot.allocator->name() : cuda_allocator_kind_name(cuda_allocator_kind());
}

void set_cuda_allocator_stream(int index, void* cuda_stream) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  DeviceSlot& device_slot = slot(reg, index);
  device_slot.stream = reinterpret_cast<StreamHandle>(cuda_stream);
  if (device_slot.allocator) device_slot.allocator->set_stream(device_slot.stream);
}

void set_thread_cuda_allocator_stream(int index, void* cuda_stream) {
  thread_stream_device = cuda_stream != nullptr ? index : -1;
  thread_stream = reinterpret_cast<StreamHandle>(cuda_stream);
}

void empty_cuda_allocator_cache(int index) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  DeviceSlot& device_slot = slot(reg, index);
  if (device_slot.allocator) device_slot.allocator->empty_cache();
}

}  // namespace sprintnet
