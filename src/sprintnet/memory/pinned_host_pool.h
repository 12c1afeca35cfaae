#pragma once
// Small pinned host records mapped into the device's address space: a training plan's progress,
// metrics and step state, which kernels write and the host reads while they run, and which
// asynchronous copies land in. They come from pages pinned once per process and are reused.
//
// Why a pool: where runs share a GPU (a sweep's workers), cudaHostAlloc took 5-10 ms a call beside
// 7 other runs on an H100, and cudaFreeHost waits for the whole device, that is for the other runs'
// epochs in flight; a run allocated and freed one such record each (docs/SWEEP.md).
#include <cstddef>

namespace sprintnet {

class PinnedHostRecord {
 public:
  PinnedHostRecord() = default;
  // `bytes` (at most kMaxBytes) of zeroed pinned host memory, mapped for the device.
  explicit PinnedHostRecord(std::size_t bytes);
  // Back to the pool. Whatever writes into it (a kernel, an asynchronous copy) must have finished:
  // the owner synchronizes its stream first.
  ~PinnedHostRecord();
  PinnedHostRecord(PinnedHostRecord&& other) noexcept;
  PinnedHostRecord& operator=(PinnedHostRecord&& other) noexcept;
  PinnedHostRecord(const PinnedHostRecord&) = delete;
  PinnedHostRecord& operator=(const PinnedHostRecord&) = delete;

  static constexpr std::size_t kMaxBytes = 4096;

  void* host() const { return host_; }
  void* device() const { return device_; }  // the address kernels write through

 private:
  void release() noexcept;
  void* host_ = nullptr;
  void* device_ = nullptr;
};

}  // namespace sprintnet
