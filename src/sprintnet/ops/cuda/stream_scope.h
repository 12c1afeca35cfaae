#pragma once
// Several training runs on one GPU from worker threads of one process (sweep): each worker opens a
// StreamScope, and while it lives the CUDA backend of its device gives that thread its own stream.
// Everything the thread enqueues through the backend (kernels, copies, cuBLASLt products, the
// compiled plans, which take the backend's stream when they are built) is ordered on that stream,
// beside the other workers' streams instead of behind them; the device-side error record and the
// GEMM workspace are the scope's own, and the allocator orders the thread's memory on the stream
// too (set_thread_cuda_allocator_stream). Threads without a scope share the backend's stream.
#include <memory>

#include <cuda_runtime_api.h>

namespace sprintnet::cuda {

class CublasLtGemm;
struct DeviceError;

// A non-blocking stream with what the backend keeps per stream.
struct StreamResources {
  explicit StreamResources(int device);
  ~StreamResources();  // waits for the stream, then releases it
  StreamResources(const StreamResources&) = delete;
  StreamResources& operator=(const StreamResources&) = delete;

  int device;
  cudaStream_t stream = nullptr;
  DeviceError* device_error = nullptr;  // written by kernels that find a bad label or index
  DeviceError* host_error = nullptr;    // pinned: its copy is queued on the stream
  std::unique_ptr<CublasLtGemm> gemm;   // the eager products' handle and workspace
};

// This thread's resources on `device` (its StreamScope's), or nullptr when it has none there.
StreamResources* thread_stream_resources(int device);

class StreamScope {
 public:
  explicit StreamScope(int device);
  ~StreamScope();  // waits for the stream; the thread is back on the backend's stream
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

  cudaStream_t stream() const { return resources_->stream; }

 private:
  std::unique_ptr<StreamResources> resources_;
  StreamResources* previous_;
};

}  // namespace sprintnet::cuda
