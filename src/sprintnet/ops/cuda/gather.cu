// Batch assembly from a dataset resident on the device: gather image rows
// (uint8, converted to float with scale and shift) and their labels by index.
// An index out of range is clamped for the read and recorded (device_error.h).
#include <cstdint>

#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

// Each thread converts 4 consecutive bytes of a row: one 4-byte load, one 16-byte store.
// Needs cols % 4 == 0, src 4-byte and dst 16-byte aligned (checked by the launcher).
__global__ void gather_rows_u8_vec4_kernel(const std::uint8_t* src, std::int64_t src_rows, std::int64_t cols,
                                           const std::int32_t* indices, std::int64_t count, float* dst, float scale,
                                           float shift, DeviceError* error) {
  const std::int64_t groups_per_row = cols / 4, total = count * groups_per_row;
  for (std::int64_t i = global_thread(); i < total; i += grid_threads()) {
    const std::int64_t row = i / groups_per_row, group = i % groups_per_row;
    const std::int64_t src_row = checked_index(indices[row], src_rows, row, DeviceErrorCode::kGatherRowsIndex, error);
    const uchar4 b = reinterpret_cast<const uchar4*>(src + src_row * cols)[group];
    reinterpret_cast<float4*>(dst + row * cols)[group] =
        make_float4(static_cast<float>(b.x) * scale + shift, static_cast<float>(b.y) * scale + shift,
                    static_cast<float>(b.z) * scale + shift, static_cast<float>(b.w) * scale + shift);
  }
}

__global__ void gather_rows_u8_kernel(const std::uint8_t* src, std::int64_t src_rows, std::int64_t cols,
                                      const std::int32_t* indices, std::int64_t count, float* dst, float scale,
                                      float shift, DeviceError* error) {
  const std::int64_t total = count * cols;
  for (std::int64_t i = global_thread(); i < total; i += grid_threads()) {
    const std::int64_t row = i / cols, col = i % cols;
    const std::int64_t src_row = checked_index(indices[row], src_rows, row, DeviceErrorCode::kGatherRowsIndex, error);
    dst[i] = static_cast<float>(src[src_row * cols + col]) * scale + shift;
  }
}

__global__ void gather_labels_kernel(const std::int32_t* labels, std::int64_t label_count,
                                     const std::int32_t* indices, std::int64_t count, std::int32_t* dst,
                                     DeviceError* error) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) {
    dst[i] = labels[checked_index(indices[i], label_count, i, DeviceErrorCode::kGatherLabelsIndex, error)];
  }
}

bool aligned_to(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

}  // namespace

cudaError_t launch_gather_rows_u8(const std::uint8_t* src, std::int64_t src_rows, std::int64_t cols,
                                  const std::int32_t* indices, std::int64_t count, float* dst, float scale, float shift,
                                  DeviceError* error, cudaStream_t stream) {
  if (count == 0 || cols == 0) return cudaSuccess;
  const NvtxRange range("gather_rows_u8");
  if (cols % 4 == 0 && aligned_to(src, 4) && aligned_to(dst, 16)) {
    gather_rows_u8_vec4_kernel<<<elementwise_blocks(count * cols / 4), kElementwiseThreads, 0, stream>>>(
        src, src_rows, cols, indices, count, dst, scale, shift, error);
  } else {
    gather_rows_u8_kernel<<<elementwise_blocks(count * cols), kElementwiseThreads, 0, stream>>>(
        src, src_rows, cols, indices, count, dst, scale, shift, error);
  }
  return cudaGetLastError();
}

cudaError_t launch_gather_labels(const std::int32_t* labels, std::int64_t label_count, const std::int32_t* indices,
                                 std::int64_t count, std::int32_t* dst, DeviceError* error, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("gather_labels");
  gather_labels_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(labels, label_count, indices,
                                                                                      count, dst, error);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
