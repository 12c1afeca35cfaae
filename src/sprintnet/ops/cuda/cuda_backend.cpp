// The CUDA backend's lifetime, memory ops and synchronisation; the compute ops
// are in backend_ops.cpp.
#include "sprintnet/ops/cuda/cuda_backend.h"

#include <bit>
#include <mutex>
#include <vector>

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/half.h"
#include "sprintnet/memory/cuda_allocator.h"
#include "sprintnet/ops/cuda/cublaslt_library.h"
#include "sprintnet/ops/cuda/device_error.h"
#include "sprintnet/ops/cuda/device_guard.h"
#include "sprintnet/ops/cuda/gemm.h"
#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/stream_scope.h"

namespace sprintnet::cuda {
namespace {

// cudaGetDeviceCount, with the error (if any) cleared so that it does not
// surface later as a "last error" of an unrelated call.
cudaError_t query_device_count(int& count) {
  count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  static_cast<void>(cudaGetLastError());
  if (status != cudaSuccess) count = 0;
  return status;
}

std::string device_error_message(const DeviceError& e, int device) {
  std::string what;
  switch (static_cast<DeviceErrorCode>(e.code)) {
    case DeviceErrorCode::kCrossEntropyLabel:
      what = fmt::format("cross_entropy: label {} at row {} outside [0, {})", e.value, e.position, e.bound);
      break;
    case DeviceErrorCode::kMseLabel:
      what = fmt::format("mse: label {} at row {} outside [0, {})", e.value, e.position, e.bound);
      break;
    case DeviceErrorCode::kGatherRowsIndex:
      what = fmt::format("gather_rows_u8: index {} at position {} outside [0, {})", e.value, e.position, e.bound);
      break;
    case DeviceErrorCode::kGatherLabelsIndex:
      what = fmt::format("gather_labels: index {} at position {} outside [0, {})", e.value, e.position, e.bound);
      break;
    default: what = fmt::format("unknown device error code {}", e.code); break;
  }
  return fmt::format("{} (found by a kernel on cuda:{}; reported at the next synchronisation)", what, device);
}

// The bit pattern of `value` stored as `dtype`, for the dtype-agnostic fill kernel.
std::uint64_t fill_pattern(DType dtype, double value) {
  switch (dtype) {
    case DType::kF32: return std::bit_cast<std::uint32_t>(static_cast<float>(value));
    case DType::kF64: return std::bit_cast<std::uint64_t>(value);
    case DType::kBF16: return float_to_bf16_bits(static_cast<float>(value));
    case DType::kF16: return float_to_fp16_bits(static_cast<float>(value));
    case DType::kI32: return static_cast<std::uint32_t>(static_cast<std::int32_t>(value));
    case DType::kU8: return static_cast<std::uint8_t>(value);
  }
  SN_FAIL("fill: unknown dtype");
}

}  // namespace

int device_count() {
  static const int count = [] {
    int n = 0;
    query_device_count(n);
    return n;
  }();
  return count;
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t status = query_device_count(n);
  if (status != cudaSuccess) {
    return fmt::format("cudaGetDeviceCount failed: {} ({})", cudaGetErrorName(status), cudaGetErrorString(status));
  }
  if (n == 0) return "the CUDA runtime sees no device (check CUDA_VISIBLE_DEVICES)";
  return "";
}

Backend& backend(int index) {
  const int count = device_count();
  SN_CHECK(index >= 0 && index < count, "cuda:{} requested, but {}", index,
           count == 0 ? unavailable_reason() : fmt::format("only {} CUDA device(s) are visible", count));
  // Backends are created on first use and deliberately never destroyed: their
  // destructors would run during static destruction, racing the CUDA runtime's
  // own teardown (the same choice PyTorch makes for its CUDA state).
  // One flag per device, so threads starting different GPUs (a sweep's workers) create their
  // contexts at the same time instead of one after another (~0.2 s each).
  static auto* created = new std::vector<std::once_flag>(static_cast<std::size_t>(count));
  static auto* backends = new std::vector<CudaBackend*>(static_cast<std::size_t>(count), nullptr);
  const auto slot = static_cast<std::size_t>(index);
  std::call_once((*created)[slot], [&] { (*backends)[slot] = new CudaBackend(index); });
  return *(*backends)[slot];
}

// cuBLASLt loads on a helper thread while StreamResources creates the CUDA context (~0.2 s), before
// its handle is made there.
CudaBackend::CudaBackend(int index)
    : index_(index), shared_((start_loading_cublaslt(), std::make_unique<StreamResources>(index))) {
  set_cuda_allocator_stream(index_, shared_->stream);
}

CudaBackend::~CudaBackend() = default;

Allocator& CudaBackend::allocator() { return cuda_allocator(index_); }

StreamResources& CudaBackend::resources() const {
  StreamResources* own = thread_stream_resources(index_);
  return own != nullptr ? *own : *shared_;
}

cudaStream_t CudaBackend::stream() const { return resources().stream; }

void CudaBackend::wait_and_check_device_errors() {
  StreamResources& r = resources();
  SN_CUDA_CHECK(cudaMemcpyAsync(r.host_error, r.device_error, sizeof(DeviceError), cudaMemcpyDeviceToHost, r.stream));
  SN_CUDA_CHECK(cudaStreamSynchronize(r.stream));
  if (r.host_error->code == static_cast<std::int32_t>(DeviceErrorCode::kNone)) return;
  const DeviceError error = *r.host_error;
  *r.host_error = DeviceError{};
  // Cleared once reported, so that the next synchronisation does not report it again.
  SN_CUDA_CHECK(cudaMemsetAsync(r.device_error, 0, sizeof(DeviceError), r.stream));
  SN_FAIL("{}", device_error_message(error, index_));
}

void CudaBackend::synchronize() {
  const DeviceGuard guard(index_);
  wait_and_check_device_errors();
}

void CudaBackend::copy(const Tensor& dst, const Tensor& src) {
  SN_CHECK(dst.nbytes() == src.nbytes(), "CUDA copy: {} bytes into {} bytes", src.nbytes(), dst.nbytes());
  const Device to = dst.device(), from = src.device();
  SN_CHECK(to == device() || from == device(), "CUDA copy on {} from {} to {}: neither side is this device",
           device().str(), from.str(), to.str());
  if (dst.nbytes() == 0 || dst.raw_data() == src.raw_data()) return;
  const DeviceGuard guard(index_);
  void* out = dst.raw_data();
  const void* in = src.raw_data();
  const std::size_t bytes = dst.nbytes();

  if (from.is_cpu()) {
    // The host buffer may be freed as soon as we return (Tensor::to, from_vector): wait for the copy.
    SN_CUDA_CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyHostToDevice, stream()));
    SN_CUDA_CHECK(cudaStreamSynchronize(stream()));
    return;
  }
  if (to.is_cpu()) {
    // The caller reads the result next: wait, and report any error a kernel recorded on the way.
    SN_CUDA_CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToHost, stream()));
    wait_and_check_device_errors();
    return;
  }
  if (to.index != from.index) {
    // Across devices the other device's stream may still be writing src or reading dst: finish its work,
    // copy (cudaMemcpyDefault: the runtime routes it peer-to-peer or through the host), and wait.
    cuda::backend(to.index == index_ ? from.index : to.index).synchronize();
    SN_CUDA_CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDefault, stream()));
    SN_CUDA_CHECK(cudaStreamSynchronize(stream()));
    return;
  }
  SN_CUDA_CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, stream()));  // stream-ordered, no wait
}

void CudaBackend::fill(const Tensor& t, double value) {
  SN_CHECK(t.device() == device(), "CUDA fill on {} of a tensor on {}", device().str(), t.device().str());
  const DeviceGuard guard(index_);
  SN_CUDA_CHECK(launch_fill(t.raw_data(), t.numel(), static_cast<int>(dtype_size(t.dtype())),
                            fill_pattern(t.dtype(), value), stream()));
}

}  // namespace sprintnet::cuda
