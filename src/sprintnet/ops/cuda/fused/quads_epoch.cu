// The fused engine's quads kernel (docs/FUSED.md, v18; the exchange skeleton was measured first in
// bench/lab/quad_exchange_probe.cu): a whole training epoch of a model with two hidden layers of at
// most 256 in ONE cluster of 16 blocks, block b = 4q + j in quad q, neuron quarter j.
//
//   first layer     block (q, j) takes feature group q against neuron quarter j: its fp32 partial product
//                   of every row goes to the rows' owners, block (q', j) for the rows of quad q' (X1)
//   hidden layers   each quad runs its 32 rows through them, block (q, j) the output columns of quarter j
//                   against all 256 inputs; the quarters' activations gathered inside the quad (A1), the
//                   logits as partial sums from each quarter (so each block holds only its quarter's
//                   columns of the output layer), the loss computed alike by the quad's four blocks
//   backward        G2's quarter in each block; the second layer's input gradient as partial sums from each
//                   quarter scattered inside the quad; G1's rows to every block of the same quarter (G1),
//                   which steps its part of the first layer (fp32 master and state in registers all epoch)
//   beside it       block (q, j) steps the second layer's 64 x 64 tile (rows of quarter j, columns of
//                   quarter q) and 16 of the output layer's columns from operands every row's owner sends,
//                   and stores the new bf16 values into the blocks of quarter j; every block of quarter j
//                   steps that quarter's biases alike from the same sums (no exchange)
//
// Every exchange is st.async stores into the receivers' shared memory, completing on their mbarriers;
// one cluster barrier a step frees every receive area for the next. Every sum has a fixed order: reruns
// are bit-identical.
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <cstdlib>

#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/fused/activation_of_output.cuh"
#include "sprintnet/ops/cuda/fused/cluster_launch.h"
#include "sprintnet/ops/cuda/fused/fragment_loads.cuh"
#include "sprintnet/ops/cuda/fused/one_cluster_block.cuh"
#include "sprintnet/ops/cuda/fused/ptx.cuh"
#include "sprintnet/ops/cuda/fused/quads_epoch.h"
#include "sprintnet/ops/cuda/fused/row_loss.cuh"
#include "sprintnet/ops/cuda/fused/update_form.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

namespace cg = cooperative_groups;
using bf16 = __nv_bfloat16;

constexpr int kThreads = OneClusterBlock<QuadsLayout>::kThreads;
static_assert(kQuadsCtas == OneClusterBlock<QuadsLayout>::kBlocks);

struct QuadsArgs {
  FusedEpochArgs a;
  QuadsLayout c;
  int lab;  // the kernel lab's switches (enum Lab; SPRINTNET_FUSED_LAB), 0 in every real run
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define SPRINTNET_HAS_CLUSTERS 1
#endif

#ifdef SPRINTNET_HAS_CLUSTERS
constexpr int kOwn = kQuadsOwn, kRows = kQuadsBatch, kQuarter = kQuadsQuarter;
constexpr int kLdW = kQuadsLdWide, kLdQ = kQuadsLdQuarter, kLdC = kQuadsLdClasses;
constexpr int kFirstN = 7;  // feature tiles of the first layer's gradient a warp pair (4 pairs: 28 >= 224 / 8)
// The kernel lab's switches (QuadsArgs::lab; timing only, the results are wrong with any of them).
enum Lab {
  kLabNoFirstGradientProducts = 1,  // the first layer's weight gradient: no conversion, no mma, no update
  kLabNoNextBatch = 2,              // the next batch neither copied nor taken (every step trains on the first)
};
enum Bar { kBarX1 = 0, kBarA1, kBarLogits, kBarScatter, kBarG1, kBarSide, kBarTiles, kBarBatch, kBars };
// bias slots: b1's quarter, b2's quarter, the output layer's
constexpr int kB1 = 0, kB2 = kQuarter, kBo = 2 * kQuarter;

using fused::activation;
using fused::load_a;
using fused::load_a_trans;
using fused::load_b;
using fused::load_b_trans;
using fused::slope_from_output;
using fused::store_pair;
using ptx::mma_bf16;
using ptx::shared_address;

__device__ __forceinline__ float rounded(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ std::uint32_t bf16_bits(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
__device__ __forceinline__ uint4 as_uint4(const float (&v)[8]) {
  return make_uint4(bf16_bits(v[0], v[1]), bf16_bits(v[2], v[3]), bf16_bits(v[4], v[5]), bf16_bits(v[6], v[7]));
}

// kUpdate: the optimizer's form (SGD's two; Adam's state does not fit the registers); kAct: the hidden
// layers' activation.
template <UpdateForm kUpdate, ActivationKind kAct>
struct Quads : OneClusterBlock<QuadsLayout> {
  static_assert(kUpdate != UpdateForm::kAdam, "Adam takes the split kernel (fused_quads_unsupported)");
  const int lab;
  int q, j;

  // State in registers for the whole epoch: the first layer's part (warp w: neuron tiles 2 (w & 1), +1
  // against feature tiles kFirstN (w >> 1).., clamped to the group), the block's tile of the second layer
  // (warp w: neuron tile w & 3 against input tiles 4 (w >> 2)..), the output layer's 16 columns (warps 0
  // and 1: 8 each, all 16 classes).
  float p1[2][kFirstN][4], m1[2][kFirstN][4];
  float pt[4][4], mt[4][4];
  float po[4], mo[4];

  __device__ Quads(const QuadsArgs& args, unsigned char* shared, int r)
      : OneClusterBlock(args.a, args.c, shared, r), lab(args.lab), q(r >> 2), j(r & 3) {}

  // ---- the layout.
  __device__ bf16* w1() const { return at<bf16>(c.w1); }
  __device__ int ld1() const { return c.group + 8; }
  __device__ const std::uint8_t* x() const { return at<std::uint8_t>(c.x); }
  __device__ float* slot(int s) const { return at<float>(c.slots) + s * kOwn * kQuarter; }
  __device__ bf16* w2() const { return at<bf16>(c.w2); }
  __device__ bf16* wo() const { return at<bf16>(c.wo); }
  __device__ bf16* a1() const { return at<bf16>(c.a1); }
  __device__ bf16* a2() const { return at<bf16>(c.a2); }
  __device__ bf16* g2() const { return at<bf16>(c.g2); }
  __device__ float* logit_slot(int s) const { return at<float>(c.logits) + s * kOwn * kQuadsMaxClasses; }
  __device__ bf16* d1() const { return at<bf16>(c.d1); }
  __device__ bf16* g2_op() const { return at<bf16>(c.g2_op); }
  __device__ bf16* a1_op() const { return at<bf16>(c.a1_op); }
  __device__ bf16* a2_cols() const { return at<bf16>(c.a2_cols); }
  __device__ bf16* dl() const { return at<bf16>(c.dl); }
  __device__ float* bias() const { return at<float>(c.bias); }
  __device__ float* bias_state(int which) const { return at<float>(c.bias_state) + which * kQuadsBiases; }
  __device__ int width(int l) const { return a.layers[l].out; }

  // 16 (or 8) bytes into block `to`'s shared memory at the same offset as `p` in this block, counted on
  // its mbarrier `id`.
  __device__ void send(int to, const void* p, uint4 v, int id) const {
    ptx::store_to_block(ptx::in_block(shared_address(p), to), v, ptx::in_block(bar(id), to));
  }
  __device__ void send(int to, const void* p, float2 v, int id) const {
    ptx::store_to_block(ptx::in_block(shared_address(p), to), v, ptx::in_block(bar(id), to));
  }
  __device__ void send(int to, const void* p, float4 v, int id) const {
    send(to, p, make_uint4(__float_as_uint(v.x), __float_as_uint(v.y), __float_as_uint(v.z), __float_as_uint(v.w)), id);
  }
  // An mma accumulator's 16 x 8 tile as one 16-byte piece a lane: lanes t and t ^ 1 trade halves, the even
  // one then holding row g's columns 2t..2t+3, the odd one row g + 8's columns 2(t - 1)..2t+1. `row_g` is
  // row g's column 0 in a row-major fp32 matrix of kQuarter columns; `at` gets the piece's address.
  __device__ float4 paired(const float (&c)[4], float* row_g, float*& at) const {
    const bool odd = (t & 1) != 0;
    const float got0 = __shfl_xor_sync(0xffffffffu, odd ? c[0] : c[2], 1);
    const float got1 = __shfl_xor_sync(0xffffffffu, odd ? c[1] : c[3], 1);
    at = row_g + (odd ? 8 * kQuarter : 0) + 2 * (t & 2);
    return odd ? make_float4(got0, got1, c[2], c[3]) : make_float4(c[0], c[1], got0, got1);
  }
  // ---- parameters (load_state, store_state: OneClusterBlock).
  __device__ float step(float grad, float& p, float& m) const {
    float unused = 0.0f;
    fused_step<kUpdate>(a.optimizer, scalars, p, m, unused, grad, a.optimizer.state1 != nullptr);
    return p;
  }
  // The first layer's parameter (mi, n, e) of this thread: its neuron in the quarter and feature in the group.
  __device__ int first_tiles() const { return c.group / 8; }
  __device__ int first_tile(int n) const { return min(kFirstN * (warp >> 1) + n, first_tiles() - 1); }
  __device__ bool first_tile_owned(int n) const { return kFirstN * (warp >> 1) + n < first_tiles(); }
  __device__ int first_o(int mi, int e) const { return 16 * (2 * (warp & 1) + mi) + g + 8 * (e >> 1); }
  __device__ int first_f(int n, int e) const { return 8 * first_tile(n) + 2 * t + (e & 1); }
  __device__ bool first_valid(int mi, int n, int e) const {
    return first_tile_owned(n) && kQuarter * j + first_o(mi, e) < layer(0).out && c.group * q + first_f(n, e) < layer(0).in;
  }
  // The tile's parameter (n, e): its row (output neuron) and column (input) in the layer.
  __device__ int tile_o(int e) const { return kQuarter * j + 16 * (warp & 3) + g + 8 * (e >> 1); }
  __device__ int tile_i(int n, int e) const { return kQuarter * q + 8 * (4 * (warp >> 2) + n) + 2 * t + (e & 1); }
  __device__ bool tile_valid(int n, int e) const { return tile_o(e) < layer(1).out && tile_i(n, e) < layer(1).in; }
  // The output layer's parameter e of warps 0 and 1: class and column.
  __device__ int out_cls(int e) const { return g + 8 * (e >> 1); }
  __device__ int out_i(int e) const { return kQuarter * j + 16 * q + 8 * warp + 2 * t + (e & 1); }
  __device__ bool out_valid(int e) const { return warp < 2 && out_cls(e) < layer(2).out && out_i(e) < layer(2).in; }
  // Bias slot k's layer and row (k < kBo: quarter j of b1 or b2; then the output layer's classes).
  __device__ const FusedLayer& bias_layer(int k) const { return layer(k < kB2 ? 0 : k < kBo ? 1 : 2); }
  __device__ int bias_row(int k) const { return k < kBo ? kQuarter * j + k % kQuarter : k - kBo; }

  __device__ void load(const bf16* w) {
    for (int i = static_cast<int>(threadIdx.x); i < c.bytes / 16; i += kThreads) {
      reinterpret_cast<uint4*>(smem)[i] = make_uint4(0, 0, 0, 0);
    }
    __syncthreads();
    const FusedLayer& first = layer(0);
    for (int i = static_cast<int>(threadIdx.x); i < kQuarter * c.group; i += kThreads) {
      const int row = i / c.group, f = i % c.group, o = kQuarter * j + row, feature = c.group * q + f;
      if (o < first.out && feature < first.in) w1()[row * ld1() + f] = w[index(first, o, feature)];
    }
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int n = 0; n < kFirstN; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          load_state(index(first, kQuarter * j + first_o(mi, e), c.group * q + first_f(n, e)), first_valid(mi, n, e),
                     p1[mi][n][e], m1[mi][n][e]);
        }
    const FusedLayer& second = layer(1);
    for (int i = static_cast<int>(threadIdx.x); i < kQuarter * second.in; i += kThreads) {
      const int row = i / second.in, k = i % second.in, o = kQuarter * j + row;
      if (o < second.out) w2()[row * kLdW + k] = w[index(second, o, k)];
    }
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) load_state(index(second, tile_o(e), tile_i(n, e)), tile_valid(n, e), pt[n][e], mt[n][e]);
    const FusedLayer& out = layer(2);
    for (int i = static_cast<int>(threadIdx.x); i < out.out * kQuarter; i += kThreads) {
      const int cls = i / kQuarter, k = kQuarter * j + i % kQuarter;
      if (k < out.in) wo()[cls * kLdQ + i % kQuarter] = w[index(out, cls, k)];
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) load_state(index(out, out_cls(e), out_i(e)), out_valid(e), po[e], mo[e]);
    for (int k = static_cast<int>(threadIdx.x); k < kQuadsBiases; k += kThreads) {
      const FusedLayer& L = bias_layer(k);
      const int o = bias_row(k);
      if (!L.bias || o >= L.out) continue;
      bias()[k] = __bfloat162float(w[index(L, o, L.in)]);
      load_state(index(L, o, L.in), true, bias_state(0)[k], bias_state(1)[k]);
    }
  }
  __device__ void store(bf16* w) const {
    const FusedLayer& first = layer(0);
    for (int i = static_cast<int>(threadIdx.x); i < kQuarter * c.group; i += kThreads) {
      const int row = i / c.group, f = i % c.group, o = kQuarter * j + row, feature = c.group * q + f;
      if (o < first.out && feature < first.in) w[index(first, o, feature)] = w1()[row * ld1() + f];
    }
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int n = 0; n < kFirstN; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (first_valid(mi, n, e)) {
            store_state(index(first, kQuarter * j + first_o(mi, e), c.group * q + first_f(n, e)), p1[mi][n][e], m1[mi][n][e]);
          }
        }
    const FusedLayer& second = layer(1);
    for (int i = static_cast<int>(threadIdx.x); i < kQuarter * kQuarter; i += kThreads) {
      const int row = i / kQuarter, k = kQuarter * q + i % kQuarter, o = kQuarter * j + row;
      if (o < second.out && k < second.in) w[index(second, o, k)] = w2()[row * kLdW + k];
    }
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (tile_valid(n, e)) store_state(index(second, tile_o(e), tile_i(n, e)), pt[n][e], mt[n][e]);
      }
    const FusedLayer& out = layer(2);
    for (int i = static_cast<int>(threadIdx.x); i < out.out * 16; i += kThreads) {
      const int cls = i / 16, k = kQuarter * j + 16 * q + i % 16;
      if (k < out.in) w[index(out, cls, k)] = wo()[cls * kLdQ + 16 * q + i % 16];
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (out_valid(e)) store_state(index(out, out_cls(e), out_i(e)), po[e], mo[e]);
    }
    // The biases: quarter j's by block (0, j), the output layer's by block 0 (every holder steps them alike).
    for (int k = static_cast<int>(threadIdx.x); k < kQuadsBiases; k += kThreads) {
      const FusedLayer& L = bias_layer(k);
      const int o = bias_row(k);
      if (!L.bias || o >= L.out || q != 0 || (k >= kBo && j != 0)) continue;
      store_state(index(L, o, L.in), bias_state(0)[k], bias_state(1)[k]);
      w[index(L, o, L.in)] = __float2bfloat16_rn(bias_state(0)[k]);
    }
  }
  __device__ float step_bias(int k, float grad) const {
    return rounded(step(grad, bias_state(0)[k], bias_state(1)[k]));
  }

  // ---- the batch: the bytes of feature group q of every row, one bulk copy a row (v18b: 16-byte cp.async
  // pieces, ~6.5 a thread, took 1.25 us to issue) straight into x once the first layer's gradient has read the
  // step's (v18f: into the slots, then copied into x at the step's end), landing on the batch's mbarrier while
  // the block steps its tile. The quad's labels by cp.async.
  __device__ void prefetch_samples(std::int64_t s) const {
    if (a.order == nullptr || s >= a.steps || threadIdx.x >= rows_of(s)) return;
    ptx::copy_async_4(shared_address(at<int>(c.next) + threadIdx.x), a.order + s * a.batch + threadIdx.x);
  }
  // The bytes of a row's feature group that lie within the inputs (a multiple of 16; 0 for a group past them).
  __device__ int row_bytes() const { return max(0, min(c.group, layer(0).in - c.group * q)); }
  __device__ std::uint32_t batch_bytes(std::int64_t s) const {
    return s > 0 && (lab & kLabNoNextBatch) ? 0u : static_cast<std::uint32_t>(rows_of(s) * row_bytes());
  }
  // The caller has waited for the sample indices and passed a block barrier after its last reads of x.
  __device__ void copy_batch(std::int64_t s) const {
    if (s >= a.steps || (s > 0 && (lab & kLabNoNextBatch))) return;
    const int n = static_cast<int>(rows_of(s)), features = layer(0).in, bytes = row_bytes();
    const int* samples = at<int>(c.next);
    const int row = static_cast<int>(threadIdx.x);
    if (row < n && bytes > 0) {
      const std::int64_t at_sample = a.order != nullptr ? samples[row] : s * a.batch + row;
      ptx::bulk_copy_from_global(shared_address(at<std::uint8_t>(c.x) + row * c.group),
                                 a.images + at_sample * features + c.group * q, static_cast<std::uint32_t>(bytes),
                                 bar(kBarBatch));
    }
    if (row < kOwn && kOwn * q + row < n) {
      const std::int64_t at_sample = a.order != nullptr ? samples[kOwn * q + row] : s * a.batch + kOwn * q + row;
      ptx::copy_async_4(at<int>(c.labels) + row, a.labels + at_sample);
    }
  }
  // The batch landed: its mbarrier, this thread's labels, then a block barrier.
  __device__ void take_batch(std::int64_t s) {
    if (s >= a.steps) return;
    wait(kBarBatch, batch_bytes(s));
    ptx::copy_async_wait_all();
    __syncthreads();
  }
  // Bytes j0, j0 + 1 of `word`, normalised, as a bf16 pair.
  __device__ __forceinline__ std::uint32_t pixels(std::uint32_t word, int j0) const {
    return bf16_bits(ptx::byte_as_float(word, j0) * a.scale + a.shift, ptx::byte_as_float(word, j0 + 1) * a.scale + a.shift);
  }

  // ---- X1: the block's partial product of every row against its quarter (warp w: rows 16w..16w+15, all
  // 64 neurons), each quad's rows to its block of quarter j (slot q there), after the cluster barrier that
  // frees the slots.
  __device__ void first_partial() {
    float acc[8][4] = {};
    const int steps = c.group / 16;
    const std::uint8_t* row_lo = x() + (16 * warp + g) * c.group + 2 * t;
    const std::uint8_t* row_hi = row_lo + 8 * c.group;
    const float scale = a.scale, shift = a.shift;
    const auto pair = [&](const std::uint8_t* p) {
      const std::uint32_t word = *reinterpret_cast<const unsigned short*>(p);
      return bf16_bits(ptx::byte_as_float(word, 0) * scale + shift, ptx::byte_as_float(word, 1) * scale + shift);
    };
    // W1's B fragments two n-tiles an ldmatrix: lane l gives row (l & 7) + 8 (l >> 4), k half (l >> 3) & 1.
    const std::uint32_t w_rows =
        shared_address(w1() + ((lane & 7) + 8 * (lane >> 4)) * ld1() + ((lane >> 3) & 1) * 8);
    const std::uint32_t w_tile_pair = 16u * ld1() * 2;  // bytes from n-tiles (0, 1) to (2, 3)
#pragma unroll 2
    for (int ks = 0; ks < steps; ++ks) {
      std::uint32_t fa[4];
      fa[0] = pair(row_lo + 16 * ks);
      fa[1] = pair(row_hi + 16 * ks);
      fa[2] = pair(row_lo + 16 * ks + 8);
      fa[3] = pair(row_hi + 16 * ks + 8);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        std::uint32_t fb[4];
        ptx::ldmatrix_x4(fb, w_rows + np * w_tile_pair + 32u * ks);
        const std::uint32_t lo[2] = {fb[0], fb[1]}, hi[2] = {fb[2], fb[3]};
        mma_bf16(acc[2 * np], fa, lo);
        mma_bf16(acc[2 * np + 1], fa, hi);
      }
    }
    stamp();  // profile: the products
    ptx::cluster_wait();
    const int owner = warp >> 1, to = 4 * owner + j;
    float* base = slot(q) + (16 * (warp & 1) + g) * kQuarter;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      float* p;
      const float4 v = paired(acc[nt], base + 8 * nt, p);
      if (owner == q) {
        *reinterpret_cast<float4*>(p) = v;
      } else {
        send(to, p, v, kBarX1);
      }
    }
  }
  // Row r's columns c0..c0 + 7 of the four slots' partial sums, added in slot order (a thread's 8 of the
  // quad's 32 x 64: r = i / 8, c0 = 8 (i % 8)).
  __device__ void sum_slots(int r, int c0, float (&z)[8]) const {
#pragma unroll
    for (int e = 0; e < 8; ++e) z[e] = 0.0f;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const float4 lo = *reinterpret_cast<const float4*>(slot(s) + r * kQuarter + c0);
      const float4 hi = *reinterpret_cast<const float4*>(slot(s) + r * kQuarter + c0 + 4);
      z[0] += lo.x, z[1] += lo.y, z[2] += lo.z, z[3] += lo.w, z[4] += hi.x, z[5] += hi.y, z[6] += hi.z, z[7] += hi.w;
    }
  }
  // The quad's rows of A1's quarter j: the groups' partials added in group order, the bias and the
  // activation; into a1's own columns and to the quad's other blocks.
  __device__ void first_reduce(bool tiles) {
    add_metrics();
    wait(kBarX1, 3u * kOwn * kQuarter * 4);
    if (tiles) wait(kBarTiles, tile_bytes());
    __syncthreads();  // the own slot's stores
    const int r = static_cast<int>(threadIdx.x) >> 3, c0 = 8 * (static_cast<int>(threadIdx.x) & 7);
    float z[8];
    sum_slots(r, c0, z);
    const bool valid = kOwn * q + r < rows;
    float y[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      y[e] = valid && kQuarter * j + c0 + e < width(0) ? activation<kAct>(z[e] + bias()[kB1 + c0 + e]) : 0.0f;
    }
    const uint4 v = as_uint4(y);
    bf16* p = a1() + r * kLdW + kQuarter * j + c0;
    *reinterpret_cast<uint4*>(p) = v;
#pragma unroll
    for (int k = 1; k < 4; ++k) send(4 * q + ((j + k) & 3), p, v, kBarA1);
  }

  // ---- the quad's rows through the second layer: A2's quarter j = f(A1 · W2[quarter j]ᵀ + b2), warp w
  // rows 16 (w & 1).., neurons 16 (w >> 1)..
  __device__ void forward() {
    wait(kBarA1, 3u * kOwn * kQuarter * 2);
    __syncthreads();  // the own columns
    const int m = warp & 1, n0 = 16 * (warp >> 1);
    float acc[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < 16; ++ks) {
      std::uint32_t fa[4];
      load_a(fa, a1() + 16 * m * kLdW + 16 * ks, kLdW);
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        std::uint32_t fb[2];
        load_b(fb, w2() + (n0 + 8 * n) * kLdW + 16 * ks, kLdW);
        mma_bf16(acc[n], fa, fb);
      }
    }
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = 16 * m + g + 8 * h, col = n0 + 8 * n + 2 * t;
        const bool valid = kOwn * q + row < rows;
        float y[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          y[e] = valid && kQuarter * j + col + e < width(1) ? activation<kAct>(acc[n][2 * h + e] + bias()[kB2 + col + e]) : 0.0f;
        }
        store_pair(a2() + row * kLdQ + col, y[0], y[1]);
      }
    __syncthreads();
  }
  // The quarter's partial logits of the quad's rows (warps 0-3: rows 16 (w & 1).., classes 8 (w >> 1)..),
  // into slot j here and in the quad's other blocks.
  __device__ void partial_logits() {
    if (warp < 4) {
      const int m = warp & 1, n = warp >> 1;
      float acc[4] = {};
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        std::uint32_t fa[4], fb[2];
        load_a(fa, a2() + 16 * m * kLdQ + 16 * ks, kLdQ);
        load_b(fb, wo() + 8 * n * kLdQ + 16 * ks, kLdQ);
        mma_bf16(acc, fa, fb);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float* p = logit_slot(j) + (16 * m + g + 8 * h) * kQuadsMaxClasses + 8 * n + 2 * t;
        const float2 v = make_float2(acc[2 * h], acc[2 * h + 1]);
        *reinterpret_cast<float2*>(p) = v;
#pragma unroll
        for (int k = 1; k < 4; ++k) send(4 * q + ((j + k) & 3), p, v, kBarLogits);
      }
    }
  }
  // Warps 0 and 1: the quad's logits (the quarters' partials in quarter order, and the bias), loss and
  // dlogits of rows 16 w + g and 16 w + g + 8; block (q, 0) stores each row's loss and hit into block 0.
  __device__ void output(int parity) {
    wait(kBarLogits, 3u * kOwn * kQuadsMaxClasses * 4);
    __syncthreads();  // the own slot
    if (warp < 2) {
      const int classes = width(2);
      const bool mse = a.loss == FusedLoss::kMse;
      const float grad_scale = mse ? 2.0f / static_cast<float>(rows * classes) : 1.0f / static_cast<float>(rows);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * warp + g + 8 * h, row = kOwn * q + r;
        const bool valid = row < rows;
        const int label = valid ? at<int>(c.labels)[r] : 0;
        float v[4];
#pragma unroll
        for (int jv = 0; jv < 4; ++jv) {
          const int cls = (jv >> 1) * 8 + 2 * t + (jv & 1);
          float z = 0.0f;
#pragma unroll
          for (int s = 0; s < 4; ++s) z += logit_slot(s)[r * kQuadsMaxClasses + cls];
          v[jv] = cls < classes ? z + bias()[kBo + cls] : -INFINITY;
        }
        const auto l = fused::row_loss<fused::FragmentRow<2>>(v, classes, label, mse, a.smoothing, grad_scale, j == 0);
        bf16* d = dl() + row * kLdC + 2 * t;
        store_pair(d, valid ? l.grad[0] : 0.0f, valid ? l.grad[1] : 0.0f);
        store_pair(d + 8, valid ? l.grad[2] : 0.0f, valid ? l.grad[3] : 0.0f);
        if (j == 0 && t == 0) {
          const cg::cluster_group cluster = cg::this_cluster();
          *cluster.map_shared_rank(at<double>(c.row_loss) + parity * kRows + row, 0) = valid ? l.loss : 0.0;
          *cluster.map_shared_rank(at<int>(c.row_hit) + parity * kRows + row, 0) = valid && l.best_index == label ? 1 : 0;
        }
      }
    }
    __syncthreads();
  }
  // G2's quarter j = (dlogits · Wo[:, quarter j]) ⊙ f'(A2), warp w rows 16 (w & 1).., columns 16 (w >> 1)..
  __device__ void output_backward() {
    const int m = warp & 1, n0 = 16 * (warp >> 1);
    std::uint32_t fa[4];
    load_a(fa, dl() + (kOwn * q + 16 * m) * kLdC, kLdC);
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      std::uint32_t fb[2];
      load_b_trans(fb, wo() + n0 + 8 * n, kLdQ);
      float acc[4] = {};
      mma_bf16(acc, fa, fb);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = 16 * m + g + 8 * h, col = n0 + 8 * n + 2 * t;
        const __nv_bfloat162 y = *reinterpret_cast<const __nv_bfloat162*>(a2() + row * kLdQ + col);
        store_pair(g2() + row * kLdQ + col, acc[2 * h] * slope_from_output<kAct>(__low2float(y)),
                   acc[2 * h + 1] * slope_from_output<kAct>(__high2float(y)));
      }
    }
    __syncthreads();
  }
  // The second layer's input gradient, G2's quarter · W2[quarter j]: warp w rows 16 (w & 1).., columns of
  // quarter w >> 1; each quarter's partial sums into slot j of its block of the quad (this block's own into
  // its slot j by plain stores: no other block sends there).
  __device__ void scatter() {
    const int m = warp & 1, quarter = warp >> 1, to = 4 * q + quarter;
    float acc[8][4] = {};
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      std::uint32_t fa[4];
      load_a(fa, g2() + 16 * m * kLdQ + 16 * ks, kLdQ);
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        std::uint32_t fb[2];
        load_b_trans(fb, w2() + 16 * ks * kLdW + kQuarter * quarter + 8 * n, kLdW);
        mma_bf16(acc[n], fa, fb);
      }
    }
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      float* p;
      const float4 v = paired(acc[n], slot(j) + (16 * m + g) * kQuarter + 8 * n, p);
      if (quarter == j) {
        *reinterpret_cast<float4*>(p) = v;
      } else {
        send(to, p, v, kBarScatter);
      }
    }
  }
  // The operands beside the path, once every warp's reads of w2 and wo are done (the caller's block
  // barrier; the tile owners' receipt of G2 then tells them those reads are over): the quad's rows of G2's
  // quarter to the blocks of quarter j (each steps a tile of its rows), of A1's quarter to the blocks of quad
  // j (the tiles of columns of quarter j), of A2's 16 columns of each block of quarter j, of dlogits to the
  // other quads' blocks of quarter j (every block then holds every row's).
  __device__ std::uint32_t side_bytes() const {
    return 3u * kOwn * kQuarter * 2 + (q == j ? 3u : 4u) * kOwn * kQuarter * 2 + 3u * kOwn * 16 * 2 * 2;
  }
  __device__ void send_side() const {
    const int i = static_cast<int>(threadIdx.x), r = i >> 3, p = i & 7;
    const uint4 g2_piece = *reinterpret_cast<const uint4*>(g2() + r * kLdQ + 8 * p);
    const uint4 a1_piece = *reinterpret_cast<const uint4*>(a1() + r * kLdW + kQuarter * j + 8 * p);
    bf16* g2_at = g2_op() + (kOwn * q + r) * kLdQ + 8 * p;
    bf16* a1_at = a1_op() + (kOwn * q + r) * kLdQ + 8 * p;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int to_g2 = 4 * k + j, to_a1 = 4 * j + k;
      if (to_g2 == rank) {
        *reinterpret_cast<uint4*>(g2_at) = g2_piece;
      } else {
        send(to_g2, g2_at, g2_piece, kBarSide);
      }
      if (to_a1 == rank) {
        *reinterpret_cast<uint4*>(a1_at) = a1_piece;
      } else {
        send(to_a1, a1_at, a1_piece, kBarSide);
      }
    }
    // A2's columns 16k.. of the quarter to block (k, j); dlogits' rows to the other quads' blocks of quarter j.
    const int k = i >> 6, row = (i >> 1) & 31, half = i & 1;
    const uint4 a2_piece = *reinterpret_cast<const uint4*>(a2() + row * kLdQ + 16 * k + 8 * half);
    bf16* a2_at = a2_cols() + (kOwn * q + row) * kLdC + 8 * half;
    if (k == q) {
      *reinterpret_cast<uint4*>(a2_at) = a2_piece;
    } else {
      send(4 * k + j, a2_at, a2_piece, kBarSide);
    }
    if (k < 3) {
      const int to = 4 * ((q + 1 + k) & 3) + j;
      const bf16* dl_at = dl() + (kOwn * q + row) * kLdC + 8 * half;
      send(to, dl_at, *reinterpret_cast<const uint4*>(dl_at), kBarSide);
    }
  }
  // G1's quarter of the quad's rows: the quarters' partial sums (in quarter order) ⊙ f'(A1), into d1's rows
  // of the quad and to the other quads' blocks of quarter j (thread i: row i / 8, columns 8 (i % 8)..).
  __device__ void first_gradient() {
    wait(kBarScatter, 3u * kOwn * kQuarter * 4);
    __syncthreads();  // the own slot
    stamp();  // profile: the scatter's wait
    const int r = static_cast<int>(threadIdx.x) >> 3, c0 = 8 * (static_cast<int>(threadIdx.x) & 7);
    float z[8];
    sum_slots(r, c0, z);
    const uint4 y = *reinterpret_cast<const uint4*>(a1() + r * kLdW + kQuarter * j + c0);
    const std::uint32_t words[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const __nv_bfloat162 pair = *reinterpret_cast<const __nv_bfloat162*>(&words[e >> 1]);
      z[e] *= slope_from_output<kAct>((e & 1) != 0 ? __high2float(pair) : __low2float(pair));
    }
    const uint4 v = as_uint4(z);
    bf16* p = d1() + (kOwn * q + r) * kLdQ + c0;
    *reinterpret_cast<uint4*>(p) = v;
#pragma unroll
    for (int k = 1; k < 4; ++k) send(4 * ((q + k) & 3) + j, p, v, kBarG1);
  }

  // ---- the first layer's weight gradient over the batch (G1's quarter ᵀ · X) and its update; b1's quarter
  // from G1's column sums (one more mma a k-step against ones, warps 0 and 1). X's rows in two halves of 64,
  // each normalised to bf16 by the whole block into the slots (v18b: B fragments built from the bytes by each
  // warp, twice over in a warp pair, took 8.1 us of a 25 us step), read by ldmatrix.
  __device__ bf16* x_half() const { return at<bf16>(c.slots); }  // [64][group + 8]
  __device__ void convert_half(int half) const {
    const int pieces = c.group / 16, first = c.group * q, features = layer(0).in;
    const float scale = a.scale, shift = a.shift;
    // Thread i takes pieces i, i + 256, ... of the half's 64 x pieces, its (row, piece) stepped without a
    // division (v18d: a division by the run-time count each piece).
    const int rows_step = kThreads / pieces, pieces_step = kThreads - rows_step * pieces;
    int row = static_cast<int>(threadIdx.x) / pieces, piece = static_cast<int>(threadIdx.x) - row * pieces;
    const std::uint8_t* from = x() + 64 * half * c.group;
    while (row < 64) {
      const uint4 px = *reinterpret_cast<const uint4*>(from + row * c.group + 16 * piece);
      const bool valid = first + 16 * piece < features;  // past the inputs: zeros (their weights stay zero)
      const auto pair = [&](std::uint32_t word, int j) {
        return valid ? bf16_bits(ptx::byte_as_float(word, j) * scale + shift, ptx::byte_as_float(word, j + 1) * scale + shift)
                     : 0u;
      };
      bf16* to = x_half() + row * ld1() + 16 * piece;
      *reinterpret_cast<uint4*>(to) = make_uint4(pair(px.x, 0), pair(px.x, 2), pair(px.y, 0), pair(px.y, 2));
      *reinterpret_cast<uint4*>(to + 8) = make_uint4(pair(px.z, 0), pair(px.z, 2), pair(px.w, 0), pair(px.w, 2));
      row += rows_step;
      piece += pieces_step;
      if (piece >= pieces) {
        piece -= pieces;
        ++row;
      }
    }
  }
  // The weight gradient's products over one half of the rows (4 k-steps) for feature tiles kFrom.. of this
  // warp, added to acc; b1's column sums with them (warps 0 and 1, kFrom 0).
  template <int kFrom, int kCount>
  __device__ void first_products_half(int half, float (&acc)[2][kCount][4], float (&sums)[2][4]) const {
    const int m0 = 2 * (warp & 1);
    constexpr std::uint32_t kOnes = 0x3F803F80u;  // two bf16 1.0
    const std::uint32_t ones[2] = {kOnes, kOnes};
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      std::uint32_t fa[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        load_a_trans(fa[mi], d1() + (64 * half + 16 * ks) * kLdQ + 16 * (m0 + mi), kLdQ);
        if (kFrom == 0 && warp < 2) mma_bf16(sums[mi], fa[mi], ones);
      }
#pragma unroll
      for (int n = 0; n < kCount; ++n) {
        std::uint32_t fb[2];
        load_b_trans(fb, x_half() + 16 * ks * ld1() + 8 * first_tile(kFrom + n), ld1());
        mma_bf16(acc[0][n], fa[0], fb);
        mma_bf16(acc[1][n], fa[1], fb);
      }
    }
  }
  // The new bf16 pair (mi, n, h) into w1, where this warp owns the tile.
  template <int kFrom>
  __device__ void store_first(int mi, int n, int h, float w0, float w1v) const {
    if (first_tile_owned(kFrom + n)) store_pair(w1() + first_o(mi, 2 * h) * ld1() + 8 * first_tile(kFrom + n) + 2 * t, w0, w1v);
  }
  // Plain SGD takes each half's gradient as it comes (v18d; update_form.cuh's plain_sgd_momentum): the first
  // half goes into the momentum with its decay and weight-decay terms, the second completes it and steps the
  // weight; X is then converted once a half instead of once a half and a pass.
  template <int kFrom, int kCount>
  __device__ void fold_first(int half, const float (&acc)[2][kCount][4]) {
    const float factor = plain_sgd_factor(a.optimizer, scalars), decay = a.optimizer.weight_decay;
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int n = 0; n < kCount; ++n) {
        if (half == 0) {
#pragma unroll
          for (int e = 0; e < 4; ++e) plain_sgd_momentum(factor, decay, p1[mi][kFrom + n][e], m1[mi][kFrom + n][e], acc[mi][n][e]);
          continue;
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          m1[mi][kFrom + n][e] += acc[mi][n][e];
          plain_sgd_apply(scalars, p1[mi][kFrom + n][e], m1[mi][kFrom + n][e]);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) store_first<kFrom>(mi, n, h, p1[mi][kFrom + n][2 * h], p1[mi][kFrom + n][2 * h + 1]);
      }
  }
  // Every other form: a pass over both halves for each group of feature tiles, then the update.
  template <int kFrom, int kCount>
  __device__ void first_backward_pass(float (&sums)[2][4]) {
    float acc[2][kCount][4] = {};
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      __syncthreads();  // the slots' last readers
      convert_half(half);
      __syncthreads();
      first_products_half<kFrom, kCount>(half, acc, sums);
    }
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int n = 0; n < kCount; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float w0 = step(acc[mi][n][2 * h], p1[mi][kFrom + n][2 * h], m1[mi][kFrom + n][2 * h]);
          const float w1v = step(acc[mi][n][2 * h + 1], p1[mi][kFrom + n][2 * h + 1], m1[mi][kFrom + n][2 * h + 1]);
          store_first<kFrom>(mi, n, h, w0, w1v);
        }
  }
  __device__ void first_backward() {
    wait(kBarG1, 3u * kOwn * kQuarter * 2);
    __syncthreads();  // the own rows
    stamp();  // profile: G1's wait
    float sums[2][4] = {};
    if (!(lab & kLabNoFirstGradientProducts)) {
      if constexpr (kUpdate == UpdateForm::kPlainSgd) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          __syncthreads();  // the slots' last readers
          convert_half(half);
          __syncthreads();
          stamp();  // profile: a half converted
          {
            float acc[2][4][4] = {};
            first_products_half<0, 4>(half, acc, sums);
            fold_first<0, 4>(half, acc);
          }
          {
            float acc[2][kFirstN - 4][4] = {};
            first_products_half<4, kFirstN - 4>(half, acc, sums);
            fold_first<4, kFirstN - 4>(half, acc);
          }
          stamp();  // profile: its products
        }
      } else {
        first_backward_pass<0, 4>(sums);
        first_backward_pass<4, kFirstN - 4>(sums);
      }
    }
    if (warp < 2 && t == 0 && layer(0).bias) {
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int k = kB1 + first_o(mi, 2 * h);
          bias()[k] = step_bias(k, sums[mi][2 * h]);
        }
    }
    // x's generic reads, before the next batch's bulk copies write it through the async proxy.
    ptx::fence_proxy_async();
    __syncthreads();
  }

  // ---- beside the path: the block's tile of the second layer, its 16 columns of the output layer, b2's
  // quarter and the output layer's biases, stepped from the operands; the new tile and columns into the
  // quarter's other blocks.
  __device__ std::uint32_t tile_bytes() const { return 3u * (kQuarter * kQuarter * 2 + kQuadsMaxClasses * 16 * 2); }
  __device__ void side() {
    wait(kBarSide, side_bytes());
    __syncthreads();  // the own rows' operands
    stamp();  // profile: the operands' wait
    constexpr std::uint32_t kOnes = 0x3F803F80u;
    const std::uint32_t ones[2] = {kOnes, kOnes};
    {  // the tile: warp w neurons 16 (w & 3).., inputs 32 (w >> 2)..
      const int m = warp & 3, n0 = 4 * (warp >> 2);
      float acc[4][4] = {}, sums[4] = {};
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        std::uint32_t fa[4];
        load_a_trans(fa, g2_op() + 16 * ks * kLdQ + 16 * m, kLdQ);
        if (warp < 4) mma_bf16(sums, fa, ones);
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          std::uint32_t fb[2];
          load_b_trans(fb, a1_op() + 16 * ks * kLdQ + 8 * (n0 + n), kLdQ);
          mma_bf16(acc[n], fa, fb);
        }
      }
#pragma unroll
      for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float w[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int k = 2 * h + e;
            w[e] = tile_valid(n, k) ? step(acc[n][k], pt[n][k], mt[n][k]) : 0.0f;
          }
          store_pair(w2() + (16 * m + g + 8 * h) * kLdW + kQuarter * q + 8 * (n0 + n) + 2 * t, w[0], w[1]);
        }
      if (warp < 4 && t == 0 && layer(1).bias) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int k = kB2 + 16 * m + g + 8 * h;
          bias()[k] = step_bias(k, sums[2 * h]);
        }
      }
    }
    if (warp < 2) {  // the output layer's columns 16 q + 8 w.. of the quarter, every class
      float acc[4] = {}, sums[4] = {};
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        std::uint32_t fa[4], fb[2];
        load_a_trans(fa, dl() + 16 * ks * kLdC, kLdC);
        load_b_trans(fb, a2_cols() + 16 * ks * kLdC + 8 * warp, kLdC);
        mma_bf16(acc, fa, fb);
        if (warp == 0) mma_bf16(sums, fa, ones);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float w[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int k = 2 * h + e;
          w[e] = out_valid(k) ? step(acc[k], po[k], mo[k]) : 0.0f;
        }
        store_pair(wo() + out_cls(2 * h) * kLdQ + 16 * q + 8 * warp + 2 * t, w[0], w[1]);
      }
      if (warp == 0 && t == 0 && layer(2).bias) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int cls = g + 8 * h;
          if (cls < width(2)) bias()[kBo + cls] = step_bias(kBo + cls, sums[2 * h]);
        }
      }
    }
    __syncthreads();
    // The new tile (64 rows x 8 pieces) and columns (16 classes x 2 pieces) into the quarter's other blocks.
    for (int i = static_cast<int>(threadIdx.x); i < 64 * 8 + 16 * 2; i += kThreads) {
      const bf16* p = i < 512 ? w2() + (i >> 3) * kLdW + kQuarter * q + 8 * (i & 7)
                              : wo() + ((i - 512) >> 1) * kLdQ + 16 * q + 8 * (i & 1);
      const uint4 v = *reinterpret_cast<const uint4*>(p);
#pragma unroll
      for (int k = 1; k < 4; ++k) send(4 * ((q + k) & 3) + j, p, v, kBarTiles);
    }
  }

  __device__ void add_metrics() { OneClusterBlock::add_metrics(kRows, width(2)); }

  __device__ void train() {
    state = *a.state;
    first_step = state.step;
    stamp();
    load(static_cast<const bf16*>(a.copies[state.step & 1]));
    __syncthreads();  // the shared memory zeroed before the barriers are set up in it
    if (threadIdx.x == 0) {
      for (int id = 0; id < kBars; ++id) ptx::mbarrier_init(bar(id));
      ptx::fence_mbarrier_init();
    }
    if (a.steps > 0) {
      for (int i = static_cast<int>(threadIdx.x); i < rows_of(0); i += kThreads) at<int>(c.next)[i] = static_cast<int>(sample(i));
      ptx::fence_proxy_async();  // the zeroing, before the bulk copies write the slots
      __syncthreads();
      copy_batch(0);
      take_batch(0);
    }
    __syncthreads();
    ptx::cluster_arrive();  // every block's barriers and memory are ready
    stamp();
    RunningScalars<kUpdate> running(a.optimizer, state.opt_steps);
    for (std::int64_t s = 0; s < a.steps; ++s) {
      const int parity = static_cast<int>(s & 1);
      rows = static_cast<int>(rows_of(s));
      scalars = running.next(a.optimizer, step_lr(a.optimizer, state.step), state.opt_steps);
      prefetch_samples(s + 1);
      first_partial();
      stamp();
      first_reduce(s > 0);
      stamp();
      forward();
      partial_logits();
      output(parity);
      stamp();
      output_backward();
      scatter();
      __syncthreads();  // every read of w2 and wo this step is done
      stamp();
      first_gradient();
      // The operands beside the path after G1's sends, which the other quads wait for (v18e: before them, their
      // ~11 stores a thread were on the path).
      send_side();
      // The rows' losses and hits, stored into block 0 in output(), are read there after the step's cluster
      // barrier, whose arrival is relaxed: their writers fence here.
      if (warp < 2 && t == 0) ptx::fence_cluster();
      stamp();
      first_backward();
      ptx::copy_async_wait_all();  // the next step's sample indices
      __syncthreads();
      copy_batch(s + 1);
      stamp();
      side();
      take_batch(s + 1);
      __syncthreads();
      stamp();
      last_rows = rows;
      advance_step_state(state, false, false, nullptr);
      // Relaxed: what the barrier frees is this block's receive areas, which it has only read since the
      // last barrier; the one write read across it is fenced above.
      ptx::cluster_arrive_relaxed();
    }
    end_epoch(*this, kBarTiles);
  }
};

#endif  // SPRINTNET_HAS_CLUSTERS

template <UpdateForm kUpdate, ActivationKind kAct>
__global__ void __launch_bounds__(kThreads, 1) quads_epoch_kernel(const __grid_constant__ QuadsArgs args) {
#ifdef SPRINTNET_HAS_CLUSTERS
  extern __shared__ __align__(128) unsigned char smem[];
  Quads<kUpdate, kAct> k(args, smem, static_cast<int>(cg::this_cluster().block_rank()));
  k.train();
#else
  __trap();
#endif
}

using QuadsKernel = void (*)(QuadsArgs);

template <UpdateForm kUpdate>
QuadsKernel kernel_for(ActivationKind activation) {
  return for_cluster_activation(activation, [](auto act) -> QuadsKernel { return quads_epoch_kernel<kUpdate, decltype(act)::value>; });
}

QuadsKernel kernel_for(const FusedEpochArgs& args) {
  return for_update_form(args.optimizer, [&](auto form) -> QuadsKernel {
    if constexpr (decltype(form)::value == UpdateForm::kAdam) {
      return nullptr;  // fused_quads_unsupported says so first
    } else {
      return kernel_for<decltype(form)::value>(args.activation);
    }
  });
}

ClusterShape shape_of(std::int64_t shared_bytes) { return {kQuadsCtas, kThreads, shared_bytes}; }

const ClusterProbe& quads_probe(int device, std::int64_t shared_bytes) {
  return probe_cluster_kernel(device, kernel_for<UpdateForm::kSgd>(ActivationKind::kReLU), shape_of(shared_bytes),
                              "the quads kernel");
}

}  // namespace

const char* quads_epoch_unavailable(int device, std::int64_t shared_bytes) {
  return quads_probe(device, shared_bytes).why_not;
}

int quads_epoch_active_clusters(int device, std::int64_t shared_bytes) {
  return active_clusters(quads_probe(device, shared_bytes));
}

cudaError_t launch_quads_epoch(const FusedEpochArgs& args, const QuadsLayout& layout, cudaStream_t stream) {
  const NvtxRange range("quads_epoch");
  // SPRINTNET_FUSED_LAB: the kernel lab's switches (enum Lab), read once.
  static const int lab = [] {
    const char* env = std::getenv("SPRINTNET_FUSED_LAB");
    return env != nullptr ? std::atoi(env) : 0;
  }();
  return launch_cluster_kernel(kernel_for(args), shape_of(layout.bytes), stream, QuadsArgs{args, layout, lab});
}

}  // namespace sprintnet::cuda
