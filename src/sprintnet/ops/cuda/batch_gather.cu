// The batch of the current step, gathered from the uint8 data set on the device
// and normalised into the compute type (batch_rows.cuh: which rows, how they are
// normalised), with its labels; also the eager ops' gathers by index. Large batches
// of rows of whole 16-byte pieces (MNIST's 784) take the vector kernel; the others
// one block row per sample (blockIdx.y, striding past 65535 rows), a thread per feature.
#include <cstdint>
#include <type_traits>

#include "sprintnet/ops/cuda/batch_rows.cuh"
#include "sprintnet/ops/cuda/element_access.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

// Row `row`'s sample: checked for the eager gathers (their indices come from the caller).
__device__ inline std::int64_t gathered_sample(const GatherArgs& a, std::int64_t first, std::int64_t row) {
  return a.error != nullptr ? checked_batch_sample(a, first, row) : batch_sample(a, first, row);
}

// Rows (dst is set: labels alone take gather_labels_kernel).
__global__ void gather_batch_kernel(GatherArgs a) {
  const std::int64_t first = batch_first_row(a);
  for (std::int64_t row = blockIdx.y; row < a.rows; row += gridDim.y) {
    const std::uint8_t* src = a.images + gathered_sample(a, first, row) * a.features;
    const std::int64_t out = row * a.features;
    for (std::int64_t f = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; f < a.features;
         f += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
      store_element(a.dst, a.dst_type, out + f, normalized_pixel(a, src[f]));
    }
    if (a.dst_labels != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
      a.dst_labels[row] = a.labels[gathered_sample(a, first, row)];
    }
  }
}

// Labels alone (the eager gather_labels): a thread a label.
__global__ void gather_labels_kernel(GatherArgs a) {
  const std::int64_t first = batch_first_row(a);
  for (std::int64_t row = global_thread(); row < a.rows; row += grid_threads()) {
    a.dst_labels[row] = a.labels[gathered_sample(a, first, row)];
  }
}

// Rows of whole 16-byte pieces (features % 16 == 0, aligned): a warp a row, 16 features a lane a
// load, stored as 16 values of T. The kernel above reads one byte a thread and works out the row's
// place in the epoch (a 64-bit modulo, the permutation's entry) for every element: 23 us for 4096
// rows of 784 on the H100, against ~3 us of memory traffic. The same values, rounded the same way.
constexpr int kVectorGatherWarps = 8;

template <typename T>
__device__ inline void store16(T* p, const float (&v)[16]) {
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      reinterpret_cast<float4*>(p)[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      uint4 q;
      T* e = reinterpret_cast<T*>(&q);
#pragma unroll
      for (int j = 0; j < 8; ++j) e[j] = from_float<T>(v[8 * i + j]);
      reinterpret_cast<uint4*>(p)[i] = q;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kVectorGatherWarps * kWarpSize) gather_batch_vec_kernel(GatherArgs a) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kVectorGatherWarps + threadIdx.x / kWarpSize;
  if (row >= a.rows) return;
  const std::int64_t sample = gathered_sample(a, batch_first_row(a), row);
  const uint4* src = reinterpret_cast<const uint4*>(a.images + sample * a.features);
  T* dst = static_cast<T*>(a.dst) + row * a.features;
  for (std::int64_t v = lane; v < a.features / 16; v += kWarpSize) {
    const uint4 q = __ldg(src + v);
    const std::uint8_t* bytes = reinterpret_cast<const std::uint8_t*>(&q);
    float x[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) x[j] = normalized_pixel(a, bytes[j]);
    store16(dst + v * 16, x);
  }
  if (lane == 0 && a.dst_labels != nullptr) a.dst_labels[row] = a.labels[sample];
}

}  // namespace

cudaError_t launch_gather_batch(const GatherArgs& args, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  const NvtxRange range("gather_batch");
  const auto aligned16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  // From 1024 rows (128 blocks): at batch 128 its 16 blocks took 5.0-6.0 us against the element
  // kernel's 4.5-4.7 (H100), at 4096 rows 7.3 against 23.
  if (args.dst != nullptr && args.rows >= 1024 && args.features % 16 == 0 && aligned16(args.images) &&
      aligned16(args.dst)) {
    const auto blocks = static_cast<unsigned>((args.rows + kVectorGatherWarps - 1) / kVectorGatherWarps);
    constexpr int threads = kVectorGatherWarps * kWarpSize;
    switch (args.dst_type) {
      case ElementType::kBF16: gather_batch_vec_kernel<__nv_bfloat16><<<blocks, threads, 0, stream>>>(args); break;
      case ElementType::kF16: gather_batch_vec_kernel<__half><<<blocks, threads, 0, stream>>>(args); break;
      case ElementType::kF32: gather_batch_vec_kernel<float><<<blocks, threads, 0, stream>>>(args); break;
    }
    return cudaGetLastError();
  }
  if (args.dst == nullptr) {
    gather_labels_kernel<<<elementwise_blocks(args.rows), kElementwiseThreads, 0, stream>>>(args);
    return cudaGetLastError();
  }
  const std::int64_t per_row = args.features > 0 ? (args.features + kElementwiseThreads - 1) / kElementwiseThreads : 1;
  constexpr std::int64_t kMaxGridY = 65535;
  const dim3 grid(static_cast<unsigned>(per_row < 8 ? per_row : 8),
                  static_cast<unsigned>(args.rows < kMaxGridY ? args.rows : kMaxGridY));
  gather_batch_kernel<<<grid, kElementwiseThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
