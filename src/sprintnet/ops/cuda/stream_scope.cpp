#include "sprintnet/ops/cuda/stream_scope.h"

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/graph_capture_lock.h"
#include "sprintnet/memory/cuda_allocator.h"
#include "sprintnet/ops/cuda/device_error.h"
#include "sprintnet/ops/cuda/device_guard.h"
#include "sprintnet/ops/cuda/gemm.h"

namespace sprintnet::cuda {
namespace {

thread_local StreamResources* thread_resources = nullptr;  // at most one device per worker thread

}  // namespace

StreamResources::StreamResources(int index) : device(index) {
  const DeviceGuard guard(device);
  {
    const std::unique_lock no_capture(graph_capture_mutex());  // graph_capture_lock.h
    SN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    void* error = nullptr;
    SN_CUDA_CHECK(cudaMalloc(&error, sizeof(DeviceError)));
    device_error = static_cast<DeviceError*>(error);
    SN_CUDA_CHECK(cudaMemsetAsync(device_error, 0, sizeof(DeviceError), stream));
    SN_CUDA_CHECK(cudaMallocHost(&error, sizeof(DeviceError)));
    host_error = static_cast<DeviceError*>(error);
    *host_error = DeviceError{};
  }
  gemm = std::make_unique<CublasLtGemm>();  // takes the lock itself
}

StreamResources::~StreamResources() {
  const DeviceGuard guard(device);
  SN_CUDA_WARN(cudaStreamSynchronize(stream));
  gemm.reset();
  const std::unique_lock no_capture(graph_capture_mutex());
  SN_CUDA_WARN(cudaFreeHost(host_error));
  SN_CUDA_WARN(cudaFree(device_error));
  SN_CUDA_WARN(cudaStreamDestroy(stream));
}

StreamResources* thread_stream_resources(int device) {
  return thread_resources != nullptr && thread_resources->device == device ? thread_resources : nullptr;
}

StreamScope::StreamScope(int device)
    : resources_(std::make_unique<StreamResources>(device)), previous_(thread_resources) {
  SN_CUDA_CHECK(cudaSetDevice(device));  // the worker's kernels and plans run on its device
  thread_resources = resources_.get();
  set_thread_cuda_allocator_stream(device, resources_->stream);
}

StreamScope::~StreamScope() {
  if (previous_ != nullptr) {
    set_thread_cuda_allocator_stream(previous_->device, previous_->stream);
  } else {
    set_thread_cuda_allocator_stream(resources_->device, nullptr);
  }
  thread_resources = previous_;
  resources_.reset();  // waits for the stream
}

}  // namespace sprintnet::cuda
