#pragma once
// One output tile of a matrix product on tensor cores, for the fused engine:
//   C[TM x TN] = sum over k < K of A(m0 + m, k) * B(k, n0 + n)
// with 16-bit inputs (bf16 or fp16) and fp32 accumulation (WMMA 16x16x16). A and
// B are row-major matrices in global memory (L2), read in chunks of kChunk along
// k with cp.async into a ring of shared-memory stages deep enough to hold the
// whole k extent of our layers (up to ~1000): every chunk's load is in flight
// at once, so a tile costs one L2 round trip, not one per chunk (v1 kept two
// stages and was latency-bound, docs/FUSED.md); reads outside a matrix's
// bounds load zeros. Each operand is stored either "k along the row" (A as
// [m][k], B as [n][k]) or "k down the column" (A as [k][m], B as [k][n]), so
// X·Wᵀ, dZ·W and dZᵀ·X all read their operands where they lie. The eight warps
// share the tile's 16x16 fragments; with fewer than eight fragments they split
// each chunk's k-steps and the partial tiles are added in a fixed order, so the
// result is deterministic. The result is left in shared memory (fp32, row
// stride TN + 4) for the caller's epilogue.
#include <cuda_pipeline.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace sprintnet::cuda::fused {

inline constexpr int kChunk = 128;  // k per shared-memory stage
inline constexpr int kPad = 8;      // elements added to each shared row: spreads the banks
inline constexpr int kMaxStages = 8;
inline constexpr int kThreads = 256;  // the block size every tile is computed with
inline constexpr std::size_t kStageBudget = 180 * 1024;  // bytes of operand stages a tile may use

// A row-major matrix and the extent that may be read (rows, and columns: a multiple of 8).
template <typename T>
struct Matrix {
  const T* data;
  std::int64_t ld;
  std::int64_t rows, cols;
};

template <int TM, int TN, bool kAKDown, bool kBKDown>
struct TileShape {
  static constexpr int kFragments = (TM / 16) * (TN / 16);
  static_assert(kFragments >= 8 ? kFragments % 8 == 0 : 8 % kFragments == 0, "fragments must share 8 warps");
  static constexpr int kPerWarp = kFragments >= 8 ? kFragments / 8 : 1;
  static constexpr int kGroups = kFragments >= 8 ? 1 : 8 / kFragments;  // warps on one fragment (split k)
  static constexpr int kLdA = kAKDown ? TM + kPad : kChunk + kPad;
  static constexpr int kLdB = kBKDown ? TN + kPad : kChunk + kPad;
  static constexpr int kSizeA = kAKDown ? kChunk * kLdA : TM * kLdA;  // elements per stage
  static constexpr int kSizeB = kBKDown ? kChunk * kLdB : TN * kLdB;
  static constexpr int kLdC = TN + 4;
  static constexpr std::size_t kChunkBytes = (kSizeA + kSizeB) * 2;  // 16-bit elements
  static constexpr int kStages = kStageBudget / kChunkBytes < kMaxStages ? static_cast<int>(kStageBudget / kChunkBytes)
                                                                         : kMaxStages;
  static_assert(kStages >= 2, "a tile needs two stages");
  static constexpr std::size_t kStageBytes = kStages * kChunkBytes;
  static constexpr std::size_t kBytes = kStageBytes + std::size_t{kGroups} * TM * kLdC * 4;
};

// Copies the R x C block at (r0, c0) of `src` into shared memory (row stride ld); zeros outside src.
// Matrices are taken by value: their fields stay in registers through the loop (a reference would
// be re-read from memory after every copy, which the compiler must assume may alias it).
template <int R, int C, typename T>
__device__ __forceinline__ void load_block(T* __restrict__ dst, int ld, const Matrix<T> src, std::int64_t r0,
                                           std::int64_t c0) {
  constexpr int kPieces = R * (C / 8);  // 16-byte pieces
  const T* __restrict__ data = src.data;
  const std::int64_t rows = src.rows - r0, cols = src.cols - c0, src_ld = src.ld;
  const T* origin = data + r0 * src_ld + c0;
  for (int p = static_cast<int>(threadIdx.x); p < kPieces; p += kThreads) {
    const int r = p / (C / 8), c = (p % (C / 8)) * 8;
    T* to = dst + r * ld + c;
    if (r < rows && c < cols) {
      __pipeline_memcpy_async(to, origin + r * src_ld + c, 16);
    } else {
      *reinterpret_cast<uint4*>(to) = make_uint4(0, 0, 0, 0);
    }
  }
}

// Returns the tile in shared memory: float [TM][TN + 4] at `smem` + kStageBytes.
template <int TM, int TN, bool kAKDown, bool kBKDown, typename T>
__device__ float* tile_product(const Matrix<T> a, std::int64_t m0, const Matrix<T> b, std::int64_t n0,
                               std::int64_t k_extent, unsigned char* smem) {
  using namespace nvcuda;
  using Shape = TileShape<TM, TN, kAKDown, kBKDown>;
  using LayoutA = std::conditional_t<kAKDown, wmma::col_major, wmma::row_major>;
  using LayoutB = std::conditional_t<kBKDown, wmma::row_major, wmma::col_major>;
  constexpr int kFN = TN / 16;
  // Stage s: A at smem + s * kChunkBytes, then B.
  const auto stage_a = [&](int st) { return reinterpret_cast<T*>(smem + st * Shape::kChunkBytes); };
  const auto stage_b = [&](int st) { return stage_a(st) + Shape::kSizeA; };
  float* c = reinterpret_cast<float*>(smem + Shape::kStageBytes);

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int group = Shape::kFragments >= 8 ? 0 : warp / Shape::kFragments;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[Shape::kPerWarp];
  for (auto& f : acc) wmma::fill_fragment(f, 0.0f);

  const auto load_stage = [&](int s, std::int64_t k0) {
    if constexpr (kAKDown) {
      load_block<kChunk, TM>(stage_a(s), Shape::kLdA, a, k0, m0);
    } else {
      load_block<TM, kChunk>(stage_a(s), Shape::kLdA, a, m0, k0);
    }
    if constexpr (kBKDown) {
      load_block<kChunk, TN>(stage_b(s), Shape::kLdB, b, k0, n0);
    } else {
      load_block<TN, kChunk>(stage_b(s), Shape::kLdB, b, n0, k0);
    }
  };

  const int chunks = static_cast<int>((k_extent + kChunk - 1) / kChunk);
  for (int st = 0; st < Shape::kStages; ++st) {
    if (st < chunks) load_stage(st, std::int64_t{st} * kChunk);
    __pipeline_commit();  // one group per stage, empty or not, so the count below holds
  }
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int s = chunk % Shape::kStages;
    __pipeline_wait_prior(Shape::kStages - 1);  // chunk's group has landed
    __syncthreads();
    const std::int64_t left = k_extent - std::int64_t{chunk} * kChunk;
    const int k_steps = static_cast<int>((left < kChunk ? left : kChunk) / 16);
    for (int ks = group; ks < k_steps; ks += Shape::kGroups) {
      for (int j = 0; j < Shape::kPerWarp; ++j) {
        const int f = Shape::kFragments >= 8 ? warp + 8 * j : warp % Shape::kFragments;
        const int fm = f / kFN, fn = f % kFN;
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LayoutA> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LayoutB> fb;
        const T* pa = kAKDown ? stage_a(s) + ks * 16 * Shape::kLdA + fm * 16 : stage_a(s) + fm * 16 * Shape::kLdA + ks * 16;
        const T* pb = kBKDown ? stage_b(s) + ks * 16 * Shape::kLdB + fn * 16 : stage_b(s) + fn * 16 * Shape::kLdB + ks * 16;
        wmma::load_matrix_sync(fa, pa, Shape::kLdA);
        wmma::load_matrix_sync(fb, pb, Shape::kLdB);
        wmma::mma_sync(acc[j], fa, fb, acc[j]);
      }
    }
    __syncthreads();  // the stage is free for the chunk kStages on
    const int next = chunk + Shape::kStages;
    if (next < chunks) load_stage(s, std::int64_t{next} * kChunk);
    __pipeline_commit();
  }

  for (int j = 0; j < Shape::kPerWarp; ++j) {
    const int f = Shape::kFragments >= 8 ? warp + 8 * j : warp % Shape::kFragments;
    const int fm = f / kFN, fn = f % kFN;
    float* to = c + group * TM * Shape::kLdC + fm * 16 * Shape::kLdC + fn * 16;
    wmma::store_matrix_sync(to, acc[j], Shape::kLdC, wmma::mem_row_major);
  }
  __syncthreads();
  if constexpr (Shape::kGroups > 1) {
    for (int i = static_cast<int>(threadIdx.x); i < TM * TN; i += kThreads) {
      const int at = (i / TN) * Shape::kLdC + i % TN;
      float sum = c[at];
      for (int g = 1; g < Shape::kGroups; ++g) sum += c[g * TM * Shape::kLdC + at];
      c[at] = sum;
    }
    __syncthreads();
  }
  return c;
}

}  // namespace sprintnet::cuda::fused
