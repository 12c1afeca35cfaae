#pragma once
// Hopper's warpgroup products (wgmma, sm_90a) on operands in shared memory, in the canonical
// no-swizzle layout: 8 x 8 "core matrices" of 16-bit elements, each 8 rows of 16 contiguous bytes
// (128 bytes). A [rows][width] matrix is kept as [row / 8][col / 8][row % 8][col % 8] (core_at): the
// next 8 columns 128 bytes on, the next 8 rows width x 16 bytes on. Read with the contiguous 8 as the
// product's k (K-major) or as its m / n (MN-major: the descriptor's transpose bit), the distance to the
// next core matrix along k is the descriptor's LBO and along m / n its SBO (bench/lab/wgmma_probe.cu
// checks both readings on the GPU). ldmatrix reads the same layout (each lane names one 16-byte row), so
// code built without sm_90a multiplies it with mma.sync (the *_core loaders below).
//
// A warpgroup (4 warps) computes a 64 x N block; its accumulators sit where mma.sync m16n8k16's would
// for warp w % 4 of the group: value 4 j + e of a thread is row 16 (w % 4) + g + 8 (e / 2), column
// 8 j + 2 t + e % 2 (g = lane / 4, t = lane % 4).
#include <cuda_bf16.h>

#include <cstdint>

#include "sprintnet/ops/cuda/fused/ptx.cuh"

namespace sprintnet::cuda::fused {

// Element (row, col) of a [rows][width] matrix in the canonical layout (width a multiple of 8).
__host__ __device__ constexpr int core_at(int row, int col, int width) {
  return (row >> 3) * (width * 8) + (col >> 3) * 64 + (row & 7) * 8 + (col & 7);
}

// The matrix descriptor of an operand starting at `p`: `along_k` and `along_mn` are the byte distances
// to the next core matrix along the product's k and along its m or n.
__device__ __forceinline__ std::uint64_t core_descriptor(const void* p, std::uint32_t along_k, std::uint32_t along_mn) {
  const std::uint64_t address = ptx::shared_address(p);
  return ((address & 0x3FFFF) >> 4) | (static_cast<std::uint64_t>(along_k >> 4) << 16) |
         (static_cast<std::uint64_t>(along_mn >> 4) << 32);
}
// A [rows][width] matrix at `p` read K-major (its columns are k: the operand starts at column k0) or
// MN-major (its rows are k).
__device__ __forceinline__ std::uint64_t k_major(const __nv_bfloat16* p, int width) {
  return core_descriptor(p, 128, static_cast<std::uint32_t>(width) * 16);
}
__device__ __forceinline__ std::uint64_t mn_major(const __nv_bfloat16* p, int width) {
  return core_descriptor(p, static_cast<std::uint32_t>(width) * 16, 128);
}

// The descriptor of the operand `bytes` further on (a multiple of 16) than `descriptor`'s: one add to its
// address field instead of a new descriptor's masks and shifts (the address stays inside shared memory, so
// the 14-bit field does not carry into the next).
__device__ __forceinline__ std::uint64_t advanced(std::uint64_t descriptor, std::uint32_t bytes) {
  return descriptor + (bytes >> 4);
}

// The products below exist in device code built for sm_90a (SPRINTNET_HAS_WGMMA set there); elsewhere
// they trap, and callers take the mma.sync path.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SPRINTNET_HAS_WGMMA 1
#define SPRINTNET_WGMMA(...) asm volatile(__VA_ARGS__)
#else
#define SPRINTNET_WGMMA(...) __trap()
#endif
// Before a warpgroup's first product that reads or writes registers written since (the accumulators).
__device__ __forceinline__ void wgmma_fence() { SPRINTNET_WGMMA("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { SPRINTNET_WGMMA("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits for every product this warpgroup committed; their accumulators are then the thread's to read.
__device__ __forceinline__ void wgmma_wait_all() { SPRINTNET_WGMMA("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

// d = A · B (+ d when `accumulate`), m64 n64 k16, bf16 in and fp32 out; kTransA / kTransB: MN-major.
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], std::uint64_t a, std::uint64_t b, bool accumulate) {
  SPRINTNET_WGMMA(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31},"
      " %32, %33, p, 1, 1, %35, %36;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(accumulate ? 1 : 0), "n"(kTransA), "n"(kTransB));
}
#undef SPRINTNET_WGMMA

// mma.sync operands from the canonical layout (what builds without sm_90a multiply with), each lane
// naming one 16-byte row: A(m, k) = p[core_at(m0 + m, k0 + k)] (K-major), A(m, k) = p[core_at(k0 + k,
// m0 + m)] (MN-major), B(k, n) = p[core_at(n0 + n, k0 + k)] and B(k, n) = p[core_at(k0 + k, n0 + n)].
__device__ __forceinline__ void load_a_core(std::uint32_t (&a)[4], const __nv_bfloat16* p, int width, int m0, int k0) {
  const int l = static_cast<int>(threadIdx.x) & 31;
  ptx::ldmatrix_x4(a, ptx::shared_address(p + core_at(m0 + (l & 15), k0 + (l >> 4) * 8, width)));
}
__device__ __forceinline__ void load_a_core_trans(std::uint32_t (&a)[4], const __nv_bfloat16* p, int width, int m0, int k0) {
  const int l = static_cast<int>(threadIdx.x) & 31;
  ptx::ldmatrix_x4_trans(a, ptx::shared_address(p + core_at(k0 + (l & 7) + (l >> 4) * 8, m0 + ((l >> 3) & 1) * 8, width)));
}
__device__ __forceinline__ void load_b_core(std::uint32_t (&b)[2], const __nv_bfloat16* p, int width, int n0, int k0) {
  const int l = static_cast<int>(threadIdx.x) & 31;
  ptx::ldmatrix_x2(b, ptx::shared_address(p + core_at(n0 + (l & 7), k0 + ((l >> 3) & 1) * 8, width)));
}
__device__ __forceinline__ void load_b_core_trans(std::uint32_t (&b)[2], const __nv_bfloat16* p, int width, int n0, int k0) {
  const int l = static_cast<int>(threadIdx.x) & 31;
  ptx::ldmatrix_x2_trans(b, ptx::shared_address(p + core_at(k0 + (l & 7) + ((l >> 3) & 1) * 8, n0, width)));
}

}  // namespace sprintnet::cuda::fused
