// Kernel lab, v14 probe (docs/FUSED.md, "v14: the first layer's products by wgmma"): are Hopper's
// warpgroup products (wgmma, both operands read from shared memory through a descriptor) right on the
// layouts the rows kernel would keep, and how much faster than the mma.sync + ldmatrix chains it runs?
//
// The rows kernel's first-layer partial (4x128x128: 1.2 of a 13 us step) is Z[128 rows][64 neurons] =
// X0[128][112] · W0[64][112]ᵀ: each of 8 warps issues 7 A loads, 56 B loads and 56 mma.sync. As two
// warpgroup products (rows 64 wg.., m64n64k16, k = 112 in 7 steps) it is 7 wgmma a warpgroup and no
// ldmatrix. Both operands must then sit in the canonical no-swizzle K-major layout: 8 x 8 "core
// matrices" (8 rows of 16 contiguous bytes), here [row / 8][k / 8][row % 8][k % 8] (a core matrix every
// 128 bytes along k, a row block every 16 K bytes). ldmatrix still reads that layout (every lane names
// one 16-byte row), so the kernel's other products can stay mma.sync.
//
// Also the first layer's weight gradient (B0): dW0[64 neurons][112] = G1[128 rows][64]ᵀ · X0[128][112],
// whose k is the batch's rows, the slow index of both operands: MN-major operands (the descriptor's
// transpose bits). The probe tries both readings of the two strides for that case and says which one
// matches the CPU.
//
// Inputs are small integers, so every product and sum is exact in fp32: the check is bit for bit (the
// timed loops accumulate kReps products, so the forward results are kReps x the product, still exact).
//   nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 -lineinfo -Isrc \
//     bench/lab/wgmma_probe.cu -o wgmma_probe && ./wgmma_probe
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "check_cuda.h"
#include "sprintnet/ops/cuda/fused/fragment_loads.cuh"
#include "sprintnet/ops/cuda/fused/ptx.cuh"
#include "sprintnet/ops/cuda/fused/warpgroup_mma.cuh"

namespace ptx = sprintnet::cuda::ptx;
namespace fused = sprintnet::cuda::fused;
using bf16 = __nv_bfloat16;

constexpr int kRows = 128, kK = 112, kN = 64, kThreads = 256, kLd = kK + 8;
constexpr int kReps = 2000, kVariants = 6;

using fused::core_at;
using fused::core_descriptor;  // (p, LBO, SBO): the probe passes each reading explicitly

struct Out {
  float* forward_mma;   // [128][64], the mma.sync chain's Z
  float* forward_wg;    // [128][64], wgmma's
  float* grad_wg[kVariants];  // [64][112] each: B0 by wgmma, the variants below
  float* forward_core;  // [128][64], mma.sync reading the canonical layout (builds without sm_90a)
  float* grad_core;     // [64][112], B0 the same way
  long long* cycles;    // [3] block 0's clock for kReps products: mma.sync, wgmma, the B0 wgmma
};

// The accumulator layout both instructions share: warp w's value e of n-tile j is row 16 w + g + 8 (e / 2),
// column 8 j + 2 t + e % 2 (for wgmma, w is the warp's index in its warpgroup, rows offset 64 wg).
__device__ void store_acc(float* out, int ld, int row0, const float* acc, int tiles) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  for (int j = 0; j < tiles; ++j)
    for (int e = 0; e < 4; ++e) out[(row0 + g + 8 * (e >> 1)) * ld + 8 * j + 2 * t + (e & 1)] = acc[4 * j + e];
}

__global__ void __launch_bounds__(kThreads, 1) probe(const bf16* x_in, const bf16* w_in, const bf16* g_in, Out out, int parts) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* x_pad = reinterpret_cast<bf16*>(smem);  // [128][120]
  bf16* w_pad = x_pad + kRows * kLd;            // [64][120]
  bf16* x_core = w_pad + kN * kLd;              // [128][112] canonical
  bf16* w_core = x_core + kRows * kK;           // [64][112] canonical
  bf16* g_core = w_core + kN * kK;              // G1 [128 rows][64 neurons], MN-major
  bf16* gt_core = g_core + kRows * kN;          // G1ᵀ [64][128], K-major
  bf16* xt_core = gt_core + kN * kRows;         // X0ᵀ [112][128], K-major
  for (int i = threadIdx.x; i < kRows * kK; i += kThreads) {
    const int r = i / kK, k = i % kK;
    x_pad[r * kLd + k] = x_in[i];
    x_core[core_at(r, k, kK)] = x_in[i];
  }
  for (int i = threadIdx.x; i < kN * kK; i += kThreads) {
    const int r = i / kK, k = i % kK;
    w_pad[r * kLd + k] = w_in[i];
    w_core[core_at(r, k, kK)] = w_in[i];
  }
  // G1 [row][neuron], MN-major (neurons contiguous): [row / 8][neuron / 8][row % 8][neuron % 8].
  for (int i = threadIdx.x; i < kRows * kN; i += kThreads) {
    const int r = i / kN, n = i % kN;
    g_core[core_at(r, n, kN)] = g_in[i];
    gt_core[core_at(n, r, kRows)] = g_in[i];
  }
  for (int i = threadIdx.x; i < kRows * kK; i += kThreads) xt_core[core_at(i % kK, i / kK, kRows)] = x_in[i];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const int warp = threadIdx.x >> 5, wg = warp >> 2, wq = warp & 3;

  // (1) the mma.sync chain, as rows_epoch.cu's first_products<7>.
  float acc[32];
  long long start = clock64();
  for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
  for (int rep = 0; rep < kReps; ++rep) {  // accumulating: the result is kReps x the product, so no rep can be skipped
#pragma unroll
    for (int ks = 0; ks < 7; ++ks) {
      std::uint32_t fa[4];
      fused::load_a(fa, x_pad + 16 * warp * kLd + 16 * ks, kLd);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        std::uint32_t fb[2];
        fused::load_b(fb, w_pad + 8 * nt * kLd + 16 * ks, kLd);
        ptx::mma_bf16(*reinterpret_cast<float(*)[4]>(acc + 4 * nt), fa, fb);
      }
    }
    asm volatile("" ::"f"(acc[0]), "f"(acc[31]));
  }
  long long stop = clock64();
  if (blockIdx.x == 0 && threadIdx.x == 0) out.cycles[0] = stop - start;
  store_acc(out.forward_mma, kN, 16 * warp, acc, 8);
  __syncthreads();

  // (1b) mma.sync on the canonical layouts through the fallback loaders (warpgroup_mma.cuh).
  if ((parts & 128) != 0) {
    float f[32] = {};
#pragma unroll
    for (int ks = 0; ks < 7; ++ks) {
      std::uint32_t fa[4];
      fused::load_a_core(fa, x_core, kK, 16 * warp, 16 * ks);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        std::uint32_t fb[2];
        fused::load_b_core(fb, w_core, kK, 8 * nt, 16 * ks);
        ptx::mma_bf16(*reinterpret_cast<float(*)[4]>(f + 4 * nt), fa, fb);
      }
    }
    store_acc(out.forward_core, kN, 16 * warp, f, 8);
    float gsum[28] = {};
    const int m_tile = warp & 3, n0 = (warp >> 2) * 7;  // 7 feature tiles of 8 a warp, as the rows kernel's B0
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      std::uint32_t fa[4];
      fused::load_a_core_trans(fa, g_core, kN, 16 * m_tile, 16 * ks);
#pragma unroll
      for (int j = 0; j < 7; ++j) {
        std::uint32_t fb[2];
        fused::load_b_core_trans(fb, x_core, kK, 8 * (n0 + j), 16 * ks);
        ptx::mma_bf16(*reinterpret_cast<float(*)[4]>(gsum + 4 * j), fa, fb);
      }
    }
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int j = 0; j < 7; ++j)
      for (int e = 0; e < 4; ++e) {
        out.grad_core[(16 * m_tile + g + 8 * (e >> 1)) * kK + 8 * (n0 + j) + 2 * t + (e & 1)] = gsum[4 * j + e];
      }
    __syncthreads();
  }

  // (2) the same by wgmma: K-major both, LBO = 128 (the next 8 of k), SBO = 8 rows' K x 16 bytes.
  if ((parts & 1) == 0) return;
  start = clock64();
  for (int rep = 0; rep < kReps; ++rep) {
    fused::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 7; ++ks) {
      const std::uint64_t a = core_descriptor(x_core + core_at(64 * wg, 16 * ks, kK), 128, kK * 16);
      const std::uint64_t b = core_descriptor(w_core + core_at(0, 16 * ks, kK), 128, kK * 16);
      fused::wgmma_m64n64k16<0, 0>(acc, a, b, rep > 0 || ks > 0);
    }
    fused::wgmma_commit();
    fused::wgmma_wait_all();
  }
  stop = clock64();
  if (blockIdx.x == 0 && threadIdx.x == 0) out.cycles[1] = stop - start;
  store_acc(out.forward_wg, kN, 64 * wg + 16 * wq, acc, 8);
  __syncthreads();

  // (3) B0: dW0[neuron][feature] = sum over rows G1[row][neuron] X0[row][feature]: A(m = neuron, k = row)
  // and B(k = row, n = feature) are MN-major as the kernel keeps them. Warpgroup wg takes features n0..n0+63
  // (the probe's 112 cover 0..111: warpgroup 1 takes 48..111, overlapping; each stores its own part).
  // Variants, to say which operand reads right under which reading of the strides: both MN-major (0:
  // LBO along k, 1: LBO along m/n), A MN-major with B K-major from X0ᵀ (2, 3), A K-major from G1ᵀ with B
  // MN-major (4, 5).
  for (int variant = 0; variant < kVariants; ++variant) {
    if ((parts & (2 << variant)) == 0) continue;
    const int n0 = wg == 0 ? 0 : kK - 64;
    start = clock64();
    for (int rep = 0; rep < (variant == 0 ? kReps : 1); ++rep) {
      fused::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {  // 16 rows a step
        // MN-major: core matrices 8 (k) x 8 (m or n), m/n contiguous; along m/n the next is 128 bytes on,
        // along k the next row block (8 rows x the width x 2 bytes).
        const std::uint32_t along_mn = 128, along_k_g = 8 * kN * 2, along_k_x = 8 * kK * 2;
        const bool swap = (variant & 1) != 0;
        const std::uint64_t a_mn = swap ? core_descriptor(g_core + core_at(16 * ks, 0, kN), along_mn, along_k_g)
                                        : core_descriptor(g_core + core_at(16 * ks, 0, kN), along_k_g, along_mn);
        const std::uint64_t b_mn = swap ? core_descriptor(x_core + core_at(16 * ks, n0, kK), along_mn, along_k_x)
                                        : core_descriptor(x_core + core_at(16 * ks, n0, kK), along_k_x, along_mn);
        const std::uint64_t a_k = core_descriptor(gt_core + core_at(0, 16 * ks, kRows), 128, kRows * 16);
        const std::uint64_t b_k = core_descriptor(xt_core + core_at(n0, 16 * ks, kRows), 128, kRows * 16);
        if (variant < 2) {
          fused::wgmma_m64n64k16<1, 1>(acc, a_mn, b_mn, ks > 0);
        } else if (variant < 4) {
          fused::wgmma_m64n64k16<1, 0>(acc, a_mn, b_k, ks > 0);
        } else {
          fused::wgmma_m64n64k16<0, 1>(acc, a_k, b_mn, ks > 0);
        }
      }
      fused::wgmma_commit();
      fused::wgmma_wait_all();
    }
    stop = clock64();
    if (variant == 0 && blockIdx.x == 0 && threadIdx.x == 0) out.cycles[2] = stop - start;
    // rows = neurons 16 wq + ..., columns = features n0 + ...
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int j = 0; j < 8; ++j)
      for (int e = 0; e < 4; ++e) {
        const int neuron = 16 * wq + g + 8 * (e >> 1), feature = n0 + 8 * j + 2 * t + (e & 1);
        if (wg == 0 || feature >= 64) out.grad_wg[variant][neuron * kK + feature] = acc[4 * j + e];
      }
    __syncthreads();
  }
}

int main(int argc, char** argv) {
  const int parts = argc > 1 ? std::atoi(argv[1]) : 255;  // bit 0: wgmma K-major, bits 1..6: B0's variants, 7: mma.sync on the canonical layouts
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-4, 4);
  std::vector<float> x(kRows * kK), w(kN * kK), g(kRows * kN);
  for (float& v : x) v = static_cast<float>(small(rng));
  for (float& v : w) v = static_cast<float>(small(rng));
  for (float& v : g) v = static_cast<float>(small(rng));
  std::vector<bf16> xb(x.begin(), x.end()), wb(w.begin(), w.end()), gb(g.begin(), g.end());
  bf16 *dx, *dw, *dg;
  CHECK_CUDA(cudaMalloc(&dx, xb.size() * 2));
  CHECK_CUDA(cudaMalloc(&dw, wb.size() * 2));
  CHECK_CUDA(cudaMalloc(&dg, gb.size() * 2));
  CHECK_CUDA(cudaMemcpy(dx, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dw, wb.data(), wb.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dg, gb.data(), gb.size() * 2, cudaMemcpyHostToDevice));
  Out out{};
  CHECK_CUDA(cudaMalloc(&out.cycles, 3 * sizeof(long long)));
  CHECK_CUDA(cudaMalloc(&out.forward_mma, kRows * kN * 4));
  CHECK_CUDA(cudaMalloc(&out.forward_wg, kRows * kN * 4));
  CHECK_CUDA(cudaMalloc(&out.forward_core, kRows * kN * 4));
  CHECK_CUDA(cudaMalloc(&out.grad_core, kN * kK * 4));
  CHECK_CUDA(cudaMemset(out.forward_core, 0xFF, kRows * kN * 4));
  CHECK_CUDA(cudaMemset(out.grad_core, 0xFF, kN * kK * 4));
  for (float*& p : out.grad_wg) {
    CHECK_CUDA(cudaMalloc(&p, kN * kK * 4));
    CHECK_CUDA(cudaMemset(p, 0xFF, kN * kK * 4));  // poisoned: NaN
  }
  CHECK_CUDA(cudaMemset(out.forward_mma, 0xFF, kRows * kN * 4));  // poisoned: NaN
  CHECK_CUDA(cudaMemset(out.forward_wg, 0xFF, kRows * kN * 4));
  const int smem = (kRows * kLd + kN * kLd + 2 * kRows * kK + kN * kK + 2 * kRows * kN) * 2;
  CHECK_CUDA(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  probe<<<1, kThreads, smem>>>(dx, dw, dg, out, parts);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  long long cycles[3];
  CHECK_CUDA(cudaMemcpy(cycles, out.cycles, sizeof(cycles), cudaMemcpyDeviceToHost));
  std::vector<float> fm(kRows * kN), fw(kRows * kN), fc(kRows * kN), gc(kN * kK);
  CHECK_CUDA(cudaMemcpy(fc.data(), out.forward_core, fc.size() * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(gc.data(), out.grad_core, gc.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<std::vector<float>> gw(kVariants, std::vector<float>(kN * kK));
  CHECK_CUDA(cudaMemcpy(fm.data(), out.forward_mma, fm.size() * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(fw.data(), out.forward_wg, fw.size() * 4, cudaMemcpyDeviceToHost));
  for (int v = 0; v < kVariants; ++v) {
    CHECK_CUDA(cudaMemcpy(gw[v].data(), out.grad_wg[v], kN * kK * 4, cudaMemcpyDeviceToHost));
  }
  int bad_mma = 0, bad_wg = 0, bad_g[kVariants] = {}, bad_core = 0, bad_core_g = 0;
  for (int r = 0; r < kRows; ++r)
    for (int n = 0; n < kN; ++n) {
      float z = 0.0f;
      for (int k = 0; k < kK; ++k) z += x[r * kK + k] * w[n * kK + k];
      bad_mma += fm[r * kN + n] != kReps * z;
      bad_wg += fw[r * kN + n] != kReps * z;
      bad_core += fc[r * kN + n] != z;
    }
  for (int n = 0; n < kN; ++n)
    for (int f = 0; f < kK; ++f) {
      float s = 0.0f;
      for (int r = 0; r < kRows; ++r) s += g[r * kN + n] * x[r * kK + f];
      for (int v = 0; v < kVariants; ++v) bad_g[v] += gw[v][n * kK + f] != s;
      bad_core_g += gc[n * kK + f] != s;
      if (n == 1 && f < 4) {
        std::printf("dW0[1][%d] = %g:", f, s);
        for (int v = 0; v < kVariants; ++v) std::printf(" %g", gw[v][n * kK + f]);
        std::printf("\n");
      }
    }
  std::printf("forward, mma.sync chain: %d of %d wrong\n", bad_mma, kRows * kN);
  std::printf("forward, mma.sync on the canonical layout: %d of %d wrong\n", bad_core, kRows * kN);
  std::printf("B0, mma.sync on the canonical layout: %d of %d wrong\n", bad_core_g, kN * kK);
  std::printf("forward, wgmma K-major (LBO = along k): %d of %d wrong\n", bad_wg, kRows * kN);
  const char* names[kVariants] = {"A, B MN-major, LBO along k", "A, B MN-major, LBO along m/n",
                                  "A MN-major (LBO along k), B K-major", "A MN-major (LBO along m), B K-major",
                                  "A K-major, B MN-major (LBO along k)", "A K-major, B MN-major (LBO along n)"};
  for (int v = 0; v < kVariants; ++v) std::printf("B0, wgmma %s: %d of %d wrong\n", names[v], bad_g[v], kN * kK);
  std::printf("cycles a product (block 0, %d reps): mma.sync chain %.0f, wgmma %.0f, B0 wgmma %.0f\n", kReps,
              static_cast<double>(cycles[0]) / kReps, static_cast<double>(cycles[1]) / kReps,
              static_cast<double>(cycles[2]) / kReps);
  // What the rows kernel relies on: the K-major forward, the MN-major B0 with LBO along k, the fallback loaders.
  return bad_mma != 0 || bad_wg != 0 || bad_g[0] != 0 || bad_core != 0 || bad_core_g != 0;
}
