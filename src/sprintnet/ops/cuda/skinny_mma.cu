// The output layer's kernels on the tensor cores (mma.sync m16n8k16, bf16/fp16 in, fp32 sums) for
// wide 16-bit layers: the forward with its softmax cross-entropy, the bf16 input gradient and the
// bf16 weight gradient. skinny_layer.cu chooses them (and keeps the FMA kernels they replaced,
// SPRINTNET_SKINNY_MMA=0); docs/PERFORMANCE.md, "The output layer on the tensor cores".
#include "sprintnet/ops/cuda/skinny_mma.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "sprintnet/ops/cuda/skinny_kernels.cuh"

namespace sprintnet::cuda {
namespace {

using namespace skinny_detail;

template <typename T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                            std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint4 load16_or_zero(const void* p, bool valid) {
  return valid ? *static_cast<const uint4*>(p) : make_uint4(0u, 0u, 0u, 0u);
}

// ---- the forward of a wide 16-bit layer on the tensor cores (mma.sync m16n8k16, fp32 sums): the
// FMA kernels (skinny_layer.cu) spend ~10 K instructions a row at 4096 inputs (a multiply, a conversion and a
// load from L1 for each input and class, then the block's sums), which bound them at 5-7x their
// memory time; one mma does 16 rows x 8 classes x 16 inputs. A block owns 16 rows; its 8 warps take
// the inputs in interleaved chunks of 32 and meet in shared memory, in warp order. (H100, 4096 rows
// of 4096: 60 -> 25 us; docs/PERFORMANCE.md, "The output layer on the tensor cores".)
//
// Fragments straight from global memory, 16 bytes a thread: lane (g, t) = (lane / 4, lane % 4) reads
// inputs 8t..8t+7 of a chunk from rows g and g + 8 of x and from class 8j + g of w for tile j. The mma
// sees them as two k-steps of 16: its column 2t + {0,1} is input 8t + {0,1} (then 8t + {4,5}),
// column 2t + 8 + {0,1} is 8t + {2,3} (then 8t + {6,7}). A and B use the same map, so the sum is
// the product's. Rows past the last read the last row; classes past the last read the last class
// (their sums are never used); chunks past `in` read zeros.
template <typename T, int kTiles>  // kTiles: classes in tiles of 8
__global__ void __launch_bounds__(kMmaWarps * kWarpSize) skinny_forward_mma_kernel(SkinnyForwardArgs a) {
  __shared__ float parts[kMmaWarps][kTiles * 4][kWarpSize];  // each warp's accumulators
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kMmaRows;
  const auto clamp_row = [&](std::int64_t r) { return r < a.rows ? r : a.rows - 1; };
  const T* x_lo = x + clamp_row(row0 + g) * a.in + 8 * t;
  const T* x_hi = x + clamp_row(row0 + g + 8) * a.in + 8 * t;
  const T* w_rows[kTiles];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const int c = 8 * j + g;
    w_rows[j] = w + static_cast<std::int64_t>(c < a.classes ? c : a.classes - 1) * a.in + 8 * t;
  }
  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
  }
#pragma unroll 4
  for (std::int64_t k = static_cast<std::int64_t>(warp) * kMmaChunk; k < a.in; k += kMmaWarps * kMmaChunk) {
    const bool valid = k + 8 * t < a.in;
    const uint4 lo = load16_or_zero(x_lo + k, valid), hi = load16_or_zero(x_hi + k, valid);
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const uint4 b = load16_or_zero(w_rows[j] + k, valid);
      mma_16x8x16<T>(acc[j], lo.x, hi.x, lo.y, hi.y, b.x, b.y);
      mma_16x8x16<T>(acc[j], lo.z, hi.z, lo.w, hi.w, b.z, b.w);
    }
  }
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) parts[warp][j * 4 + i][lane] = acc[j][i];
  }
  __syncthreads();
  // Warp w finishes rows 2w and 2w + 1, lane c class c: accumulator (row r, class c) is register
  // (c % 2) + 2 (r / 8) of tile c / 8 in lane (r % 8) * 4 + (c % 8) / 2; the warps' parts in order.
  for (int r = 2 * warp; r < 2 * warp + 2; ++r) {
    const std::int64_t row = row0 + r;
    if (row >= a.rows) break;  // the same for the whole warp
    float product = 0.0f;
    if (lane < a.classes) {
      const int reg = (lane / 8) * 4 + (lane % 2) + 2 * (r / 8), holder = (r % 8) * 4 + (lane % 8) / 2;
#pragma unroll
      for (int i = 0; i < kMmaWarps; ++i) product += parts[i][reg][holder];
    }
    finish_row<T, false>(a, row, product, lane);
  }
  add_forward_row_sums<kMmaWarps * kWarpSize>(a);
}

// ---- the input gradient of a wide bf16 layer on the tensor cores: dX = dlogits W, K = the classes
// (at most 16, padded with zeros). The FMA kernel spends a load, a conversion and four multiplies
// on each class of every four outputs (~50 us for 4096 x 4096 on the H100, 2.7x its memory time).
// dlogits are fp32: each is split into a bf16 part and the bf16 of what that leaves (hi + lo carries
// 16 of its 24 bits, error 2^-17 relative, far below the bf16 output's 2^-9), and both go through
// the mma into fp32 sums. A warp owns 64 features (their W fragments: 8 tiles of 8) of a tile of 16
// rows (more in a grid-stride loop past 65535 tiles); the tile's 16 x 64 sums pass through the warp's
// own shared memory so every lane finishes 16 contiguous bytes of a row (mask, round, store).
constexpr int kIgWarps = 4;
constexpr int kIgFeatures = 64;
constexpr int kIgPad = 4;  // floats after each row of the staging tile, against bank conflicts

__device__ __forceinline__ std::uint32_t pack_bf16(float lo_half, float hi_half) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo_half, hi_half);  // .x (low 16 bits) = lo_half
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

__global__ void __launch_bounds__(kIgWarps * kWarpSize)
    skinny_input_grad_mma_kernel(const float* dlogits, int classes, const __nv_bfloat16* w, std::int64_t rows,
                                 std::int64_t in, const __nv_bfloat16* relu_out, __nv_bfloat16* dx) {
  __shared__ float tile[kIgWarps][kMmaRows][kIgFeatures + kIgPad];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const std::int64_t f0 = (static_cast<std::int64_t>(blockIdx.x) * kIgWarps + warp) * kIgFeatures;
  if (f0 >= in) return;  // the warps share no barrier
  // B(k, n) = W[k][f0 + 8j + n]: b0 holds classes 2t, 2t + 1 of feature g, b1 classes 2t + 8, 2t + 9.
  const auto weight = [&](int c, std::int64_t f) {
    return c < classes && f < in ? __bfloat162float(w[c * in + f]) : 0.0f;
  };
  std::uint32_t b[kIgFeatures / 8][2];
#pragma unroll
  for (int j = 0; j < kIgFeatures / 8; ++j) {
    const std::int64_t f = f0 + 8 * j + g;
    b[j][0] = pack_bf16(weight(2 * t, f), weight(2 * t + 1, f));
    b[j][1] = pack_bf16(weight(2 * t + 8, f), weight(2 * t + 9, f));
  }
  const auto grad = [&](std::int64_t r, int c) { return r < rows && c < classes ? __ldg(dlogits + r * classes + c) : 0.0f; };
  constexpr int kVectors = kMmaRows * (kIgFeatures / 8) / kWarpSize;  // 16-byte pieces a lane finishes
  for (std::int64_t first = static_cast<std::int64_t>(blockIdx.y) * kMmaRows; first < rows;
       first += static_cast<std::int64_t>(gridDim.y) * kMmaRows) {
    // The ReLU output this lane will need, loaded first: its latency hides behind the products.
    uint4 mask[kVectors];
#pragma unroll
    for (int i = 0; i < kVectors; ++i) {
      const int vec = lane + kWarpSize * i, r = vec / (kIgFeatures / 8), c = (vec % (kIgFeatures / 8)) * 8;
      const std::int64_t row = first + r, f = f0 + c;
      mask[i] = relu_out != nullptr && row < rows && f < in ? *reinterpret_cast<const uint4*>(relu_out + row * in + f)
                                                            : make_uint4(0u, 0u, 0u, 0u);
    }
    // A: a0 (row g, classes 2t, 2t + 1), a1 (row g + 8), a2 (row g, classes 2t + 8, 2t + 9), a3 (row g + 8).
    const float v[8] = {grad(first + g, 2 * t),         grad(first + g, 2 * t + 1),
                        grad(first + g + 8, 2 * t),     grad(first + g + 8, 2 * t + 1),
                        grad(first + g, 2 * t + 8),     grad(first + g, 2 * t + 9),
                        grad(first + g + 8, 2 * t + 8), grad(first + g + 8, 2 * t + 9)};
    std::uint32_t hi[4], lo[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float h0 = __bfloat162float(__float2bfloat16_rn(v[2 * i]));
      const float h1 = __bfloat162float(__float2bfloat16_rn(v[2 * i + 1]));
      hi[i] = pack_bf16(h0, h1);
      lo[i] = pack_bf16(v[2 * i] - h0, v[2 * i + 1] - h1);
    }
    __syncwarp();  // the previous tile's reads of the staging tile are done
#pragma unroll
    for (int j = 0; j < kIgFeatures / 8; ++j) {
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mma_16x8x16<__nv_bfloat16>(acc, hi[0], hi[1], hi[2], hi[3], b[j][0], b[j][1]);
      mma_16x8x16<__nv_bfloat16>(acc, lo[0], lo[1], lo[2], lo[3], b[j][0], b[j][1]);
      *reinterpret_cast<float2*>(&tile[warp][g][8 * j + 2 * t]) = make_float2(acc[0], acc[1]);
      *reinterpret_cast<float2*>(&tile[warp][g + 8][8 * j + 2 * t]) = make_float2(acc[2], acc[3]);
    }
    __syncwarp();
    // 16 rows x 8 pieces of 8 features: four a lane, eight lanes a row.
#pragma unroll
    for (int i = 0; i < kVectors; ++i) {
      const int vec = lane + kWarpSize * i, r = vec / (kIgFeatures / 8), c = (vec % (kIgFeatures / 8)) * 8;
      const std::int64_t row = first + r, f = f0 + c;
      if (row < rows && f < in) {
        const float4 s0 = *reinterpret_cast<const float4*>(&tile[warp][r][c]);
        const float4 s1 = *reinterpret_cast<const float4*>(&tile[warp][r][c + 4]);
        float sum[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
        if (relu_out != nullptr) {
          const __nv_bfloat16* y = reinterpret_cast<const __nv_bfloat16*>(&mask[i]);
#pragma unroll
          for (int e = 0; e < 8; ++e) sum[e] = __bfloat162float(y[e]) > 0.0f ? sum[e] : 0.0f;
        }
        const uint4 out = make_uint4(pack_bf16(sum[0], sum[1]), pack_bf16(sum[2], sum[3]),
                                     pack_bf16(sum[4], sum[5]), pack_bf16(sum[6], sum[7]));
        *reinterpret_cast<uint4*>(dx + row * in + f) = out;
      }
    }
  }
}

// ---- the weight gradient of a wide bf16 layer on the tensor cores: dW^T = X^T dlogits, M = the
// block's 128 features (a tile of 16 a warp), N = the classes (tiles of 8), K = its slice of rows.
// The FMA kernel (skinny_layer.cu) does a conversion and kC multiplies per input element and row; this one stages
// 64 rows of its features in shared memory (16 bytes a thread), reads them transposed into A
// fragments with ldmatrix.trans, and the chunk's dlogits split into bf16 hi + lo (as the input
// gradient, error 2^-17) and transposed into B fragments. The warps' tiles meet in the same
// block_sum layout as the FMA kernel's, and the same slices, counters and extra block follow.
// (H100, 4096 rows of 4096: 63 -> 39 us.)
constexpr int kWgChunk = 64;       // rows staged at a time
constexpr int kWgPad = 8;          // bf16 after each staged row (ldmatrix reads 8 rows without bank conflicts)
constexpr int kWgDPad = 8;         // bf16 after each class row of the transposed dlogits

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&a)[4], const void* p) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(address));
}

template <int kC>
__global__ void __launch_bounds__(kGradWarps * kWarpSize)
    skinny_weight_grad_mma_kernel(const float* dlogits, int classes, const __nv_bfloat16* x, std::int64_t rows,
                                  std::int64_t in, __nv_bfloat16* dw, __nv_bfloat16* dbias, RowSums sums,
                                  SkinnyScratch scratch, int splits) {
  constexpr int kTiles = kC / 8;
  __shared__ __align__(16) __nv_bfloat16 xs[kWgChunk][kSplitFeatures + kWgPad];
  __shared__ __align__(16) __nv_bfloat16 d_hi[kC][kWgChunk + kWgDPad];
  __shared__ __align__(16) __nv_bfloat16 d_lo[kC][kWgChunk + kWgDPad];
  __shared__ float4 block_sum[kC][kWarpSize];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  if (is_bias_block(in, splits)) {
    bias_grad_block(dlogits, classes, rows, dbias, sums);
    return;
  }
  const auto [group, split, first, last] = weight_grad_slice(rows, in, splits);
  const std::int64_t f0 = static_cast<std::int64_t>(group) * kSplitFeatures;
  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
  }
  for (std::int64_t start = first; start < last; start += kWgChunk) {
    __syncthreads();  // the previous chunk's fragments are read
    // X: 64 rows x 128 features, 16 bytes a thread a pass; rows past the slice and features past
    // `in` are zeros.
    for (int i = static_cast<int>(threadIdx.x); i < kWgChunk * (kSplitFeatures / 8); i += kGradWarps * kWarpSize) {
      const int r = i / (kSplitFeatures / 8), c = (i % (kSplitFeatures / 8)) * 8;
      const std::int64_t row = start + r, f = f0 + c;
      *reinterpret_cast<uint4*>(&xs[r][c]) = row < last && f < in
                                                 ? __ldg(reinterpret_cast<const uint4*>(x + row * in + f))
                                                 : make_uint4(0u, 0u, 0u, 0u);
    }
    // dlogits, transposed to [class][row], split into hi and lo.
    for (int i = static_cast<int>(threadIdx.x); i < kWgChunk * kC; i += kGradWarps * kWarpSize) {
      const int r = i / kC, c = i % kC;
      const std::int64_t row = start + r;
      const float v = row < last && c < classes ? dlogits[row * classes + c] : 0.0f;
      const __nv_bfloat16 hi = __float2bfloat16_rn(v);
      d_hi[c][r] = hi;
      d_lo[c][r] = __float2bfloat16_rn(v - __bfloat162float(hi));
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kWgChunk; k += 16) {
      // A(m, k) = X[k][m] for the warp's 16 features: matrices (m 0-7, k 0-7), (m 8-15, k 0-7),
      // (m 0-7, k 8-15), (m 8-15, k 8-15), lanes 8j..8j+7 giving matrix j's rows.
      const int j = lane / 8, r = lane % 8;
      std::uint32_t a[4];
      ldmatrix_x4_trans(a, &xs[k + (j >> 1) * 8 + r][warp * 16 + (j & 1) * 8]);
#pragma unroll
      for (int n = 0; n < kTiles; ++n) {
        // B(k, n) = dlogits[k][8 tile + n]: b0 rows 2t, 2t + 1 of class g, b1 rows 2t + 8, 2t + 9.
        const int c = 8 * n + g;
        const auto word = [&](const __nv_bfloat16 (*d)[kWgChunk + kWgDPad], int row) {
          return *reinterpret_cast<const std::uint32_t*>(&d[c][row]);
        };
        mma_16x8x16<__nv_bfloat16>(acc[n], a[0], a[1], a[2], a[3], word(d_hi, k + 2 * t), word(d_hi, k + 2 * t + 8));
        mma_16x8x16<__nv_bfloat16>(acc[n], a[0], a[1], a[2], a[3], word(d_lo, k + 2 * t), word(d_lo, k + 2 * t + 8));
      }
    }
  }
  // acc[n]: (feature 16 warp + g, classes 8n + 2t, 8n + 2t + 1), then feature + 8: into block_sum's
  // [class][feature] layout.
  float* sums_by_class = reinterpret_cast<float*>(block_sum);
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    const int c = 8 * n + 2 * t, m = warp * 16 + g;
    sums_by_class[c * kSplitFeatures + m] = acc[n][0];
    sums_by_class[(c + 1) * kSplitFeatures + m] = acc[n][1];
    sums_by_class[c * kSplitFeatures + m + 8] = acc[n][2];
    sums_by_class[(c + 1) * kSplitFeatures + m + 8] = acc[n][3];
  }
  __syncthreads();
  store_weight_grad_block<__nv_bfloat16, kC>(block_sum, classes, in, group, split, splits, dw, scratch);
}

}  // namespace

cudaError_t launch_skinny_forward_mma(const SkinnyForwardArgs& a, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((a.rows + kMmaRows - 1) / kMmaRows);
  constexpr int threads = kMmaWarps * kWarpSize;
  const auto typed = [&](auto tiles) {
    constexpr int kTiles = decltype(tiles)::value;
    if (a.type == ElementType::kBF16) {
      skinny_forward_mma_kernel<__nv_bfloat16, kTiles><<<blocks, threads, 0, stream>>>(a);
    } else {
      skinny_forward_mma_kernel<__half, kTiles><<<blocks, threads, 0, stream>>>(a);
    }
    return cudaGetLastError();
  };
  if (a.classes <= 8) return typed(std::integral_constant<int, 1>{});
  if (a.classes <= 16) return typed(std::integral_constant<int, 2>{});
  return typed(std::integral_constant<int, 4>{});
}

cudaError_t launch_skinny_input_grad_mma(const float* dlogits, int classes, const __nv_bfloat16* w, std::int64_t rows,
                                         std::int64_t in, const __nv_bfloat16* relu_out, __nv_bfloat16* dx,
                                         cudaStream_t stream) {
  constexpr std::int64_t per_block = std::int64_t{kIgWarps} * kIgFeatures;
  const dim3 grid(static_cast<unsigned>((in + per_block - 1) / per_block),
                  static_cast<unsigned>(std::min<std::int64_t>((rows + kMmaRows - 1) / kMmaRows, 65535)));
  skinny_input_grad_mma_kernel<<<grid, kIgWarps * kWarpSize, 0, stream>>>(dlogits, classes, w, rows, in, relu_out, dx);
  return cudaGetLastError();
}

cudaError_t launch_skinny_weight_grad_mma(const float* dlogits, int classes, const __nv_bfloat16* x, std::int64_t rows,
                                          std::int64_t in, __nv_bfloat16* dw, __nv_bfloat16* dbias,
                                          const RowSums& sums, SkinnyScratch scratch, int splits,
                                          cudaStream_t stream) {
  const auto groups = (in + kSplitFeatures - 1) / kSplitFeatures;
  const auto blocks = static_cast<unsigned>(groups * splits + 1);  // and the bias block
  constexpr int threads = kGradWarps * kWarpSize;
  if (classes <= 8) {
    skinny_weight_grad_mma_kernel<8><<<blocks, threads, 0, stream>>>(dlogits, classes, x, rows, in, dw, dbias, sums,
                                                                      scratch, splits);
  } else {
    skinny_weight_grad_mma_kernel<16><<<blocks, threads, 0, stream>>>(dlogits, classes, x, rows, in, dw, dbias, sums,
                                                                       scratch, splits);
  }
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
