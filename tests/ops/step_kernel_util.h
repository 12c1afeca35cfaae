#pragma once
// What the tests of the compiled step's kernels (ops/cuda/step_launch.h) share: the stream the backend
// launches on, the kernels' ElementType of a DType, and one struct (StepState, StepMetrics) in device
// memory, read back once the stream has drained.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "gpu_compare.h"
#include "sprintnet/core/cuda_check.h"
#include "sprintnet/ops/cuda/cuda_backend.h"
#include "sprintnet/ops/cuda/step_launch.h"

namespace sprintnet::test {

inline cudaStream_t gpu_stream() { return static_cast<cuda::CudaBackend&>(backend_for(gpu())).stream(); }

inline cuda::ElementType element_type(DType type) {
  return type == DType::kBF16 ? cuda::ElementType::kBF16
         : type == DType::kF16 ? cuda::ElementType::kF16
                               : cuda::ElementType::kF32;
}

template <typename T>
struct DeviceValue {
  Tensor bytes;
  explicit DeviceValue(const T& value = T{}) {
    bytes = Tensor::empty({static_cast<std::int64_t>(sizeof(T))}, DType::kU8, gpu());
    // On the kernels' stream (non-blocking: a copy on the legacy stream would not be ordered before them).
    SN_CUDA_CHECK(cudaMemcpyAsync(bytes.raw_data(), &value, sizeof(T), cudaMemcpyHostToDevice, gpu_stream()));
    SN_CUDA_CHECK(cudaStreamSynchronize(gpu_stream()));
  }
  T* get() const { return static_cast<T*>(bytes.raw_data()); }
  T read() const {
    backend_for(gpu()).synchronize();
    T value{};
    SN_CUDA_CHECK(cudaMemcpy(&value, bytes.raw_data(), sizeof(T), cudaMemcpyDeviceToHost));
    return value;
  }
};

}  // namespace sprintnet::test
