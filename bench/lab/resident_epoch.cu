// Kernel lab, v7 probe (docs/FUSED.md, "v7 probe: the resident grid kernel"): can one persistent
// kernel train 784-784-784-784-10 at batch 128 well under the compiled step's 28 ms an epoch, with
// every weight's fp32 master resident in shared memory and nothing but activations moving?
//
// Layout. 98 blocks (784 / 8), one an SM; block r owns neurons 8r..8r+7 of every hidden layer and
// pixel columns 8r..8r+7 of the input:
//   forward l:  X_l[:, own] = relu(X_{l-1} · W_l[own, :]ᵀ + b_l[own])  — reads all of X_{l-1} from L2
//               and its 8 weight rows (the bf16 copy in global memory)
//   output:     every block computes all 128 x 10 logits (reads all of X_3), the loss, dlogits, then
//               D_3[:, own] and the gradient of W_4[:, own]
//   backward l: D_{l-1}[:, own] = (D_l · W_l[:, own]) ⊙ relu'  and  dW_l[:, own] = D_lᵀ · X_{l-1}[:, own],
//               applied at once to the block's fp32 master columns (shared memory; momentum in L2,
//               a float4 a thread in the mma fragment's own order), the new bf16 columns written to
//               the global copy that the next step's forward rows read
// So a block owns W_l[:, own] (columns: the input gradient and the update are local) and reads
// W_l[own, :] (rows: the forward) from the copy its owners refresh; no partial sum ever crosses
// blocks. 7 grid barriers a step. Inside a block the 8 warps split each stage's 49 column tiles
// (128 rows x 16, 4 KB, through a 3-deep cp.async ring a warp) and add their partial products in
// shared memory in warp order: every sum has a fixed order, reruns are bit-identical.
//
// Scope of the probe: bf16 products, fp32 master, ReLU, SGD momentum, cross-entropy, full batches,
// random data. It validates 3 steps against a CPU reference (bf16 rounding where the kernel rounds)
// and times whole epochs (468 steps in one launch), with a per-stage profile.
//   nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 -lineinfo -Isrc \
//     bench/lab/resident_epoch.cu -o resident_epoch && ./resident_epoch
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "check_cuda.h"
#include "sprintnet/ops/cuda/fused/grid_barrier.cuh"

using bf16 = __nv_bfloat16;

constexpr int kBatch = 128, kWidth = 784, kIn = 784, kClasses = 10, kHidden = 3;
static_assert(kIn == kWidth, "the probe splits the pixels like the neurons: 8 a block");
constexpr int kOwn = 8;                        // neurons (and pixel columns) a block owns
constexpr int kBlocks = kWidth / kOwn;         // 98
constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kTiles = kWidth / 16;            // 49 column tiles of 16
#ifndef LAB_RING
#define LAB_RING 3
#endif
constexpr int kRing = LAB_RING;                // tiles in flight a warp
constexpr int kTileBytes = kBatch * 32;        // 128 rows x 16 bf16
constexpr int kMasterStride = kWidth + 8;      // floats: conflict-free float2 B-fragment loads
constexpr int kWStride = kIn + 8;              // bf16: 1584 B, conflict-free ldmatrix rows
constexpr int kXtStride = kBatch + 8;          // bf16: 272 B
constexpr int kStages = 2 * kHidden + 1;       // barriers a step
static_assert(kThreads == 2 * kBatch && kBatch == 16 * kWarps && kWarps == kOwn,
              "a thread pair a row in the epilogues, a warp's 16 rows in the products, a warp a bias");
static_assert(kClasses == 10, "the output stage's pieces carry classes 0-7 from every lane and 8-9 from t = 0");

// Lab switches (-D...=1), for timing the parts: LAB_ROTATE=0 walks every block's tiles in the same
// order (all SMs asking L2 for the same lines at once); LAB_NO_MMA leaves the products out (data
// movement, ldmatrix and the epilogues only); LAB_NO_BARRIER replaces the grid barriers by block
// barriers (each block's own work, no waiting for the others). The last two compute nonsense.
#ifndef LAB_ROTATE
#define LAB_ROTATE 1
#endif
#ifndef LAB_NO_MMA
#define LAB_NO_MMA 0
#endif
#ifndef LAB_NO_BARRIER
#define LAB_NO_BARRIER 0
#endif

// Shared memory, bytes.
constexpr int kRingOff = 0;
constexpr int kRingBytes = kWarps * kRing * kTileBytes;                  // 96 KB; the reductions alias it
constexpr int kMasterOff = kRingOff + kRingBytes;
constexpr int kMasterBytes = kHidden * kOwn * kMasterStride * 4;         // 74 KB
constexpr int kWsOff = kMasterOff + kMasterBytes;
constexpr int kWsBytes = 16 * kWStride * 2;                              // W rows: 8 (forward) or 16 (output)
constexpr int kXtOff = kWsOff + kWsBytes;
constexpr int kXtBytes = (kHidden + 1) * kOwn * kXtStride * 2;           // own columns of X_0..X_3
constexpr int kDlOff = kXtOff + kXtBytes;
constexpr int kDlBytes = kBatch * kClasses * 4;                          // dlogits
constexpr int kDtOff = kDlOff + kDlBytes;
constexpr int kDtBytes = kOwn * kBatch * 4;                              // own D columns (bias gradients)
constexpr int kSmallOff = kDtOff + kDtBytes;
constexpr int kSmallFloats = 3 * kClasses * kOwn + 2 * kHidden * kOwn + 3 * kClasses + kBatch + 2 + 16;
constexpr int kSmemBytes = kSmallOff + kSmallFloats * 4;
static_assert(kSmemBytes <= 227 * 1024, "one block an SM");
static_assert(kWarps * kBatch * 16 * 4 <= kRingBytes, "the output stage's reduction fits the ring");

struct Params {
  const std::uint8_t* images;
  const std::int32_t* labels;
  const std::int32_t* order;  // steps x 128 sample indices
  int steps;
  float scale, shift;         // x = u8 * scale + shift
  float lr, momentum;
  bf16* x[kHidden + 1];       // [128][784]: x[0] the gathered batch of even steps, x[l] hidden layer l's output
  bf16* x0_odd;               // the gathered batch of odd steps (the split kernel's B1 reads the cluster's
                              // 56 columns of X_0 while its peers gather the next batch into theirs)
  bf16* d[kHidden + 1];       // [128][784]: d[l] the gradient of hidden layer l's pre-activation
  bf16* w[kHidden + 2];       // w[1..4]: the bf16 copy, row-major [out][in]
  float* master[kHidden + 2]; // w[1..4]'s fp32 master, row-major: read at the start, written at the end
  float* bias[kHidden + 2];   // b[1..4] fp32: read at the start, written at the end; bias[4] live every step
  float4* mom[kHidden + 1];   // mom[1..3]: hidden-layer momentum, [block][tile][lane] float4
  unsigned* barrier;
  float* losses;              // [steps]
  std::uint64_t* clock;       // per-barrier times (block 0), or null
  int clock_capacity;
  std::uint64_t* trace;       // LAB_TRACE: block 0's times inside each stage, 4 a stage, or null
  std::uint64_t* trace_out;   // block 0's times inside the output stage's epilogue, 8 a step, or null
};

// Block 0, thread 0 stamps point 0..3 of (step, stage): the stage's start, warp 0's first tile
// landed, warp 0's tiles done, the stage's end (before its grid barrier).
__device__ __forceinline__ void mark(const Params& p, int step, int stage, int point) {
  if (p.trace != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    p.trace[(step * kStages + stage) * 4 + point] = sprintnet::cuda::global_nanoseconds();
  }
}

__device__ __forceinline__ void mark_out(const Params& p, int step, int point) {
  if (p.trace_out != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    p.trace_out[step * 8 + point] = sprintnet::cuda::global_nanoseconds();
  }
}

// The gathered batch of step `step` (two buffers by parity: see Params::x0_odd).
__device__ __forceinline__ bf16* input_of(const Params& p, int step) { return (step & 1) != 0 ? p.x0_odd : p.x[0]; }
// What layer l's products read: the step's batch for the first layer, else the layer below's output.
__device__ __forceinline__ const bf16* below_of(const Params& p, int l, int step) {
  return l == 1 ? input_of(p, step) : p.x[l - 1];
}

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void mma(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  if (LAB_NO_MMA) {
    d[0] += __uint_as_float(a[0] ^ b[0]);  // keeps the fragments live
    return;
  }
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void ldsm_x4(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x2(std::uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_u32(p)));
}
__device__ __forceinline__ std::uint32_t pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

// A ring slot holds a 128 x 16 tile as 128 rows of 32 B; row b's two 16-B halves are swapped when
// bit 2 of b is set, so the 8 rows an ldmatrix phase reads fall in distinct banks.
__device__ __forceinline__ int slot_offset(int row, int half) { return row * 32 + ((half ^ ((row >> 2) & 1)) << 4); }

// What both kernels keep of a block's own 8 neurons (and of the output layer) in shared memory.
struct OwnState {
  bf16* xt;                      // [layer 0..3][8][kXtStride]: X_l[:, own] transposed
  float* dl;                     // [128][10]: dlogits
  float* dt;                     // [8][128]: D[:, own] (the bias gradients)
  float *w4, *w4_mom, *w4_grad;  // [10][8]: W_4[:, own]
  float *b_master, *b_mom;       // [3][8]: b_1..b_3[own]
  float *b4, *b4_mom, *b4_grad;  // [10] (block 0)
  float* row_loss;               // [128]
  float* b4_live;                // [16]: b_4 as every block reads it in the output stage
  __device__ OwnState(std::uint8_t* s, int xt_off, int dl_off, int dt_off, int small_off) {
    xt = reinterpret_cast<bf16*>(s + xt_off);
    dl = reinterpret_cast<float*>(s + dl_off);
    dt = reinterpret_cast<float*>(s + dt_off);
    float* f = reinterpret_cast<float*>(s + small_off);
    w4 = f; w4_mom = f + 80; w4_grad = f + 160;
    b_master = f + 240; b_mom = f + 264;
    b4 = f + 288; b4_mom = f + 298; b4_grad = f + 308;
    row_loss = f + 318;
    b4_live = f + 448;  // 16-byte aligned: the cp.async destination
  }
  __device__ bf16* xt_of(int l) const { return xt + l * kOwn * kXtStride; }
};

// v7a's shared memory, carved once.
struct Smem : OwnState {
  std::uint8_t* ring;
  float* master;  // [layer 1..3][8][kMasterStride]: W_l[:, own] transposed
  bf16* ws;       // [16][kWStride]
  __device__ explicit Smem(std::uint8_t* s) : OwnState(s, kXtOff, kDlOff, kDtOff, kSmallOff) {
    ring = s + kRingOff;
    master = reinterpret_cast<float*>(s + kMasterOff);
    ws = reinterpret_cast<bf16*>(s + kWsOff);
  }
  __device__ float* master_of(int l) const { return master + (l - 1) * kOwn * kMasterStride; }
  __device__ std::uint8_t* ring_of(int warp) const { return ring + warp * kRing * kTileBytes; }
};

// Streams this warp's column tiles (w, w + 8, ...) of src [128][784] through its ring; body(tile,
// slot) runs on each once it has landed. One commit group a tile (empty past the end), so the
// wait counts stay exact.
// Blocks start their walk at different tiles (LAB_ROTATE), so the 98 SMs spread their requests over
// L2 instead of all asking for the same lines at once. Which tiles a warp takes stays fixed (the
// momentum's layout depends on it).
__device__ __forceinline__ int tile_of(int warp, int i) {
  return (warp + i * kWarps + (LAB_ROTATE ? static_cast<int>(blockIdx.x) * 5 : 0)) % kTiles;
}

template <typename Body>
__device__ __forceinline__ void stream_tiles(const bf16* src, std::uint8_t* ring, Body&& body) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int count = (kTiles - warp + kWarps - 1) / kWarps;
  auto issue = [&](int i) {
    if (i < count) {
      const int tile = tile_of(warp, i);
      std::uint8_t* slot = ring + (i % kRing) * kTileBytes;
#pragma unroll
      for (int c = lane; c < 2 * kBatch; c += 32) {
        const int row = c >> 1, half = c & 1;
        cp16(slot + slot_offset(row, half), src + row * kWidth + tile * 16 + half * 8);
      }
    }
    commit();
  };
#pragma unroll
  for (int i = 0; i < kRing; ++i) issue(i);
  for (int i = 0; i < count; ++i) {
    wait_groups<kRing - 1>();
    __syncwarp();
    body(tile_of(warp, i), ring + (i % kRing) * kTileBytes);
    __syncwarp();  // every lane has read the slot before it is refilled
    issue(i + kRing);
  }
  wait_groups<0>();
}

// A(16 rows from m0, the tile's 16 columns) for mma, from a ring slot.
__device__ __forceinline__ void tile_a(std::uint32_t (&a)[4], const std::uint8_t* slot, int m0) {
  const int lane = threadIdx.x & 31;
  const int row = m0 + (lane & 15);
  ldsm_x4(a, slot + slot_offset(row, lane >> 4));
}
// A = the slot's transpose: 16 columns (rows of A) x 16 rows from k0 (A's k).
__device__ __forceinline__ void tile_a_trans(std::uint32_t (&a)[4], const std::uint8_t* slot, int k0) {
  const int lane = threadIdx.x & 31;
  const int row = k0 + ((lane >> 4) & 1) * 8 + (lane & 7);
  ldsm_x4_trans(a, slot + slot_offset(row, (lane >> 3) & 1));
}

// v7a: this warp's partial product of the block's 8 columns (all 128 rows) into red[warp][128][8].
__device__ __forceinline__ void store_warp_partials(float* red, const float (&acc)[8][4]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 8; ++mt) {
    *reinterpret_cast<float2*>(red + (warp * kBatch + mt * 16 + g) * kOwn + 2 * t) = make_float2(acc[mt][0], acc[mt][1]);
    *reinterpret_cast<float2*>(red + (warp * kBatch + mt * 16 + g + 8) * kOwn + 2 * t) =
        make_float2(acc[mt][2], acc[mt][3]);
  }
}

// Block-wide: red[warp][128][width] fp32 partials (aliasing the ring) summed in warp order.
__device__ __forceinline__ float sum_warps(const float* red, int row, int col, int width) {
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) s += red[(w * kBatch + row) * width + col];
  return s;
}

// Σ over a warp's lanes by a butterfly: a fixed order, and every lane ends with the same bits.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Σ_b f(b) over the batch by one warp: 4 rows a lane, then the butterfly.
template <class F>
__device__ __forceinline__ float batch_sum(F&& f) {
  const int lane = threadIdx.x & 31;
  return warp_sum((f(lane) + f(lane + 32)) + (f(lane + 64) + f(lane + 96)));
}

// One SGD-momentum step of a bias kept in shared memory.
__device__ __forceinline__ void step_bias(const Params& p, float& master, float& momentum, float grad) {
  momentum = p.momentum * momentum + grad;
  master -= p.lr * momentum;
}

// b_{j+1}[own] from D_{j+1}[:, own] in s.dt (hidden layer j + 1's bias, j = 0..2): warp n sums column n.
template <class S>
__device__ void apply_bias(const Params& p, const S& s, int j) {
  const int n = threadIdx.x >> 5;  // a warp a bias; the split kernel's other 8 warps sit out
  if (n >= kOwn) return;
  const float v = batch_sum([&](int row) { return s.dt[n * kBatch + row]; });
  if ((threadIdx.x & 31) == 0) step_bias(p, s.b_master[j * kOwn + n], s.b_mom[j * kOwn + n], v);
}

// W_4[:, own] and (block 0) b_4, from the gradients the output stage kept, once every block has
// read them for its logits.
template <class S>
__device__ void apply_output_update(const Params& p, const S& s) {
  const int r = blockIdx.x;
  if (threadIdx.x < kClasses * kOwn) {
    const int i = threadIdx.x;
    s.w4_mom[i] = p.momentum * s.w4_mom[i] + s.w4_grad[i];
    s.w4[i] -= p.lr * s.w4_mom[i];
    p.w[kHidden + 1][(i / kOwn) * kIn + r * kOwn + i % kOwn] = __float2bfloat16_rn(s.w4[i]);
  } else if (r == 0 && threadIdx.x < kClasses * kOwn + kClasses) {
    const int c = threadIdx.x - kClasses * kOwn;
    s.b4_mom[c] = p.momentum * s.b4_mom[c] + s.b4_grad[c];
    s.b4[c] -= p.lr * s.b4_mom[c];
    p.bias[kHidden + 1][c] = s.b4[c];
  }
}

// The end of a stage's own 8 columns, shared by both kernels: thread i holds the sums of row i / 2,
// columns 4 (i % 2) .. +3. Forward: bias and ReLU into X_layer (global, for the next stage's
// readers) and its own transposed copy. Input gradient: relu'(X_layer) into D_layer and the fp32
// copy the bias gradient sums.
template <bool kForward, class S>
__device__ __forceinline__ void finish_own(const Params& p, const S& s, int layer, const float (&sum)[4]) {
  const int row = threadIdx.x >> 1, h = threadIdx.x & 1;
  bf16 out[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int n = 4 * h + j;
    bf16& own = s.xt_of(layer)[n * kXtStride + row];
    if (kForward) {
      out[j] = __float2bfloat16_rn(fmaxf(sum[j] + s.b_master[(layer - 1) * kOwn + n], 0.0f));
      own = out[j];
    } else {
      out[j] = __float2bfloat16_rn(__bfloat162float(own) > 0.0f ? sum[j] : 0.0f);
      s.dt[n * kBatch + row] = __bfloat162float(out[j]);
    }
  }
  bf16* dst = kForward ? p.x[layer] : p.d[layer];
  *reinterpret_cast<uint2*>(dst + row * kWidth + blockIdx.x * kOwn + 4 * h) = *reinterpret_cast<const uint2*>(out);
}

// b_4 into shared memory (s.b4_live) with the output stage's other cp.async copies (held in
// registers, the values measured a 1.6 us stall: the struct that carried them went to local memory).
template <class S>
__device__ __forceinline__ void copy_b4(const Params& p, const S& s) {
  static_assert(kClasses * 4 <= 48, "b_4 in three 16-byte copies");
  if (threadIdx.x < 3) cp16(s.b4_live + 4 * threadIdx.x, p.bias[kHidden + 1] + 4 * threadIdx.x);
}

// The output layer after its logits: softmax cross-entropy, dlogits, the step's loss (block 0),
// D_3[:, own], the gradients of W_4[:, own] and b_4 (applied in the next stage, once every block
// has read W_4), and b_3[own]'s update. logit_of(row, c): the product's logit, without the bias;
// label: row threadIdx.x's, fetched a step ahead with the batch's bytes (its two dependent loads
// stall the thread that issues them).
template <class S, class Logit>
__device__ void output_loss(const Params& p, const S& s, int step, int label, Logit&& logit_of) {
  const int r = blockIdx.x;
  if (threadIdx.x < kBatch) {
    const int row = threadIdx.x;
    float logit[kClasses], top = -INFINITY;
#pragma unroll
    for (int c = 0; c < kClasses; ++c) {
      logit[c] = logit_of(row, c) + s.b4_live[c];
      top = fmaxf(top, logit[c]);
    }
    float total = 0.0f;
#pragma unroll
    for (int c = 0; c < kClasses; ++c) total += expf(logit[c] - top);
    const float log_total = logf(total);
    s.row_loss[row] = log_total + top - logit[label];
#pragma unroll
    for (int c = 0; c < kClasses; ++c) {
      const float prob = expf(logit[c] - top - log_total);
      s.dl[row * kClasses + c] = (prob - (c == label ? 1.0f : 0.0f)) / kBatch;
    }
  }
  __syncthreads();
  mark_out(p, step, 2);
  if (r == 0 && threadIdx.x < 32) {
    const float total = batch_sum([&](int row) { return s.row_loss[row]; });
    if (threadIdx.x == 0) p.losses[step] = total / kBatch;
  }
  // D_3[:, own] = (dlogits · bf16(W_4[:, own])) ⊙ relu'(X_3[:, own]).
  if (threadIdx.x < 2 * kBatch) {
    const int row = threadIdx.x >> 1, h = threadIdx.x & 1;
    float sum[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      sum[j] = 0.0f;
#pragma unroll
      for (int c = 0; c < kClasses; ++c) {
        sum[j] += s.dl[row * kClasses + c] * __bfloat162float(__float2bfloat16_rn(s.w4[c * kOwn + 4 * h + j]));
      }
    }
    finish_own<false>(p, s, kHidden, sum);
  }
  __syncthreads();
  mark_out(p, step, 3);
  // Sums over the batch: dW_4[c][own n] (80), b_3[own] (8), and on block 0 b_4 (10); two threads
  // an item, 64 rows each, the halves added by a shuffle (a fixed order).
  {
    const int item = threadIdx.x >> 1, half = threadIdx.x & 1, items = kClasses * kOwn + kOwn + kClasses;
    static_assert(2 * (kClasses * kOwn + kOwn + kClasses) <= kThreads, "two threads an item");
    float v = 0.0f;
    const int row0 = half * (kBatch / 2);
    if (item < kClasses * kOwn) {
      const int c = item / kOwn, n = item % kOwn;
      const bf16* x = s.xt_of(kHidden) + n * kXtStride;
#pragma unroll 8
      for (int row = row0; row < row0 + kBatch / 2; ++row) v += s.dl[row * kClasses + c] * __bfloat162float(x[row]);
    } else if (item < kClasses * kOwn + kOwn) {
      const int n = item - kClasses * kOwn;
#pragma unroll 8
      for (int row = row0; row < row0 + kBatch / 2; ++row) v += s.dt[n * kBatch + row];
    } else if (item < items) {
      const int c = item - kClasses * kOwn - kOwn;
#pragma unroll 8
      for (int row = row0; row < row0 + kBatch / 2; ++row) v += s.dl[row * kClasses + c];
    }
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    if (half == 0 && item < kClasses * kOwn) {
      s.w4_grad[item] = v;
    } else if (half == 0 && item < kClasses * kOwn + kOwn) {
      const int n = item - kClasses * kOwn;
      step_bias(p, s.b_master[(kHidden - 1) * kOwn + n], s.b_mom[(kHidden - 1) * kOwn + n], v);
    } else if (half == 0 && item < items && r == 0) {
      s.b4_grad[item - kClasses * kOwn - kOwn] = v;
    }
  }
}

// The batch's own 8 pixel columns, in two halves: fetch (row threadIdx.x's 8 bytes, issued early so
// the two dependent L2 trips overlap a stage) and store (normalised, into X_0 and the own copy).
struct OwnRow {
  uint2 bytes = make_uint2(0, 0);
  int label = 0;
};
__device__ __forceinline__ OwnRow fetch_own(const Params& p, int step) {
  const int b = threadIdx.x;
  OwnRow row;
  if (b >= kBatch || step >= p.steps) return row;
  const int sample = __ldg(p.order + step * kBatch + b);
  row.bytes = __ldg(reinterpret_cast<const uint2*>(p.images + static_cast<std::int64_t>(sample) * kIn + blockIdx.x * kOwn));
  row.label = __ldg(p.labels + sample);
  return row;
}

template <class S>
__device__ void store_own(const Params& p, const S& s, const OwnRow& own, int step) {
  const int r = blockIdx.x, b = threadIdx.x;
  if (b >= kBatch) return;
  const std::uint8_t* u = reinterpret_cast<const std::uint8_t*>(&own.bytes);
  bf16 v[kOwn];
#pragma unroll
  for (int n = 0; n < kOwn; ++n) {
    v[n] = __float2bfloat16_rn(static_cast<float>(u[n]) * p.scale + p.shift);
    s.xt_of(0)[n * kXtStride + b] = v[n];
  }
  *reinterpret_cast<uint4*>(input_of(p, step) + b * kWidth + r * kOwn) = *reinterpret_cast<const uint4*>(v);
}

template <class S>
__device__ int gather_own(const Params& p, const S& s, int step) {  // returns row threadIdx.x's label
  const OwnRow own = fetch_own(p, step);
  store_own(p, s, own, step);
  return own.label;
}

// v7a: the 8 warps' partial products of the block's 8 columns added in warp order, then finished
// (the caller's barrier has every warp past its tiles: the sums alias the ring).
template <bool kForward>
__device__ void finish_warps(const Params& p, const Smem& s, const float (&acc)[8][4], int layer) {
  float* red = reinterpret_cast<float*>(s.ring);
  store_warp_partials(red, acc);
  __syncthreads();
  const int row = threadIdx.x >> 1, h = threadIdx.x & 1;
  float sum[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) sum[j] = sum_warps(red, row, 4 * h + j, kOwn);
  finish_own<kForward>(p, s, layer, sum);
}

__device__ void forward(const Params& p, const Smem& s, int l, int step) {
  const int r = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int stage = l - 1;
  mark(p, step, stage, 0);
  // Stage the block's 8 weight rows, then the ring; wait for the rows only.
  for (int c = threadIdx.x; c < kOwn * (kIn / 8); c += kThreads) {
    const int n = c / (kIn / 8), k = (c % (kIn / 8)) * 8;
    cp16(s.ws + n * kWStride + k, p.w[l] + (r * kOwn + n) * kIn + k);
  }
  commit();
  float acc[8][4] = {};
  bool rows_ready = false;
  stream_tiles(below_of(p, l, step), s.ring_of(warp), [&](int tile, const std::uint8_t* slot) {
    if (!rows_ready) {  // the rows' group is the oldest: complete once the first tile's is
      __syncthreads();
      rows_ready = true;
      mark(p, step, stage, 1);
    }
    std::uint32_t b[2];
    ldsm_x2(b, s.ws + (lane & 7) * kWStride + tile * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
    for (int mt = 0; mt < 8; ++mt) {
      std::uint32_t a[4];
      tile_a(a, slot, mt * 16);
      mma(acc[mt], a, b);
    }
  });
  mark(p, step, stage, 2);
  __syncthreads();
  finish_warps<true>(p, s, acc, l);
  mark(p, step, stage, 3);
}

__device__ void output_stage(const Params& p, const Smem& s, int step, int label) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  mark(p, step, 3, 0);
  copy_b4(p, s);
  for (int c = threadIdx.x; c < kClasses * (kIn / 8); c += kThreads) {
    const int n = c / (kIn / 8), k = (c % (kIn / 8)) * 8;
    cp16(s.ws + n * kWStride + k, p.w[kHidden + 1] + n * kIn + k);
  }
  commit();
  float acc[8][2][4] = {};
  bool rows_ready = false;
  stream_tiles(p.x[kHidden], s.ring_of(warp), [&](int tile, const std::uint8_t* slot) {
    if (!rows_ready) {
      __syncthreads();
      rows_ready = true;
      mark(p, step, 3, 1);
    }
    std::uint32_t bq[4];
    ldsm_x4(bq, s.ws + ((lane & 7) + ((lane >> 4) << 3)) * kWStride + tile * 16 + ((lane >> 3) & 1) * 8);
    const std::uint32_t b0[2] = {bq[0], bq[1]}, b1[2] = {bq[2], bq[3]};
#pragma unroll
    for (int mt = 0; mt < 8; ++mt) {
      std::uint32_t a[4];
      tile_a(a, slot, mt * 16);
      mma(acc[mt][0], a, b0);
      mma(acc[mt][1], a, b1);
    }
  });
  mark(p, step, 3, 2);
  __syncthreads();
  float* red = reinterpret_cast<float*>(s.ring);
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 8; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      float* at = red + (warp * kBatch + mt * 16 + g) * 16 + nt * 8 + 2 * t;
      *reinterpret_cast<float2*>(at) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
      *reinterpret_cast<float2*>(at + 8 * 16) = make_float2(acc[mt][nt][2], acc[mt][nt][3]);
    }
  }
  __syncthreads();
  output_loss(p, s, step, label, [&](int row, int c) { return sum_warps(red, row, c, 16); });
  mark(p, step, 3, 3);
}

// Layer l's backward: the input gradient D_{l-1}[:, own] (l > 1), dW_l[:, own] applied at once.
__device__ void backward(const Params& p, const Smem& s, int l, int step) {
  const int r = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int stage = kStages - l;
  mark(p, step, stage, 0);
  bool first = true;
  const int g = lane >> 2, t = lane & 3;
  if (l == kHidden) apply_output_update(p, s);
  // dW's B fragments: X_{l-1}[:, own] for the 8 k-steps over the batch.
  std::uint32_t xb[8][2];
#pragma unroll
  for (int kb = 0; kb < 8; ++kb) {
    ldsm_x2(xb[kb], s.xt_of(l - 1) + (lane & 7) * kXtStride + kb * 16 + ((lane >> 3) & 1) * 8);
  }
  float* master = s.master_of(l);
  float acc[8][4] = {};
  const bool input_grad = l > 1;
  stream_tiles(p.d[l], s.ring_of(warp), [&](int tile, const std::uint8_t* slot) {
    if (first) {
      mark(p, step, stage, 1);
      first = false;
    }
    const int o0 = tile * 16;
    float4* mom_at = p.mom[l] + (r * kTiles + tile) * 32 + lane;
    float4 mom = __ldcg(mom_at);
    if (input_grad) {
      std::uint32_t b[2];
      const float2 lo = *reinterpret_cast<const float2*>(master + g * kMasterStride + o0 + 2 * t);
      const float2 hi = *reinterpret_cast<const float2*>(master + g * kMasterStride + o0 + 2 * t + 8);
      b[0] = pack(lo.x, lo.y);
      b[1] = pack(hi.x, hi.y);
#pragma unroll
      for (int mt = 0; mt < 8; ++mt) {
        std::uint32_t a[4];
        tile_a(a, slot, mt * 16);
        mma(acc[mt], a, b);
      }
    }
    float dw[4] = {};
#pragma unroll
    for (int kb = 0; kb < 8; ++kb) {
      std::uint32_t a[4];
      tile_a_trans(a, slot, kb * 16);
      mma(dw, a, xb[kb]);
    }
    __syncwarp();  // every lane's B fragment (the old weights) is read before any is updated
    float* m = &mom.x;
    bf16 fresh[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int o = o0 + g + (q >> 1) * 8, n = 2 * t + (q & 1);
      float& w = master[n * kMasterStride + o];
      m[q] = p.momentum * m[q] + dw[q];
      w -= p.lr * m[q];
      fresh[q] = __float2bfloat16_rn(w);
    }
    __stcg(mom_at, mom);
    bf16* row = p.w[l] + (o0 + g) * kIn + r * kOwn + 2 * t;
    *reinterpret_cast<__nv_bfloat162*>(row) = __halves2bfloat162(fresh[0], fresh[1]);
    *reinterpret_cast<__nv_bfloat162*>(row + 8 * kIn) = __halves2bfloat162(fresh[2], fresh[3]);
  });
  mark(p, step, stage, 2);
  __syncthreads();
  if (!input_grad) {
    mark(p, step, stage, 3);
    return;
  }
  finish_warps<false>(p, s, acc, l - 1);
  __syncthreads();
  apply_bias(p, s, l - 2);  // b_{l-1}[own]
  mark(p, step, stage, 3);
}

// W_4[:, own], b_1..b_3[own] and (every block's copy of) b_4 from the global master, momentum zero.
template <class S>
__device__ void load_own_state(const Params& p, const S& s) {
  const int r = blockIdx.x;
  for (int i = threadIdx.x; i < kClasses * kOwn; i += blockDim.x) {
    s.w4[i] = p.master[kHidden + 1][(i / kOwn) * kIn + r * kOwn + i % kOwn];
    s.w4_mom[i] = 0.0f;
  }
  for (int i = threadIdx.x; i < kHidden * kOwn; i += blockDim.x) {
    s.b_master[i] = p.bias[1 + i / kOwn][r * kOwn + i % kOwn];
    s.b_mom[i] = 0.0f;
  }
  if (threadIdx.x < kClasses) {
    s.b4[threadIdx.x] = p.bias[kHidden + 1][threadIdx.x];
    s.b4_mom[threadIdx.x] = 0.0f;
  }
}

// The epoch's end: W_4[:, own] and b_1..b_3[own] back to the global master (b_4 is there already).
template <class S>
__device__ void store_own_state(const Params& p, const S& s) {
  const int r = blockIdx.x;
  for (int i = threadIdx.x; i < kClasses * kOwn; i += blockDim.x) {
    p.master[kHidden + 1][(i / kOwn) * kIn + r * kOwn + i % kOwn] = s.w4[i];
  }
  for (int i = threadIdx.x; i < kHidden * kOwn; i += blockDim.x) p.bias[1 + i / kOwn][r * kOwn + i % kOwn] = s.b_master[i];
}

// The epoch's steps, the same for both kernels: the first batch, then each step's forward stages,
// output stage and backward stages, each ended by the grid barrier (LAB_NO_BARRIER: by a block
// barrier); the next batch is fetched as the last backward stage starts and stored when it ends.
template <class S, class Forward, class Output, class Backward>
__device__ void run_steps(const Params& p, const S& s, Forward&& forward, Output&& output, Backward&& backward) {
  int label = gather_own(p, s, 0);  // row threadIdx.x's label of the step's batch
#if LAB_NO_BARRIER
  struct {
    __device__ void sync() { __syncthreads(); }
  } barrier;
#else
  sprintnet::cuda::GridBarrier barrier(p.barrier, p.clock, p.clock_capacity);
#endif
  barrier.sync();
  for (int step = 0; step < p.steps; ++step) {
    for (int l = 1; l <= kHidden; ++l) {
      forward(l, step);
      barrier.sync();
    }
    output(step, label);
    barrier.sync();
    for (int l = kHidden; l >= 1; --l) {
      const OwnRow next = l == 1 ? fetch_own(p, step + 1) : OwnRow{};  // lands during the stage
      backward(l, step);
      if (l == 1 && step + 1 < p.steps) {
        __syncthreads();  // X_0's own columns are read (dW_1's fragments) before the next batch lands
        store_own(p, s, next, step + 1);
        label = next.label;
      }
      barrier.sync();
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1) resident_epoch(Params p) {
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  const Smem s(smem_raw);
  const int r = blockIdx.x;
  // Resident state: W_l[:, own] (l = 1..3) transposed, W_4[:, own], b_l[own]; W_4's padding rows zero.
  for (int l = 1; l <= kHidden; ++l) {
    for (int i = threadIdx.x; i < kOwn * kWidth; i += kThreads) {
      const int o = i / kOwn, n = i % kOwn;
      s.master_of(l)[n * kMasterStride + o] = p.master[l][o * kIn + r * kOwn + n];
    }
  }
  load_own_state(p, s);
  for (int i = threadIdx.x; i < (16 - kClasses) * kWStride; i += kThreads) s.ws[kClasses * kWStride + i] = bf16(0.0f);
  run_steps(
      p, s, [&](int l, int step) { forward(p, s, l, step); },
      [&](int step, int label) { output_stage(p, s, step, label); }, [&](int l, int step) { backward(p, s, l, step); });
  for (int l = 1; l <= kHidden; ++l) {
    for (int i = threadIdx.x; i < kOwn * kWidth; i += kThreads) {
      const int o = i / kOwn, n = i % kOwn;
      p.master[l][o * kIn + r * kOwn + n] = s.master_of(l)[n * kMasterStride + o];
    }
  }
  store_own_state(p, s);
}


// ---- v7b: the k split over a cluster of 7 ----
//
// v7a's blocks each pull a whole 128 x 784 activation from L2 in every stage (200 KB an SM), and
// its per-stage trace says that stream, not the arithmetic, is the stage. v7b cuts what an SM pulls
// by 7: 14 clusters of 7 blocks; cluster c owns neurons 56c..56c+55 (its 7 blocks' own 8 each, as
// in v7a), and rank k of the cluster takes k (or o) range 112k..112k+111 of every product:
//   forward l:  partial X_l[:, cluster's 56] over inputs in the rank's range: X_{l-1}'s 128 x 112
//               slice (28 KB) and W_l's 56 x 112 tile (the bf16 copy); the 7 partials of each
//               block's own 8 columns are added by their owner over DSMEM, in rank order
//   output:     partial logits over the rank's range; every block adds all 7 (DSMEM) and runs
//               v7a's loss tail
//   backward l: partial D_{l-1}[:, cluster's 56] = D_l[:, range] · W_l[range, 56] (added like the
//               forward's), and dW_l[range, 56] = D_l[:, range]ᵀ · X_{l-1}[:, 56] applied at once
//               to the rank's fp32 master tile (112 x 56 = v7a's 784 x 8 parameters a block)
// A block pulls ~40-55 KB from L2 a stage (all in flight at once: no ring) and 24 KB over DSMEM,
// since v7g as bulk copies on each block's mbarrier (send_pieces / receive_pieces), the backward's
// sent before its weight-gradient products and received after them.
constexpr int kCluster = 7, kClusters = kBlocks / kCluster;  // 14
constexpr int kSpan = kCluster * kOwn;                        // 56 neurons a cluster
constexpr int kRange = kWidth / kCluster;                     // 112: a rank's share of k (or o)
constexpr int kRangeTiles = kRange / 16;                      // 7
constexpr int kSpanTiles = kSpan / 8;                         // 7 n-tiles
constexpr int kGradTiles = kRangeTiles * kSpanTiles;          // 49 weight-gradient tiles of 16 x 8
// Warps a block (LAB_SPLIT_WARPS, 8 or 16): with 16, two warps share each 16-row m-tile of the
// products, one its n-tiles 0-3, the other 4-6, and the 49 weight-gradient tiles go 3-4 a warp
// (128 registers a thread). Measured slower (H100: 19.85-20.01 against 19.16-19.28 ms an epoch),
// so 8 stays the default.
#ifndef LAB_SPLIT_WARPS
#define LAB_SPLIT_WARPS 8
#endif
constexpr int kSplitWarps = LAB_SPLIT_WARPS, kSplitThreads = 32 * kSplitWarps;
static_assert(kSplitWarps == 8 || kSplitWarps == 16, "a warp (or two) an m-tile");
constexpr int kGradTilesPerWarp = (kGradTiles + kSplitWarps - 1) / kSplitWarps;
constexpr int kTileStride = kRange + 8;                       // MT's floats a row, WT's bf16 a row
static_assert(kRange % 16 == 0 && kCluster * kRange == kWidth && kClusters * kCluster == kBlocks, "7 ranks of whole tiles");

constexpr int kSliceOff = 0;
constexpr int kSliceBytes = kRangeTiles * kTileBytes;                        // 28 KB
constexpr int kWtOff = kSliceOff + kSliceBytes;
constexpr int kWtBytes = kSpan * kTileStride * 2;                            // 13 KB (16 rows in the output stage)
constexpr int kXcOff = kWtOff + kWtBytes;
constexpr int kXcBytes = kBatch * kSpan * 2;                                 // 14 KB: X_{l-1}[:, cluster's 56]
constexpr int kRecvOff = kXcOff + kXcBytes;
constexpr int kRecvBytes = kCluster * kBatch * kOwn * 4;                     // 28 KB: [source][128][8]
constexpr int kPartOff = kRecvOff + kRecvBytes;
constexpr int kPartBytes = kCluster * kBatch * kOwn * 4;                     // 28 KB: [owner][128][8], sent
constexpr int kTileMasterOff = kPartOff + kPartBytes;
constexpr int kTileMasterBytes = kHidden * kSpan * kTileStride * 4;          // 79 KB: [layer][56][120]
constexpr int kXt2Off = kTileMasterOff + kTileMasterBytes;
constexpr int kLogitOff = kXt2Off + kXtBytes;
constexpr int kLogitBytes = kBatch * 16 * 4;
constexpr int kDl2Off = kLogitOff + kLogitBytes;
constexpr int kDt2Off = kDl2Off + kDlBytes;
constexpr int kSmall2Off = kDt2Off + kDtBytes;
constexpr int kBarOff = kSmall2Off + kSmallFloats * 4;                      // the exchange's mbarrier
constexpr int kSplitSmemBytes = kBarOff + 8;
static_assert(kSplitSmemBytes <= 227 * 1024, "one block an SM");
static_assert(kBatch * kClasses * 4 <= kPartBytes, "the partial logits fit the partials' buffer");
static_assert(kCluster * kBatch * kClasses * 4 <= kXcBytes + kRecvBytes && kRecvOff == kXcOff + kXcBytes,
              "the 7 ranks' partial logits land over XC and the receive buffer");
static_assert(16 * kTileStride * 2 <= kWtBytes, "W_4's 16 padded rows fit W's tile");

struct SplitSmem : OwnState {
  std::uint8_t* slice;  // 7 swizzled 128 x 16 tiles: the rank's columns of X_{l-1} or D_l
  bf16* wt;             // [56 or 16][kTileStride]: W_l[cluster's 56, range] (forward), W_4[:, range]
  bf16* xc;             // [128][56]: X_{l-1}[:, cluster's 56] (backward)
  float* recv;          // [source rank][128][8]: the partial sums of this block's own 8 columns
  float* part;          // [owner rank][128][8]: this block's partial sums, sent; or [128][10] logits
  std::uint64_t* bar;   // completes when the 7 ranks' copies of a stage have landed
  float* master;        // [layer 1..3][56][kTileStride]: W_l[range, cluster's 56] transposed
  float* logit;         // [128][16]: the summed logits
  __device__ explicit SplitSmem(std::uint8_t* s) : OwnState(s, kXt2Off, kDl2Off, kDt2Off, kSmall2Off) {
    slice = s + kSliceOff;
    wt = reinterpret_cast<bf16*>(s + kWtOff);
    xc = reinterpret_cast<bf16*>(s + kXcOff);
    recv = reinterpret_cast<float*>(s + kRecvOff);
    part = reinterpret_cast<float*>(s + kPartOff);
    bar = reinterpret_cast<std::uint64_t*>(s + kBarOff);
    master = reinterpret_cast<float*>(s + kTileMasterOff);
    logit = reinterpret_cast<float*>(s + kLogitOff);
  }
  __device__ float* master_of(int l) const { return master + (l - 1) * kSpan * kTileStride; }
};

__device__ __forceinline__ int cluster_rank() { return static_cast<int>(blockIdx.x) % kCluster; }
__device__ __forceinline__ int cluster_index() { return static_cast<int>(blockIdx.x) / kCluster; }
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
__device__ __forceinline__ void ldsm_x2_trans(std::uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_u32(p)));
}

// src[:, 112k .. 112k+111] into the slice's 7 tiles: a thread's 7 copies share its row and half.
__device__ __forceinline__ void load_slice(const bf16* src, std::uint8_t* slice, int k) {
  if (threadIdx.x >= 2 * kBatch) return;
  const int row = threadIdx.x >> 1, half = threadIdx.x & 1;
#pragma unroll
  for (int tile = 0; tile < kRangeTiles; ++tile) {
    cp16(slice + tile * kTileBytes + slot_offset(row, half), src + row * kWidth + k * kRange + tile * 16 + half * 8);
  }
}

// W[row0 .. row0 + rows - 1, the rank's range] of a row-major [..][kIn] bf16 matrix into wt.
__device__ __forceinline__ void load_weight_tile(const bf16* w, int row0, int rows, bf16* wt, int k) {
  for (int q = threadIdx.x; q < rows * (kRange / 8); q += blockDim.x) {
    const int n = q / (kRange / 8), j = q % (kRange / 8);
    cp16(wt + n * kTileStride + j * 8, w + (row0 + n) * kIn + k * kRange + j * 8);
  }
}

// This warp's m-tile (16 rows) of a product, and which of the cluster's 7 n-tiles it takes.
__device__ __forceinline__ int my_mtile() { return (threadIdx.x >> 5) & 7; }

// part[owner][rows][8] += this warp's 16 rows of the slice · B(n-tile), for n-tiles kFirst ..
// kFirst + kCount - 1, over the slice's 7 k-steps; b_of(ks, nt, b) loads B's fragment. The sums go
// to part by owner (n-tile nt belongs to rank nt), to be sent.
template <int kFirst, int kCount, class BFragment>
__device__ __forceinline__ void slice_product(const SplitSmem& s, float* part, BFragment&& b_of) {
  const int m0 = my_mtile() * 16, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  float acc[kCount][4] = {};
#pragma unroll
  for (int ks = 0; ks < kRangeTiles; ++ks) {
    std::uint32_t a[4];
    tile_a(a, s.slice + ks * kTileBytes, m0);
#pragma unroll
    for (int j = 0; j < kCount; ++j) {
      std::uint32_t b[2];
      b_of(ks, kFirst + j, b);
      mma(acc[j], a, b);
    }
  }
#pragma unroll
  for (int j = 0; j < kCount; ++j) {
    float* at = part + ((kFirst + j) * kBatch + m0 + g) * kOwn + 2 * t;
    *reinterpret_cast<float2*>(at) = make_float2(acc[j][0], acc[j][1]);
    *reinterpret_cast<float2*>(at + 8 * kOwn) = make_float2(acc[j][2], acc[j][3]);
  }
}

// The slice product over this warp's share of the n-tiles: all 7 (8 warps), or 0-3 / 4-6 (16).
template <class BFragment>
__device__ __forceinline__ void slice_product_to_part(const SplitSmem& s, BFragment&& b_of) {
  if (kSplitWarps == 8) {
    slice_product<0, kSpanTiles>(s, s.part, b_of);
  } else if ((threadIdx.x >> 5) < 8) {
    slice_product<0, 4>(s, s.part, b_of);
  } else {
    slice_product<4, kSpanTiles - 4>(s, s.part, b_of);
  }
}

// The exchange (v7g): a block's pieces go to the 7 ranks (itself included) by one bulk copy each
// (cp.async.bulk, the TMA engine's DSMEM path), completing on the destination's mbarrier, which
// its block waits on: no cluster barrier, no generic remote loads or stores (v7f's measured
// ~12-17 GB/s an SM). A stage's copies can only start after every block has arrived at the grid
// barrier that ends the previous stage, so an mbarrier phase never holds two stages' bytes and no
// copy lands in a buffer its block still reads; the sources are read before their receivers'
// waits end, so before the next grid barrier.
__device__ __forceinline__ std::uint32_t in_rank(std::uint32_t address, int rank) {
  std::uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
  return remote;
}
__device__ __forceinline__ void init_exchange(const SplitSmem& s) {
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(s.bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // published by the next cluster barrier
  }
}
// The whole block calls it once its pieces are written: piece q (bytes long, at source + q * stride)
// goes to rank q, at dest + rank * bytes there (dest: a local address, mapped into rank q). The
// block's own piece is copied by its threads (memcheck rejects a bulk copy to the block itself as
// "not located in remote CTA"); the 6 others by one bulk copy each.
__device__ __forceinline__ void send_pieces(const SplitSmem& s, const void* source, int stride, const void* dest, int bytes) {
  const int k = cluster_rank();
  __syncthreads();  // the pieces are written
  {
    const float4* from = reinterpret_cast<const float4*>(static_cast<const char*>(source) + k * stride);
    float4* to = reinterpret_cast<float4*>(static_cast<char*>(const_cast<void*>(dest)) + k * bytes);
    for (int i = threadIdx.x; i < bytes / 16; i += blockDim.x) to[i] = from[i];
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // this thread's writes, before the copies read them
  __syncthreads();
  if (threadIdx.x >= kCluster - 1) return;
  const int q = static_cast<int>(threadIdx.x) >= k ? static_cast<int>(threadIdx.x) + 1 : static_cast<int>(threadIdx.x);
  const std::uint32_t from = smem_u32(source) + q * stride;
  const std::uint32_t to = in_rank(smem_u32(dest) + k * bytes, q);
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(to),
               "r"(from), "r"(bytes), "r"(in_rank(smem_u32(s.bar), q))
               : "memory");
}
// The whole block waits for the 6 other ranks' pieces (bytes each) of this stage.
__device__ __forceinline__ void receive_pieces(const SplitSmem& s, int bytes, std::uint32_t& phase) {
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(s.bar)),
                 "r"((kCluster - 1) * bytes)
                 : "memory");
  }
  asm volatile(
      "{\n .reg .pred done;\n wait:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra wait;\n}" ::"r"(smem_u32(s.bar)),
      "r"(phase)
      : "memory");
  phase ^= 1u;
}

// This block's own 8 columns, the 7 ranks' partials (recv) added in rank order: thread i takes
// row i / 2, columns 4 (i % 2) .. +3.
__device__ __forceinline__ float4 sum_ranks(const float* recv) {
  const int row = threadIdx.x >> 1, h = threadIdx.x & 1;
  float4 v[kCluster];
#pragma unroll
  for (int q = 0; q < kCluster; ++q) v[q] = *reinterpret_cast<const float4*>(recv + (q * kBatch + row) * kOwn + 4 * h);
  float4 sum = v[0];
#pragma unroll
  for (int q = 1; q < kCluster; ++q) {
    sum.x += v[q].x;
    sum.y += v[q].y;
    sum.z += v[q].z;
    sum.w += v[q].w;
  }
  return sum;
}

__device__ void split_forward(const Params& p, const SplitSmem& s, int l, int step, std::uint32_t& phase) {
  const int c = cluster_index(), k = cluster_rank();
  const int lane = threadIdx.x & 31;
  const int stage = l - 1;
  mark(p, step, stage, 0);
  load_weight_tile(p.w[l], c * kSpan, kSpan, s.wt, k);
  load_slice(below_of(p, l, step), s.slice, k);
  commit();
  wait_groups<0>();
  __syncthreads();
  mark(p, step, stage, 1);
  slice_product_to_part(s, [&](int ks, int nt, std::uint32_t(&b)[2]) {
    ldsm_x2(b, s.wt + (nt * 8 + (lane & 7)) * kTileStride + ks * 16 + ((lane >> 3) & 1) * 8);
  });
  mark(p, step, stage, 2);
  constexpr int kPiece = kBatch * kOwn * 4;
  send_pieces(s, s.part, kPiece, s.recv, kPiece);
  receive_pieces(s, kPiece, phase);
  if (threadIdx.x < 2 * kBatch) {
    const float4 v = sum_ranks(s.recv);
    finish_own<true>(p, s, l, {v.x, v.y, v.z, v.w});
  }
  mark(p, step, stage, 3);
}

__device__ void split_output(const Params& p, const SplitSmem& s, int step, int label, std::uint32_t& phase) {
  const int k = cluster_rank();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  mark(p, step, 3, 0);
  copy_b4(p, s);
  load_weight_tile(p.w[kHidden + 1], 0, kClasses, s.wt, k);
  for (int i = threadIdx.x; i < (16 - kClasses) * kTileStride; i += blockDim.x) s.wt[kClasses * kTileStride + i] = bf16(0.0f);
  load_slice(p.x[kHidden], s.slice, k);
  commit();
  wait_groups<0>();
  __syncthreads();
  mark(p, step, 3, 1);
  // The partial logits ([128][10]) to every rank, landing at [source][128][10] over XC and the
  // receive buffer (neither is used in this stage); the first 8 warps, a 16-row m-tile each.
  if (warp < 8) {
    float acc[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < kRangeTiles; ++ks) {
      std::uint32_t a[4], bq[4];
      tile_a(a, s.slice + ks * kTileBytes, warp * 16);
      ldsm_x4(bq, s.wt + ((lane & 7) + ((lane >> 4) << 3)) * kTileStride + ks * 16 + ((lane >> 3) & 1) * 8);
      const std::uint32_t b0[2] = {bq[0], bq[1]}, b1[2] = {bq[2], bq[3]};
      mma(acc[0], a, b0);
      mma(acc[1], a, b1);
    }
    float* at = s.part + (warp * 16 + g) * kClasses + 2 * t;
    *reinterpret_cast<float2*>(at) = make_float2(acc[0][0], acc[0][1]);
    *reinterpret_cast<float2*>(at + 8 * kClasses) = make_float2(acc[0][2], acc[0][3]);
    if (t == 0) {  // classes 8 and 9
      *reinterpret_cast<float2*>(at + 8) = make_float2(acc[1][0], acc[1][1]);
      *reinterpret_cast<float2*>(at + 8 * kClasses + 8) = make_float2(acc[1][2], acc[1][3]);
    }
  }
  mark(p, step, 3, 2);
  constexpr int kPiece = kBatch * kClasses * 4;
  float* logits_in = reinterpret_cast<float*>(s.xc);
  send_pieces(s, s.part, 0, logits_in, kPiece);  // the same piece to every rank
  receive_pieces(s, kPiece, phase);
  mark_out(p, step, 0);
  if (threadIdx.x < 2 * kBatch) {  // every block adds the 7 ranks' partial logits in rank order:
    // thread i, row i / 2, classes 5 (i % 2) ..
    const int row = threadIdx.x >> 1, h = threadIdx.x & 1;
#pragma unroll
    for (int j = 0; j < kClasses / 2; ++j) {
      const int cls = 5 * h + j;
      float v = logits_in[row * kClasses + cls];
#pragma unroll
      for (int q = 1; q < kCluster; ++q) v += logits_in[(q * kBatch + row) * kClasses + cls];
      s.logit[row * 16 + cls] = v;
    }
  }
  __syncthreads();
  mark_out(p, step, 1);
  output_loss(p, s, step, label, [&](int row, int cls) { return s.logit[row * 16 + cls]; });
  mark(p, step, 3, 3);
}

__device__ void split_backward(const Params& p, const SplitSmem& s, int l, int step, std::uint32_t& phase) {
  const int r = blockIdx.x, c = cluster_index(), k = cluster_rank();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int stage = kStages - l;
  const int in = l == 1 ? kIn : kWidth;
  mark(p, step, stage, 0);
  if (l == kHidden) apply_output_update(p, s);
  load_slice(p.d[l], s.slice, k);
  for (int q = threadIdx.x; q < kBatch * (kSpan / 8); q += blockDim.x) {  // X_{l-1}[:, cluster's 56]
    const int row = q / (kSpan / 8), j = q % (kSpan / 8);
    cp16(s.xc + row * kSpan + j * 8, below_of(p, l, step) + row * kWidth + c * kSpan + j * 8);
  }
  commit();
  // This warp's weight-gradient tiles (warp, warp + kSplitWarps, ...) and their momentum, a float4 a lane.
  float4 mom[kGradTilesPerWarp];
#pragma unroll
  for (int j = 0; j < kGradTilesPerWarp; ++j) {
    const int tile = warp + j * kSplitWarps;
    if (tile < kGradTiles) mom[j] = __ldcg(p.mom[l] + (r * kGradTiles + tile) * 32 + lane);
  }
  wait_groups<0>();
  __syncthreads();
  mark(p, step, stage, 1);
  float* master = s.master_of(l);
  const bool input_grad = l > 1;
  if (input_grad) {  // partial D_{l-1}[:, cluster's 56] over the rank's o range, from the old weights
    slice_product_to_part(s, [&](int ks, int nt, std::uint32_t(&b)[2]) {  // bf16 of the fp32 master
      const float* m = master + (nt * 8 + g) * kTileStride + ks * 16 + 2 * t;
      const float2 lo = *reinterpret_cast<const float2*>(m);
      const float2 hi = *reinterpret_cast<const float2*>(m + 8);
      b[0] = pack(lo.x, lo.y);
      b[1] = pack(hi.x, hi.y);
    });
  }
  constexpr int kPiece = kBatch * kOwn * 4;
  if (input_grad) {
    send_pieces(s, s.part, kPiece, s.recv, kPiece);  // its __syncthreads: every warp has read the old weights
  } else {
    __syncthreads();  // every warp has read the old weights before any is updated
  }
  // dW_l[range, cluster's 56] = D_l[:, range]ᵀ · X_{l-1}[:, 56], applied at once; the warp's tiles'
  // 8-step chains interleaved, so consecutive mma's are independent.
  // dW_l[range, cluster's 56] = D_l[:, range]ᵀ · X_{l-1}[:, 56], applied at once, a tile at a time
  // (interleaving the warp's 6-7 tiles' chains measured slower: 4.4 -> 5.5 us a stage).
#pragma unroll
  for (int j = 0; j < kGradTilesPerWarp; ++j) {
    const int tile = warp + j * kSplitWarps;
    if (tile >= kGradTiles) break;
    const int mo = tile / kSpanTiles, ni = tile % kSpanTiles;
    float dw[4] = {};
#pragma unroll
    for (int kb = 0; kb < kBatch / 16; ++kb) {
      std::uint32_t a[4], b[2];
      tile_a_trans(a, s.slice + mo * kTileBytes, kb * 16);
      ldsm_x2_trans(b, s.xc + (kb * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kSpan + ni * 8);
      mma(dw, a, b);
    }
    float* mq = &mom[j].x;
    bf16 fresh[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int o = mo * 16 + g + (q >> 1) * 8, i = ni * 8 + 2 * t + (q & 1);
      float& w = master[i * kTileStride + o];
      mq[q] = p.momentum * mq[q] + dw[q];
      w -= p.lr * mq[q];
      fresh[q] = __float2bfloat16_rn(w);
    }
    __stcg(p.mom[l] + (r * kGradTiles + tile) * 32 + lane, mom[j]);
    bf16* row = p.w[l] + (k * kRange + mo * 16 + g) * in + c * kSpan + ni * 8 + 2 * t;
    *reinterpret_cast<__nv_bfloat162*>(row) = __halves2bfloat162(fresh[0], fresh[1]);
    *reinterpret_cast<__nv_bfloat162*>(row + 8 * in) = __halves2bfloat162(fresh[2], fresh[3]);
  }
  mark(p, step, stage, 2);
  if (input_grad) {
    receive_pieces(s, kPiece, phase);
    if (threadIdx.x < 2 * kBatch) {
      const float4 v = sum_ranks(s.recv);
      finish_own<false>(p, s, l - 1, {v.x, v.y, v.z, v.w});
    }
    __syncthreads();
    apply_bias(p, s, l - 2);  // b_{l-1}[own]
  }
  mark(p, step, stage, 3);
}

__global__ void __launch_bounds__(kSplitThreads, 1) split_epoch(Params p) {
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  const SplitSmem s(smem_raw);
  const int c = cluster_index(), k = cluster_rank();
  for (int l = 1; l <= kHidden; ++l) {  // W_l[range, cluster's 56], transposed
    const int in = l == 1 ? kIn : kWidth;
    for (int i = threadIdx.x; i < kSpan * kRange; i += blockDim.x) {
      const int o = i / kSpan, n = i % kSpan;
      s.master_of(l)[n * kTileStride + o] = p.master[l][(k * kRange + o) * in + c * kSpan + n];
    }
  }
  load_own_state(p, s);
  init_exchange(s);
  std::uint32_t phase = 0;  // the parity the exchange's mbarrier completes next
  // Every block of the cluster has started, and its mbarrier is initialised, before any copy into
  // another's shared memory (the grid barrier implies the first, but only a cluster barrier says so
  // to compute-sanitizer, and publishes the second).
  cluster_arrive();
  cluster_wait();
  run_steps(
      p, s, [&](int l, int step) { split_forward(p, s, l, step, phase); },
      [&](int step, int label) { split_output(p, s, step, label, phase); },
      [&](int l, int step) { split_backward(p, s, l, step, phase); });
  for (int l = 1; l <= kHidden; ++l) {
    const int in = l == 1 ? kIn : kWidth;
    for (int i = threadIdx.x; i < kSpan * kRange; i += blockDim.x) {
      const int o = i / kSpan, n = i % kSpan;
      p.master[l][(k * kRange + o) * in + c * kSpan + n] = s.master_of(l)[n * kTileStride + o];
    }
  }
  store_own_state(p, s);
  cluster_arrive();  // no block leaves while another may still read its shared memory
  cluster_wait();
}

// ---- host: CPU reference, validation, timing ----

float bf16_round(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

struct Model {
  std::vector<float> w[kHidden + 2], b[kHidden + 2];
  static int in_of(int l) { return l == 1 ? kIn : kWidth; }
  static int out_of(int l) { return l == kHidden + 1 ? kClasses : kWidth; }
};

// The kernel's arithmetic on the CPU: bf16 operands, fp32 sums, bf16 activations and gradients.
void reference_steps(Model& m, const std::vector<std::uint8_t>& images, const std::vector<int>& labels,
                     const std::vector<int>& order, int steps, float scale, float shift, float lr, float mu,
                     std::vector<float>& losses) {
  std::vector<float> mw[kHidden + 2], mb[kHidden + 2];
  for (int l = 1; l <= kHidden + 1; ++l) {
    mw[l].assign(m.w[l].size(), 0.0f);
    mb[l].assign(m.b[l].size(), 0.0f);
  }
  for (int step = 0; step < steps; ++step) {
    std::vector<float> x[kHidden + 1], d[kHidden + 1], wq[kHidden + 2];
    for (int l = 1; l <= kHidden + 1; ++l) {
      wq[l].resize(m.w[l].size());
      for (std::size_t i = 0; i < wq[l].size(); ++i) wq[l][i] = bf16_round(m.w[l][i]);
    }
    x[0].resize(kBatch * kIn);
    for (int b = 0; b < kBatch; ++b) {
      const int sample = order[step * kBatch + b];
      for (int k = 0; k < kIn; ++k) x[0][b * kIn + k] = bf16_round(images[sample * kIn + k] * scale + shift);
    }
    for (int l = 1; l <= kHidden; ++l) {
      const int in = Model::in_of(l);
      x[l].resize(kBatch * kWidth);
      for (int b = 0; b < kBatch; ++b) {
        for (int o = 0; o < kWidth; ++o) {
          float v = 0.0f;
          for (int k = 0; k < in; ++k) v += x[l - 1][b * in + k] * wq[l][o * in + k];
          x[l][b * kWidth + o] = bf16_round(std::max(v + m.b[l][o], 0.0f));
        }
      }
    }
    std::vector<float> dl(kBatch * kClasses);
    double loss = 0.0;
    for (int b = 0; b < kBatch; ++b) {
      float logit[kClasses], top = -INFINITY;
      for (int c = 0; c < kClasses; ++c) {
        float v = 0.0f;
        for (int k = 0; k < kWidth; ++k) v += x[kHidden][b * kWidth + k] * wq[kHidden + 1][c * kWidth + k];
        logit[c] = v + m.b[kHidden + 1][c];
        top = std::max(top, logit[c]);
      }
      float total = 0.0f;
      for (float v : logit) total += std::exp(v - top);
      const int label = labels[order[step * kBatch + b]];
      loss += std::log(total) + top - logit[label];
      for (int c = 0; c < kClasses; ++c) {
        dl[b * kClasses + c] = (std::exp(logit[c] - top - std::log(total)) - (c == label ? 1.0f : 0.0f)) / kBatch;
      }
    }
    losses.push_back(static_cast<float>(loss / kBatch));
    // Gradients, all from the step's weights.
    std::vector<float> gw[kHidden + 2], gb[kHidden + 2];
    d[kHidden].resize(kBatch * kWidth);
    for (int b = 0; b < kBatch; ++b) {
      for (int k = 0; k < kWidth; ++k) {
        float v = 0.0f;
        for (int c = 0; c < kClasses; ++c) v += dl[b * kClasses + c] * wq[kHidden + 1][c * kWidth + k];
        d[kHidden][b * kWidth + k] = x[kHidden][b * kWidth + k] > 0.0f ? bf16_round(v) : 0.0f;
      }
    }
    gw[kHidden + 1].assign(kClasses * kWidth, 0.0f);
    gb[kHidden + 1].assign(kClasses, 0.0f);
    for (int c = 0; c < kClasses; ++c) {
      for (int k = 0; k < kWidth; ++k) {
        float v = 0.0f;
        for (int b = 0; b < kBatch; ++b) v += dl[b * kClasses + c] * x[kHidden][b * kWidth + k];
        gw[kHidden + 1][c * kWidth + k] = v;
      }
      for (int b = 0; b < kBatch; ++b) gb[kHidden + 1][c] += dl[b * kClasses + c];
    }
    for (int l = kHidden; l >= 1; --l) {
      const int in = Model::in_of(l);
      gw[l].assign(kWidth * in, 0.0f);  // summed over the batch in row order; the loops keep k innermost
      for (int b = 0; b < kBatch; ++b) {
        for (int o = 0; o < kWidth; ++o) {
          const float dv = d[l][b * kWidth + o];
          for (int k = 0; k < in; ++k) gw[l][o * in + k] += dv * x[l - 1][b * in + k];
        }
      }
      gb[l].assign(kWidth, 0.0f);
      for (int o = 0; o < kWidth; ++o) {
        for (int b = 0; b < kBatch; ++b) gb[l][o] += d[l][b * kWidth + o];
      }
      if (l > 1) {
        d[l - 1].resize(kBatch * kWidth);
        std::vector<float> v(kWidth);
        for (int b = 0; b < kBatch; ++b) {
          std::fill(v.begin(), v.end(), 0.0f);
          for (int o = 0; o < kWidth; ++o) {
            const float dv = d[l][b * kWidth + o];
            for (int k = 0; k < kWidth; ++k) v[k] += dv * wq[l][o * kWidth + k];
          }
          for (int k = 0; k < kWidth; ++k) {
            d[l - 1][b * kWidth + k] = x[l - 1][b * kWidth + k] > 0.0f ? bf16_round(v[k]) : 0.0f;
          }
        }
      }
    }
    for (int l = 1; l <= kHidden + 1; ++l) {
      for (std::size_t i = 0; i < m.w[l].size(); ++i) {
        mw[l][i] = mu * mw[l][i] + gw[l][i];
        m.w[l][i] -= lr * mw[l][i];
      }
      for (std::size_t i = 0; i < m.b[l].size(); ++i) {
        mb[l][i] = mu * mb[l][i] + gb[l][i];
        m.b[l][i] -= lr * mb[l][i];
      }
    }
  }
}

// ‖(a - start) - (b - start)‖ / ‖b - start‖: how far the kernel's updates are from the reference's.
double delta_error(const std::vector<float>& start, const std::vector<float>& gpu, const std::vector<float>& cpu) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < start.size(); ++i) {
    const double dg = gpu[i] - start[i], dc = cpu[i] - start[i];
    if (!std::isfinite(dg)) return INFINITY;
    num += (dg - dc) * (dg - dc);
    den += dc * dc;
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

struct Device {
  Params p{};
  std::vector<void*> owned;
  template <typename T>
  T* alloc(std::size_t count) {
    void* q = nullptr;
    CHECK_CUDA(cudaMalloc(&q, count * sizeof(T)));
    owned.push_back(q);
    return static_cast<T*>(q);
  }
  ~Device() {
    for (void* q : owned) cudaFree(q);
  }
};

void upload_model(Device& dev, const Model& m) {
  for (int l = 1; l <= kHidden + 1; ++l) {
    std::vector<bf16> copy(m.w[l].size());
    for (std::size_t i = 0; i < copy.size(); ++i) copy[i] = __float2bfloat16_rn(m.w[l][i]);
    CHECK_CUDA(cudaMemcpy(dev.p.w[l], copy.data(), copy.size() * sizeof(bf16), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dev.p.master[l], m.w[l].data(), m.w[l].size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dev.p.bias[l], m.b[l].data(), m.b[l].size() * 4, cudaMemcpyHostToDevice));
    if (l <= kHidden) CHECK_CUDA(cudaMemset(dev.p.mom[l], 0, static_cast<std::size_t>(kWidth) * Model::in_of(l) * 4));
  }
  // Poison the activation and gradient buffers: an element the kernel reads unwritten is NaN.
  for (int l = 0; l <= kHidden; ++l) {
    CHECK_CUDA(cudaMemset(dev.p.x[l], 0xff, kBatch * kWidth * sizeof(bf16)));
    CHECK_CUDA(cudaMemset(dev.p.d[l], 0xff, kBatch * kWidth * sizeof(bf16)));
  }
  CHECK_CUDA(cudaMemset(dev.p.x0_odd, 0xff, kBatch * kWidth * sizeof(bf16)));
}

// LAB_KERNEL=split runs v7b (the k split over clusters of 7); otherwise v7a.
bool split_kernel() {
  const char* kernel = std::getenv("LAB_KERNEL");
  return kernel != nullptr && std::strcmp(kernel, "split") == 0;
}

float launch(Device& dev, int steps, cudaEvent_t start, cudaEvent_t stop) {
  dev.p.steps = steps;
  CHECK_CUDA(cudaMemset(dev.p.barrier, 0, 4));
  void* args[] = {&dev.p};
  CHECK_CUDA(cudaEventRecord(start));
  // LAB_BLOCKS=N (with LAB_NO_BARRIER): fewer blocks, each doing its usual stage work: how fast one
  // SM streams when fewer share L2.
  const char* blocks = std::getenv("LAB_BLOCKS");
  const int grid = blocks != nullptr ? std::atoi(blocks) : kBlocks;
  if (split_kernel()) {  // v7b: clusters of 7, co-resident (cooperative) for the grid barrier
    if (LAB_NO_BARRIER) {  // a block a stage ahead would land its pieces in a peer's current phase
      std::fprintf(stderr, "LAB_NO_BARRIER runs v7a only: the split kernel's exchange needs the grid barrier\n");
      std::exit(2);
    }
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(grid);
    config.blockDim = dim3(kSplitThreads);
    config.dynamicSmemBytes = kSplitSmemBytes;
    cudaLaunchAttribute attrs[2];
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim.x = kCluster;
    attrs[0].val.clusterDim.y = 1;
    attrs[0].val.clusterDim.z = 1;
    attrs[1].id = cudaLaunchAttributeCooperative;
    attrs[1].val.cooperative = 1;
    config.attrs = attrs;
    config.numAttrs = 2;
    CHECK_CUDA(cudaLaunchKernelEx(&config, split_epoch, dev.p));
  } else {
    CHECK_CUDA(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(resident_epoch), grid, kThreads, args, kSmemBytes));
  }
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

int main(int argc, char** argv) {
  // resident_epoch [check steps, default 3] [check: stop after the check]
  const int steps_per_epoch = 468, check_steps = argc > 1 ? std::atoi(argv[1]) : 3;
  const int samples = steps_per_epoch * kBatch;
  const float lr = 0.05f, mu = 0.9f, scale = 1.0f / (255.0f * 0.3081f), shift = -0.1307f / 0.3081f;
  std::mt19937 rng(1234);
  // Random images with class-dependent brightness so the loss moves; random labels.
  std::vector<std::uint8_t> images(static_cast<std::size_t>(samples) * kIn);
  std::vector<int> labels(samples), order(samples);
  for (int i = 0; i < samples; ++i) labels[i] = static_cast<int>(rng() % kClasses);
  for (int i = 0; i < samples; ++i) {
    for (int k = 0; k < kIn; ++k) {
      const bool lit = (k / 78) == labels[i] ? rng() % 2 == 0 : rng() % 8 == 0;
      images[static_cast<std::size_t>(i) * kIn + k] = lit ? static_cast<std::uint8_t>(128 + rng() % 128) : 0;
    }
  }
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  Model model;
  for (int l = 1; l <= kHidden + 1; ++l) {
    const int in = Model::in_of(l), out = Model::out_of(l);
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    std::uniform_real_distribution<float> u(-bound, bound);
    model.w[l].resize(static_cast<std::size_t>(out) * in);
    model.b[l].resize(out);
    for (float& v : model.w[l]) v = u(rng);
    for (float& v : model.b[l]) v = u(rng);
  }

  Device dev;
  Params& p = dev.p;
  p.images = dev.alloc<std::uint8_t>(images.size());
  p.labels = dev.alloc<std::int32_t>(samples);
  p.order = dev.alloc<std::int32_t>(samples);
  CHECK_CUDA(cudaMemcpy(const_cast<std::uint8_t*>(p.images), images.data(), images.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(const_cast<std::int32_t*>(p.labels), labels.data(), samples * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(const_cast<std::int32_t*>(p.order), order.data(), samples * 4, cudaMemcpyHostToDevice));
  p.scale = scale;
  p.shift = shift;
  p.lr = lr;
  p.momentum = mu;
  for (int l = 0; l <= kHidden; ++l) {
    p.x[l] = dev.alloc<bf16>(kBatch * kWidth);
    p.d[l] = dev.alloc<bf16>(kBatch * kWidth);
  }
  p.x0_odd = dev.alloc<bf16>(kBatch * kWidth);
  for (int l = 1; l <= kHidden + 1; ++l) {
    const std::size_t n = static_cast<std::size_t>(Model::out_of(l)) * Model::in_of(l);
    p.w[l] = dev.alloc<bf16>(n);
    p.master[l] = dev.alloc<float>(n);
    p.bias[l] = dev.alloc<float>(std::max(Model::out_of(l), 16));  // b_4 is read in 16-byte pieces
    if (l <= kHidden) p.mom[l] = dev.alloc<float4>(n / 4);
  }
  p.barrier = dev.alloc<unsigned>(1);
  p.losses = dev.alloc<float>(steps_per_epoch);
  CHECK_CUDA(cudaFuncSetAttribute(resident_epoch, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  CHECK_CUDA(cudaFuncSetAttribute(split_epoch, cudaFuncAttributeMaxDynamicSharedMemorySize, kSplitSmemBytes));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("resident_epoch (%s): %s, %d blocks x %d threads, %d B shared memory a block\n",
              split_kernel() ? "v7b, k split over clusters of 7" : "v7a", prop.name, kBlocks,
              split_kernel() ? kSplitThreads : kThreads,
              split_kernel() ? kSplitSmemBytes : kSmemBytes);

  // 1. Correctness: check_steps steps against the CPU reference.
  upload_model(dev, model);
  launch(dev, check_steps, start, stop);
  Model gpu = model, cpu = model;
  for (int l = 1; l <= kHidden + 1; ++l) {
    CHECK_CUDA(cudaMemcpy(gpu.w[l].data(), p.master[l], gpu.w[l].size() * 4, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(gpu.b[l].data(), p.bias[l], gpu.b[l].size() * 4, cudaMemcpyDeviceToHost));
  }
  std::vector<float> gpu_losses(check_steps), cpu_losses;
  CHECK_CUDA(cudaMemcpy(gpu_losses.data(), p.losses, check_steps * 4, cudaMemcpyDeviceToHost));
  reference_steps(cpu, images, labels, order, check_steps, scale, shift, lr, mu, cpu_losses);
  // Tolerances: both sides use the same bf16 operands and fp32 sums in another order (~1e-6
  // relative); what differs is where a bf16 rounding of an activation or gradient falls the other
  // way (one bf16 ulp, 2^-8, on a few elements), which moves the next products by ~1e-3 of a step's
  // update. 2 % of the update's norm and 1e-3 of the loss leave room for that and for nothing else
  // (a wrong tile, lane or order shows as O(1)).
  bool ok = true;
  for (int s = 0; s < check_steps; ++s) {
    const double rel = std::fabs(gpu_losses[s] - cpu_losses[s]) / std::fabs(cpu_losses[s]);
    std::printf("step %d loss gpu %.6f cpu %.6f rel %.2e\n", s, gpu_losses[s], cpu_losses[s], rel);
    ok = ok && rel < 1e-3;
  }
  for (int l = 1; l <= kHidden + 1; ++l) {
    const double ew = delta_error(model.w[l], gpu.w[l], cpu.w[l]);
    const double eb = delta_error(model.b[l], gpu.b[l], cpu.b[l]);
    std::printf("layer %d: update error weights %.2e bias %.2e\n", l, ew, eb);
    ok = ok && ew < 2e-2 && eb < 2e-2;
  }
  // The bf16 copy the forwards read is the fp32 master rounded, element for element (a column or
  // row written to the wrong place would not show in the master).
  for (int l = 1; l <= kHidden + 1; ++l) {
    std::vector<bf16> copy(gpu.w[l].size());
    CHECK_CUDA(cudaMemcpy(copy.data(), p.w[l], copy.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < copy.size(); ++i) {
      wrong += __bfloat162float(copy[i]) != bf16_round(gpu.w[l][i]) ? 1 : 0;
    }
    if (wrong != 0) std::printf("layer %d: %zu elements of the bf16 copy are not the master rounded\n", l, wrong);
    ok = ok && wrong == 0;
  }
  std::printf("check: %s\n", ok ? "PASSED" : "FAILED");
  if (argc > 2 && std::strcmp(argv[2], "check") == 0) return ok ? 0 : 1;  // under compute-sanitizer

  // 2. Bit-identical reruns, then speed: whole epochs, one launch each.
  upload_model(dev, model);
  launch(dev, check_steps, start, stop);
  bool identical = true;
  for (int l = 1; l <= kHidden + 1; ++l) {
    const auto same = [&](const float* device, const std::vector<float>& first) {
      std::vector<float> again(first.size());
      CHECK_CUDA(cudaMemcpy(again.data(), device, again.size() * 4, cudaMemcpyDeviceToHost));
      return std::memcmp(again.data(), first.data(), again.size() * 4) == 0;
    };
    identical = identical && same(p.master[l], gpu.w[l]) && same(p.bias[l], gpu.b[l]);
  }
  std::printf("rerun bit-identical: %s\n", identical ? "yes" : "NO");
  ok = ok && identical;
  upload_model(dev, model);
  std::vector<float> epochs;
  for (int e = 0; e < 6; ++e) epochs.push_back(launch(dev, steps_per_epoch, start, stop));
  std::vector<float> losses(steps_per_epoch);
  CHECK_CUDA(cudaMemcpy(losses.data(), p.losses, steps_per_epoch * 4, cudaMemcpyDeviceToHost));
  std::vector<float> timed(epochs.begin() + 1, epochs.end());
  std::sort(timed.begin(), timed.end());
  const float median = timed[timed.size() / 2];
  std::printf("epoch ms:");
  for (float e : epochs) std::printf(" %.2f", e);
  std::printf("\nmedian %.2f ms/epoch (%.1f us/step); last epoch's loss %.4f -> %.4f\n", median,
              1000.0f * median / steps_per_epoch, losses.front(), losses.back());

  // 3. Per-stage profile: block 0's clock at every barrier, averaged over steps 10..467.
  const int capacity = 2 + kStages * steps_per_epoch;
  p.clock = dev.alloc<std::uint64_t>(capacity);
  p.clock_capacity = capacity;
  launch(dev, steps_per_epoch, start, stop);
  std::vector<std::uint64_t> clock(capacity);
  CHECK_CUDA(cudaMemcpy(clock.data(), p.clock, capacity * 8, cudaMemcpyDeviceToHost));
  const char* names[kStages] = {"F1", "F2", "F3", "out", "B3", "B2", "B1+gather"};
  std::printf("per stage, us (block 0's clock, steps 10..%d):", steps_per_epoch - 1);
  for (int st = 0; st < kStages; ++st) {
    double total = 0.0;
    for (int s = 10; s < steps_per_epoch; ++s) {
      const int i = 2 + s * kStages + st;
      total += static_cast<double>(clock[i] - clock[i - 1]);
    }
    std::printf(" %s %.2f", names[st], total / (steps_per_epoch - 10) / 1000.0);
  }
  std::printf("\n");
  p.clock = nullptr;

  // 4. Inside the stages (block 0): start -> warp 0's first tile -> warp 0's last tile -> stage end
  // -> the next stage's start (the grid barrier and the wait for the slowest block).
  const int points = 4 * kStages * steps_per_epoch;
  p.trace = dev.alloc<std::uint64_t>(points);
  CHECK_CUDA(cudaMemset(p.trace, 0, points * 8));
  launch(dev, steps_per_epoch, start, stop);
  std::vector<std::uint64_t> trace(points);
  CHECK_CUDA(cudaMemcpy(trace.data(), p.trace, points * 8, cudaMemcpyDeviceToHost));
  std::printf("inside stages, us (first tile | tiles | epilogue | barrier):\n");
  for (int st = 0; st < kStages; ++st) {
    double part[4] = {};
    for (int s = 10; s + 1 < steps_per_epoch; ++s) {
      const std::uint64_t* m = &trace[(s * kStages + st) * 4];
      const std::uint64_t next = st + 1 < kStages ? m[4] : trace[((s + 1) * kStages) * 4];
      part[0] += static_cast<double>(m[1] - m[0]);
      part[1] += static_cast<double>(m[2] - m[1]);
      part[2] += static_cast<double>(m[3] - m[2]);
      part[3] += static_cast<double>(next - m[3]);
    }
    const double n = 1000.0 * (steps_per_epoch - 11);
    std::printf("  %-10s %6.2f | %6.2f | %6.2f | %6.2f\n", names[st], part[0] / n, part[1] / n, part[2] / n, part[3] / n);
  }
  p.trace = nullptr;

  // 5. The output stage's epilogue (block 0; v7b's points): its products done -> the other ranks'
  // partial logits landed -> the 7 added -> softmax -> D_3 -> the batch sums done.
  if (split_kernel()) {
    p.trace_out = dev.alloc<std::uint64_t>(8 * steps_per_epoch);
    p.trace = dev.alloc<std::uint64_t>(points);
    launch(dev, steps_per_epoch, start, stop);
    std::vector<std::uint64_t> detail(8 * steps_per_epoch);
    CHECK_CUDA(cudaMemcpy(detail.data(), p.trace_out, detail.size() * 8, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(trace.data(), p.trace, points * 8, cudaMemcpyDeviceToHost));
    double part[5] = {};
    for (int s = 10; s + 1 < steps_per_epoch; ++s) {
      const std::uint64_t* m = &trace[(s * kStages + 3) * 4];
      const std::uint64_t* d = &detail[s * 8];
      const std::uint64_t at[6] = {m[2], d[0], d[1], d[2], d[3], m[3]};
      for (int i = 0; i + 1 < 6; ++i) part[i] += static_cast<double>(at[i + 1] - at[i]);
    }
    const double n = 1000.0 * (steps_per_epoch - 11);
    std::printf("output epilogue, us: the 6 other ranks' logits landed %.2f | added %.2f | softmax %.2f | D_3 %.2f | batch sums %.2f\n",
                part[0] / n, part[1] / n, part[2] / n, part[3] / n, part[4] / n);
    p.trace_out = nullptr;
    p.trace = nullptr;
  }
  return ok ? 0 : 1;
}
