// Which backend serves a device. The CUDA half is compiled only with nvcc
// (SPRINTNET_CUDA); a CPU-only build answers that CUDA is unavailable.
#include "sprintnet/ops/backend.h"

#include "sprintnet/ops/cpu/cpu_backend.h"

#if SPRINTNET_CUDA
#include "sprintnet/ops/cuda/cuda_backend.h"
#include "sprintnet/ops/cuda/stream_scope.h"
#endif

namespace sprintnet {

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

#if SPRINTNET_CUDA
int cuda_device_count() { return cuda::device_count(); }
std::string cuda_unavailable_reason() { return cuda::unavailable_reason(); }
Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu_backend();
  return cuda::backend(device.index);
}
std::unique_ptr<ThreadStream> open_thread_stream(int index) {
  struct Scoped final : ThreadStream {
    explicit Scoped(int i) : scope(i) {}
    cuda::StreamScope scope;
  };
  static_cast<void>(cuda::backend(index));  // the device's backend (and its shared stream) first
  return std::make_unique<Scoped>(index);
}
#else
int cuda_device_count() { return 0; }
std::string cuda_unavailable_reason() { return "this build of sprintnet has no CUDA backend (nvcc was not found at configure time)"; }
Backend& backend_for(Device device) {
  SN_CHECK(device.is_cpu(), "{} requested: {}", device.str(), cuda_unavailable_reason());
  return cpu_backend();
}
std::unique_ptr<ThreadStream> open_thread_stream(int index) {
  SN_FAIL("cuda:{} requested: {}", index, cuda_unavailable_reason());
}
#endif

}  // namespace sprintnet
