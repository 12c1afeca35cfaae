#pragma once
// mma.sync m16n8k16 operands loaded by ldmatrix from row-major bf16 matrices in shared memory (rows
// `ld` elements apart), each lane giving the address of one 16-byte row of an 8 x 8 matrix: A (16 x 16)
// and B (16 x 8) stored as they are used or transposed. The rows kernel and its lab probe read every
// operand this way (the cluster kernel's column-block layout has its own, cluster_epoch.cu). Also the
// bf16 pair store both kernels' epilogues write their results with.
#include <cuda_bf16.h>

#include <cstdint>

#include "sprintnet/ops/cuda/fused/ptx.cuh"

namespace sprintnet::cuda::fused {

__device__ __forceinline__ int fragment_lane() { return static_cast<int>(threadIdx.x) & 31; }
// A(m, k) = p[m * ld + k]
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const __nv_bfloat16* p, int ld) {
  const int l = fragment_lane();
  ptx::ldmatrix_x4(a, ptx::shared_address(p + (l & 15) * ld + (l >> 4) * 8));
}
// A(m, k) = p[k * ld + m]
__device__ __forceinline__ void load_a_trans(std::uint32_t (&a)[4], const __nv_bfloat16* p, int ld) {
  const int l = fragment_lane();
  ptx::ldmatrix_x4_trans(a, ptx::shared_address(p + ((l & 7) + (l >> 4) * 8) * ld + ((l >> 3) & 1) * 8));
}
// B(k, n) = p[n * ld + k]
__device__ __forceinline__ void load_b(std::uint32_t (&b)[2], const __nv_bfloat16* p, int ld) {
  const int l = fragment_lane();
  ptx::ldmatrix_x2(b, ptx::shared_address(p + (l & 7) * ld + ((l >> 3) & 1) * 8));
}
// B(k, n) = p[k * ld + n]
__device__ __forceinline__ void load_b_trans(std::uint32_t (&b)[2], const __nv_bfloat16* p, int ld) {
  const int l = fragment_lane();
  ptx::ldmatrix_x2_trans(b, ptx::shared_address(p + ((l & 7) + ((l >> 3) & 1) * 8) * ld));
}

// Two results rounded to bf16, stored as one 4-byte pair (p 4-byte aligned).
__device__ __forceinline__ void store_pair(__nv_bfloat16* p, float lo, float hi) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(lo, hi);
}

}  // namespace sprintnet::cuda::fused
