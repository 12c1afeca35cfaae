// The epoch's sample order on the device: the same (key, index) sort as
// core/random.cpp's epoch_permutation(), so a GPU run visits the batches a CPU
// run visits. Keys are 64-bit (Philox key above the index bits), sorted with CUB's
// radix sort in caller-provided scratch (nothing is allocated: capturable).
#include <cub/device/device_radix_sort.cuh>

#include "sprintnet/core/philox.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"
#include "sprintnet/ops/cuda/step_launch.h"

namespace sprintnet::cuda {
namespace {

// Scratch layout: keys [n], sorted keys [n], then CUB's temporary storage.
std::size_t keys_bytes(std::int64_t n) { return (static_cast<std::size_t>(n) * 8 + 255) / 256 * 256; }

std::size_t cub_bytes(std::int64_t n) {
  std::size_t bytes = 0;
  cub::DeviceRadixSort::SortKeys(nullptr, bytes, static_cast<const std::uint64_t*>(nullptr),
                                 static_cast<std::uint64_t*>(nullptr), static_cast<int>(n));
  return bytes;
}

// Bits of the largest index: the key goes just above them, so the sort covers 32 + index_bits bits
// (48 for MNIST rather than 64: two radix passes fewer) and orders by (key, index) as the CPU does.
int index_bits(std::int64_t n) {
  int bits = 1;
  while (bits < 32 && (std::int64_t{1} << bits) < n) ++bits;
  return bits;
}

__global__ void keys_kernel(std::uint64_t seed, std::uint64_t epoch, std::int64_t n, int shift, std::uint64_t* keys) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    const auto index = static_cast<std::uint64_t>(i);
    keys[i] = (static_cast<std::uint64_t>(permutation_key(seed, epoch, index)) << shift) | index;
  }
}

__global__ void order_kernel(const std::uint64_t* sorted, std::int64_t n, int shift, std::int32_t* order) {
  const std::uint64_t mask = (std::uint64_t{1} << shift) - 1;
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    order[i] = static_cast<std::int32_t>(sorted[i] & mask);
  }
}

}  // namespace

std::size_t epoch_permutation_scratch_bytes(std::int64_t n) { return 2 * keys_bytes(n) + cub_bytes(n); }

cudaError_t launch_epoch_permutation(std::uint64_t seed, std::uint64_t epoch, std::int64_t n, void* scratch,
                                     std::size_t scratch_bytes, std::int32_t* order, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (scratch_bytes < epoch_permutation_scratch_bytes(n)) return cudaErrorInvalidValue;
  const NvtxRange range("epoch_permutation");
  auto* keys = static_cast<std::uint64_t*>(scratch);
  auto* sorted = reinterpret_cast<std::uint64_t*>(static_cast<char*>(scratch) + keys_bytes(n));
  void* temp = static_cast<char*>(scratch) + 2 * keys_bytes(n);
  std::size_t temp_bytes = cub_bytes(n);
  const int shift = index_bits(n);
  keys_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(seed, epoch, n, shift, keys);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (const cudaError_t e = cub::DeviceRadixSort::SortKeys(temp, temp_bytes, keys, sorted, static_cast<int>(n), 0,
                                                           32 + shift, stream);
      e != cudaSuccess) {
    return e;
  }
  order_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(sorted, n, shift, order);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
