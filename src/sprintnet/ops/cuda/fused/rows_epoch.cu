// The fused engine's rows kernel (docs/FUSED.md, v13; the lab's bench/lab/row_split_probe.cu is its
// first version): a whole training epoch of a model with 1-3 hidden layers of at most 128 in ONE
// cluster of 16 blocks, the batch's rows split over the blocks.
//
//   first layer   block r takes feature group r / 2 against neuron half r % 2 (the cluster kernel's
//                 v11a): its fp32 partial product of every row goes to the rows' owners (block r owns
//                 rows 8r..8r+7), who add the groups, the bias and the activation
//   the rest      every block holds every hidden layer's weights (replicated) and runs its 8 rows
//                 through the hidden layers, the logits, the loss and back to the first layer's
//                 gradient alone (Zᵀ = W · Xᵀ: the 8 rows are the mma's n), block barriers only
//   first layer's its gradient's rows go to every block of their neuron half, which steps its
//   backward      weights (fp32 master and state in registers all epoch)
//   beside it     the rows' owners send their rows of each hidden-to-hidden layer's input and
//                 gradient to the owners of 32 x 32 weight tiles (block r: tile r / 4, r % 4), and their
//                 dlogits and the last hidden layer's rows to the owners of the output layer's
//                 8-column blocks; each owner steps its part (master and state in registers) and its
//                 new bf16 values go back into all 16 blocks. Both through L2: written to global memory,
//                 then one multicast bulk copy into the blocks that need them (DSMEM bulk copies of the
//                 new values cost 2.5 us a step more in the lab, DSMEM stores of the operands ~0.7)
//
// So a step has two exchanges on its path (the cluster kernel: seven), the partials and G1, both through L2
// as well since v15 (stored to global memory, then bulk copies into the blocks: 32 and 16 KB of DSMEM stores a
// block took 1.5-2.4 us). Every sum has a fixed order: reruns are bit-identical.
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/fused/activation_of_output.cuh"
#include "sprintnet/ops/cuda/fused/cluster_launch.h"
#include "sprintnet/ops/cuda/fused/fragment_loads.cuh"
#include "sprintnet/ops/cuda/fused/one_cluster_block.cuh"
#include "sprintnet/ops/cuda/fused/ptx.cuh"
#include "sprintnet/ops/cuda/fused/row_loss.cuh"
#include "sprintnet/ops/cuda/fused/rows_epoch.h"
#include "sprintnet/ops/cuda/fused/update_form.cuh"
#include "sprintnet/ops/cuda/fused/warpgroup_mma.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

namespace cg = cooperative_groups;
using bf16 = __nv_bfloat16;

constexpr int kThreads = OneClusterBlock<RowsLayout>::kThreads;
static_assert(kRowsCtas == OneClusterBlock<RowsLayout>::kBlocks);

struct RowsArgs {
  FusedEpochArgs a;
  RowsLayout c;
  unsigned char* scratch;  // [16][own_bytes]: a block's new values before their multicast
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define SPRINTNET_HAS_CLUSTERS 1
#endif

#ifdef SPRINTNET_HAS_CLUSTERS
constexpr int kOwn = kRowsOwn, kRows = kRowsBatch, kWidth = kRowsWidth, kHalf = kRowsHalf;
constexpr int kLd = kRowsLocalLd, kTileLd = kRowsTileLd, kTileElems = 32 * kRowsTileLd;
constexpr int kLdDl = kRowsMaxClasses + 8;
constexpr int kWoBlock = kRowsMaxClasses * 8;  // a block's 8 columns of Wo: [16 classes][8]
enum Bar { kBarPartials = 0, kBarTiles = 1, kBarG1 = 2, kBarSide = 3 };

using fused::activation;
using fused::slope_from_output;
using ptx::mma_bf16;
using ptx::shared_address;

using fused::load_a;
using fused::load_a_trans;
using fused::load_b;
using fused::load_b_trans;
using fused::core_at;
using fused::store_pair;
__device__ __forceinline__ int lane_id() { return fused::fragment_lane(); }
// The tile operands, [128][32] with the 16-byte pieces of row b swizzled by (b / 2) % 4, so the 8 rows an
// ldmatrix reads fall in 8 different bank groups.
__device__ __forceinline__ int swizzled(int b, int col) { return b * 32 + (((col >> 3) ^ ((b >> 1) & 3)) << 3) + (col & 7); }
__device__ __forceinline__ float rounded(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
// One bulk copy of `bytes` from global memory into the same offset of the shared memory of every block
// in `blocks` (a bit a block), completing on each one's mbarrier at `bar`'s offset.
__device__ __forceinline__ void multicast(const void* to, const void* from, std::uint32_t bytes, std::uint32_t bar,
                                          std::uint16_t blocks = 0xffff) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;" ::"r"(
          shared_address(to)),
      "l"(from), "r"(bytes), "r"(bar), "h"(blocks)
      : "memory");
}

// kUpdate: the optimizer's form (update_form.cuh); kAct: the hidden layers' activation.
template <UpdateForm kUpdate, ActivationKind kAct>
struct Rows : OneClusterBlock<RowsLayout> {
  static constexpr bool kAdam = kUpdate == UpdateForm::kAdam;
  unsigned char* scratch;

  // State in registers for the whole epoch: the first layer's (warp w: row tile w & 3 of the block's
  // half against feature tiles first_tiles() (w >> 2) + j), the tiles' (a 16 x 8 piece of the block's
  // 32 x 32 tile of each hidden-to-hidden layer a warp), the output layer's (warp 0: 16 classes x the
  // block's 8 columns).
  float p0[8][4], m0[8][4], v0[kAdam ? 8 : 1][4];
  float pt[2][4], mt[2][4], vt[kAdam ? 2 : 1][4];
  float po[4], mo[4], vo[4];

  __device__ Rows(const RowsArgs& args, unsigned char* shared, int r)
      : OneClusterBlock(args.a, args.c, shared, r), scratch(args.scratch) {}

  // ---- the layout.
  __device__ int hidden() const { return c.hidden; }
  __device__ int tiled() const { return c.hidden - 1; }
  __device__ int width(int h) const { return a.layers[h - 1].out; }  // hidden layer h = 1..H
  __device__ bool has_part() const { return rank < 2 * c.groups; }
  __device__ int half() const { return rank & 1; }
  __device__ int group() const { return rank >> 1; }
  __device__ int first_tiles() const { return c.group / 16; }
  // The first layer's operands, in warpgroup_mma.cuh's canonical layout (wgmma reads them through
  // descriptors): W0 [64 neurons][group], X0 [128 rows][group], D1 (G1 of every row) [128][64].
  __device__ bf16* w0() const { return at<bf16>(c.w0); }
  __device__ bf16* x0() const { return at<bf16>(c.x0); }
  __device__ bf16* d1() const { return at<bf16>(c.d1); }
  __device__ int tile_row() const { return rank >> 2; }
  __device__ int tile_col() const { return rank & 3; }
  __device__ bf16* act(int h) const { return at<bf16>(c.local) + (h - 1) * kOwn * kLd; }              // A_h, own rows
  __device__ bf16* grad(int h) const { return at<bf16>(c.local) + (hidden() + h - 1) * kOwn * kLd; }  // G_h
  __device__ bf16* tiles(int h) const { return at<bf16>(c.tiles) + (h - 1) * 16 * kTileElems; }     // W_h
  __device__ bf16* gz_operand(int h) const { return at<bf16>(c.operands) + (2 * (h - 1)) * kRows * 32; }
  __device__ bf16* x_operand(int h) const { return at<bf16>(c.operands) + (2 * (h - 1) + 1) * kRows * 32; }
  __device__ float* bias(int l) const { return at<float>(c.bias) + l * kWidth; }  // layer l's (l = H: Wo's)
  // The master and state of the biases this block steps: b0's half (blocks 0, 1), a tile row's 32 of each
  // hidden-to-hidden layer (blocks 4 ti), the output layer's (block 0).
  __device__ float* bias_state(int which) const {
    return at<float>(c.bias_state) + which * (kHalf + 32 * tiled() + kRowsMaxClasses);
  }
  __device__ static int out_at(int cls, int i) { return ((i >> 3) * kRowsMaxClasses + cls) * 8 + (i & 7); }
  __device__ static int tiled_at(int o, int i) { return ((o >> 5) * 4 + (i >> 5)) * kTileElems + (o & 31) * kTileLd + (i & 31); }
  // This block's new values of a step, in global memory before the multicast: its tiles, its 8
  // columns of Wo, its biases (b0's half, the tile rows', Wo's).
  __device__ unsigned char* own_new() const { return scratch + rank * c.own_bytes; }
  __device__ bf16* new_tile(int h) const { return reinterpret_cast<bf16*>(own_new()) + (h - 1) * kTileElems; }
  __device__ bf16* new_wo() const { return reinterpret_cast<bf16*>(own_new()) + tiled() * kTileElems; }
  __device__ float* new_bias() const { return reinterpret_cast<float*>(new_wo() + kWoBlock); }

  // ---- parameters (load_state, store_state: OneClusterBlock).
  __device__ float step(float grad, float& p, float& m, float& v) const {
    fused_step<kUpdate>(a.optimizer, scalars, p, m, v, grad, a.optimizer.state1 != nullptr);
    return p;
  }
  // The first layer's parameter e of register tile j: its row (neuron) and column (feature).
  __device__ int first_o(int e) const { return half() * kHalf + 16 * (warp & 3) + g + 8 * (e >> 1); }
  __device__ int first_f(int j, int e) const {
    return group() * c.group + 8 * ((warp >> 2) * first_tiles() + j) + 2 * t + (e & 1);
  }
  __device__ bool first_valid(int j, int e) const {
    return has_part() && j < first_tiles() && first_o(e) < layer(0).out && first_f(j, e) < layer(0).in;
  }
  __device__ int tile_o(int e) const { return 32 * tile_row() + 16 * (warp >> 2) + g + 8 * (e >> 1); }
  __device__ int tile_i(int e) const { return 32 * tile_col() + 8 * (warp & 3) + 2 * t + (e & 1); }
  __device__ int out_cls(int e) const { return g + 8 * (e >> 1); }
  __device__ int out_i(int e) const { return 8 * rank + 2 * t + (e & 1); }
  __device__ bool out_valid(int e) const {
    return warp == 0 && out_cls(e) < layer(hidden()).out && out_i(e) < layer(hidden()).in;
  }
  // Who steps the biases, spread so no block takes two jobs on top of its share of the first layer
  // (the step waits for the slowest block): b0's half h, blocks 14 + h (they hold G1 of that half, and
  // with 784 inputs no part of the first layer); a hidden-to-hidden layer h's, its tile column (h - 1)'s
  // blocks (a tile row's 32 each, from the gradient operand they hold); the output layer's, block 14.
  __device__ bool steps_first_bias() const { return rank == kRowsCtas - 2 + half(); }
  __device__ bool steps_tile_bias(int h) const { return tile_col() == h - 1; }
  __device__ bool steps_out_bias() const { return rank == kRowsCtas - 2; }
  // f(k, L, o): every bias this block steps, by thread, with its slot in bias_state.
  template <typename F>
  __device__ void for_each_own_bias(F f) const {
    for (int k = static_cast<int>(threadIdx.x); k < kHalf + 32 * tiled() + kRowsMaxClasses; k += kThreads) {
      if (k < kHalf) {
        if (steps_first_bias() && half() * kHalf + k < layer(0).out) f(k, layer(0), half() * kHalf + k);
      } else if (k < kHalf + 32 * tiled()) {
        const int h = (k - kHalf) / 32 + 1, o = 32 * tile_row() + (k - kHalf) % 32;
        if (steps_tile_bias(h) && o < layer(h).out) f(k, layer(h), o);
      } else {
        const int cls = k - kHalf - 32 * tiled();
        if (steps_out_bias() && cls < layer(hidden()).out) f(k, layer(hidden()), cls);
      }
    }
  }

  __device__ void load(const bf16* w) {
    for (int i = static_cast<int>(threadIdx.x); i < c.bytes / 16; i += kThreads) {
      reinterpret_cast<uint4*>(smem)[i] = make_uint4(0, 0, 0, 0);
    }
    __syncthreads();
    const FusedLayer& first = layer(0);
    if (has_part()) {
      for (int i = static_cast<int>(threadIdx.x); i < kHalf * c.group; i += kThreads) {
        const int row = i / c.group, f = i % c.group, o = half() * kHalf + row, feature = group() * c.group + f;
        if (o < first.out && feature < first.in) w0()[core_at(row, f, c.group)] = w[index(first, o, feature)];
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v;
        load_state(index(first, first_o(e), first_f(j, e)), first_valid(j, e), p0[j][e], m0[j][e], v);
        if constexpr (kAdam) v0[j][e] = v;
      }
#pragma unroll
    for (int h = 1; h < kRowsMaxHidden; ++h) {  // unrolled: the registers' index is a constant
      if (h >= hidden()) break;
      const FusedLayer& L = layer(h);
      for (int i = static_cast<int>(threadIdx.x); i < L.out * L.in; i += kThreads) {
        const int o = i / L.in, k = i % L.in;
        tiles(h)[tiled_at(o, k)] = w[index(L, o, k)];
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v;
        load_state(index(L, tile_o(e), tile_i(e)), tile_o(e) < L.out && tile_i(e) < L.in, pt[h - 1][e], mt[h - 1][e], v);
        if constexpr (kAdam) vt[h - 1][e] = v;
      }
    }
    const FusedLayer& out = layer(hidden());
    for (int i = static_cast<int>(threadIdx.x); i < out.out * out.in; i += kThreads) {
      const int cls = i / out.in, k = i % out.in;
      at<bf16>(c.wo)[out_at(cls, k)] = w[index(out, cls, k)];
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) load_state(index(out, out_cls(e), out_i(e)), out_valid(e), po[e], mo[e], vo[e]);
    for (int l = 0; l <= hidden(); ++l) {
      const FusedLayer& L = layer(l);
      for (int o = static_cast<int>(threadIdx.x); o < L.out && L.bias; o += kThreads) {
        bias(l)[o] = __bfloat162float(w[index(L, o, L.in)]);
      }
    }
    for_each_own_bias([&](int k, const FusedLayer& L, int o) {
      if (!L.bias) return;
      load_state(index(L, o, L.in), true, bias_state(0)[k], bias_state(1)[k], bias_state(2)[k]);
    });
    ptx::fence_proxy_async();  // W0's stores, before the products read it through the async proxy
  }
  __device__ void store(bf16* w) const {
    const FusedLayer& first = layer(0);
    if (has_part()) {
      for (int i = static_cast<int>(threadIdx.x); i < kHalf * c.group; i += kThreads) {
        const int row = i / c.group, f = i % c.group, o = half() * kHalf + row, feature = group() * c.group + f;
        if (o < first.out && feature < first.in) w[index(first, o, feature)] = w0()[core_at(row, f, c.group)];
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (first_valid(j, e)) store_state(index(first, first_o(e), first_f(j, e)), p0[j][e], m0[j][e], kAdam ? v0[kAdam ? j : 0][e] : 0.0f);
      }
#pragma unroll
    for (int h = 1; h < kRowsMaxHidden; ++h) {
      if (h >= hidden()) break;
      const FusedLayer& L = layer(h);
      for (int i = static_cast<int>(threadIdx.x); i < 32 * 32; i += kThreads) {
        const int o = 32 * tile_row() + i / 32, k = 32 * tile_col() + i % 32;
        if (o < L.out && k < L.in) w[index(L, o, k)] = tiles(h)[tiled_at(o, k)];
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (tile_o(e) < L.out && tile_i(e) < L.in) {
          store_state(index(L, tile_o(e), tile_i(e)), pt[h - 1][e], mt[h - 1][e], kAdam ? vt[kAdam ? h - 1 : 0][e] : 0.0f);
        }
      }
    }
    const FusedLayer& out = layer(hidden());
    for (int i = static_cast<int>(threadIdx.x); i < out.out * 8; i += kThreads) {
      const int cls = i / 8, k = 8 * rank + i % 8;
      if (k < out.in) w[index(out, cls, k)] = at<bf16>(c.wo)[out_at(cls, k)];
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (out_valid(e)) store_state(index(out, out_cls(e), out_i(e)), po[e], mo[e], vo[e]);
    }
    for_each_own_bias([&](int k, const FusedLayer& L, int o) {
      if (!L.bias) return;
      store_state(index(L, o, L.in), bias_state(0)[k], bias_state(1)[k], bias_state(2)[k]);
      w[index(L, o, L.in)] = __float2bfloat16_rn(bias_state(0)[k]);
    });
  }

  // The column sums over the batch's 128 rows of `cols` columns (16, 32 or 64) of a bf16 matrix,
  // element(b, col) its value: thread i adds part i / cols of the rows, then threads below `cols` add the
  // parts (a fixed order). The whole block calls it; threads below `cols` get their column's sum.
  template <typename F>
  __device__ float column_sum(int cols, F element) const {
    const int col = static_cast<int>(threadIdx.x) % cols, part = static_cast<int>(threadIdx.x) / cols;
    const int span = kRows * cols / kThreads;
    float sum = 0.0f;
#pragma unroll 8
    for (int b = part * span; b < (part + 1) * span; ++b) sum += element(b, col);
    at<float>(c.sums)[threadIdx.x] = sum;
    __syncthreads();
    float total = 0.0f;
    if (static_cast<int>(threadIdx.x) < cols) {
      for (int q = 0; q < kThreads / cols; ++q) total += at<float>(c.sums)[q * cols + col];
    }
    __syncthreads();  // the sums' buffer is free again
    return total;
  }

  // ---- the batch: the block's group of features of every row, 16-byte pieces by cp.async into the stage,
  // then bf16 into X0 by the thread that copied them (v15i), after the copies' wait and a block barrier;
  // the own rows' labels.
  __device__ int pieces() const { return c.group / 16; }
  // The pieces a thread copies and then converts (the same thread does both, v15i): piece `piece` of rows
  // row0 + kBatchRowStep k, k < kBatchPieces. Eight consecutive threads take one piece of 8 consecutive rows:
  // their converted 16-byte stores fill one core matrix's 128 bytes, every bank once, and a warp's copies read
  // 8 rows x 4 pieces, the sectors a row-major mapping reads too (each row is its own sample).
  struct BatchPieces {
    int piece, row0;
  };
  static constexpr int kBatchPieces = kRows * 8 / kThreads, kBatchRowStep = kThreads / 8;
  static_assert(kThreads % 64 == 0 && kRows % kBatchRowStep == 0, "whole core-matrix rows a thread group");
  __device__ static BatchPieces batch_pieces() {
    const int i = static_cast<int>(threadIdx.x);
    return {(i >> 3) & 7, (i >> 6) * 8 + (i & 7)};
  }
  __device__ void prefetch_samples(std::int64_t s) const {
    if (a.order == nullptr || s >= a.steps || threadIdx.x >= rows_of(s)) return;
    ptx::copy_async_4(shared_address(at<int>(c.next) + threadIdx.x), a.order + s * a.batch + threadIdx.x);
  }
  __device__ void copy_batch(std::int64_t s) const {
    if (!has_part() || s >= a.steps) return;
    const int n = static_cast<int>(rows_of(s)), features = layer(0).in;
    const int* samples = at<int>(c.next);
    const BatchPieces mine = batch_pieces();
    const int f = group() * c.group + 16 * mine.piece;
    if (mine.piece >= pieces() || f >= features) return;
    const std::uint32_t to = shared_address(at<std::uint8_t>(c.stage) + mine.row0 * c.group + 16 * mine.piece);
#pragma unroll
    for (int k = 0; k < kBatchPieces; ++k) {
      const int row = mine.row0 + kBatchRowStep * k;
      if (row >= n) break;
      const std::int64_t at_sample = a.order != nullptr ? samples[row] : s * a.batch + row;
      ptx::copy_async_16(to + kBatchRowStep * k * c.group, a.images + at_sample * features + f);
    }
  }
  __device__ void copy_labels(std::int64_t s) const {
    if (threadIdx.x >= kOwn || s >= a.steps) return;
    const int row = kOwn * rank + static_cast<int>(threadIdx.x);
    if (row >= rows_of(s)) return;
    const std::int64_t at_sample = a.order != nullptr ? at<int>(c.next)[row] : s * a.batch + row;
    ptx::copy_async_4(shared_address(at<int>(c.labels) + threadIdx.x), a.labels + at_sample);
  }
  __device__ void convert_batch(std::int64_t s) const {
    if (!has_part() || s >= a.steps) return;
    const int n = static_cast<int>(rows_of(s)), features = layer(0).in, first = group() * c.group, count = pieces();
    const int width = c.group;
    const float scale = a.scale, shift = a.shift;  // in registers (v16: reloaded from the parameters 8 times a piece)
    const std::uint8_t* stage = at<std::uint8_t>(c.stage);
    // A row's 8 pieces a thread group, as copy_batch read them from global memory before v15i, put all eight on
    // the same banks of the canonical layout (the staging took 1.43 us instead of 0.92): batch_pieces()' mapping.
    // The caller waits for the copies and then passes a block barrier (without it racecheck saw them race the
    // next step's partials, v15i). A thread's rows are kBatchRowStep apart, so its stage and X0 addresses step
    // by a constant (v16: core_at from the runtime width a piece).
    const BatchPieces mine = batch_pieces();
    const int piece = mine.piece, row0 = mine.row0;
    if (piece < count) {
      const std::uint8_t* from = stage + row0 * width + 16 * piece;
      bf16* to = x0() + core_at(row0, 16 * piece, width);
      const bool features_valid = first + 16 * piece < features;
#pragma unroll
      for (int k = 0; k < kBatchPieces; ++k) {
        // A row past the batch or a piece past the features converts what the stage holds and stores zeros
        // (one select a word, v16: a select a value cost 16 instructions a piece).
        const bool valid = features_valid && row0 + kBatchRowStep * k < n;
        const uint4 px = *reinterpret_cast<const uint4*>(from + kBatchRowStep * k * width);
        const auto pair = [&](std::uint32_t word, int j) {  // bytes j, j + 1 as a bf16 pair's bits, or zeros
          const __nv_bfloat162 v = __floats2bfloat162_rn(ptx::byte_as_float(word, j) * scale + shift,
                                                         ptx::byte_as_float(word, j + 1) * scale + shift);
          return valid ? *reinterpret_cast<const std::uint32_t*>(&v) : 0u;
        };
        // The piece's 16 values as two 16-byte stores: two core matrices' rows (the second 64 elements on).
        bf16* row = to + kBatchRowStep * k * width;  // core_at: kBatchRowStep rows are width x kBatchRowStep on
        *reinterpret_cast<uint4*>(row) = make_uint4(pair(px.x, 0), pair(px.x, 2), pair(px.y, 0), pair(px.y, 2));
        *reinterpret_cast<uint4*>(row + 64) = make_uint4(pair(px.z, 0), pair(px.z, 2), pair(px.w, 0), pair(px.w, 2));
      }
    }
    ptx::fence_proxy_async();  // before the products read X0 through the async proxy
  }

  // ---- the first layer's forward: the block's partial product of every row against its half, to the
  // rows' owners (rows 16w + g to block 2w, 16w + 8 + g to 2w + 1: slot `rank` of their partials), after
  // the cluster barrier that frees them; the owners add the groups (in group order), the bias and the
  // activation.
  __device__ float* slot(int s) const { return at<float>(c.partials) + s * kOwn * kHalf; }
  // Rows 16 warp.. against the half's 64 neurons: on sm_90a one warpgroup product a k-step (v14: rows
  // 64 (warp / 4).., both operands K-major from shared memory), issued here and waited for in
  // first_partial after the cluster barrier (the products run while the block waits there); else mma.sync
  // chains reading the same layout.
  template <int kSteps>
  __device__ void first_products(float (&acc)[8][4]) const {
#ifdef SPRINTNET_HAS_WGMMA
    float(&d)[32] = reinterpret_cast<float(&)[32]>(acc);
    const int row0 = 64 * (warp >> 2);
    // Each k-step is the next two core matrices of both operands, 256 bytes on (v16: a descriptor built anew
    // a k-step from the runtime width was ~6 instructions).
    const std::uint64_t x_rows = fused::k_major(x0() + core_at(row0, 0, c.group), c.group);
    const std::uint64_t w_rows = fused::k_major(w0(), c.group);
    fused::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      fused::wgmma_m64n64k16<0, 0>(d, fused::advanced(x_rows, 256 * ks), fused::advanced(w_rows, 256 * ks), ks > 0);
    }
    fused::wgmma_commit();
#else
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      std::uint32_t fa[4];
      fused::load_a_core(fa, x0(), c.group, 16 * warp, 16 * ks);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        std::uint32_t fb[2];
        fused::load_b_core(fb, w0(), c.group, 8 * nt, 16 * ks);
        mma_bf16(acc[nt], fa, fb);
      }
    }
#endif
  }
  __device__ void first_partial() {
    float acc[8][4] = {};
    // Each k-step count unrolled (v13d: a loop over the runtime count took 1.79 us, this 1.22).
    switch (first_tiles()) {
      case 1: first_products<1>(acc); break;
      case 2: first_products<2>(acc); break;
      case 3: first_products<3>(acc); break;
      case 4: first_products<4>(acc); break;
      case 5: first_products<5>(acc); break;
      case 6: first_products<6>(acc); break;
      case 7: first_products<7>(acc); break;
      default: first_products<8>(acc); break;
    }
    stamp();  // profile: a sub-stage (the products, then the wait for the slowest block and the sends)
    ptx::cluster_wait();
#ifdef SPRINTNET_HAS_WGMMA
    fused::wgmma_wait_all();  // first_products' warpgroup products
#endif
    // Through L2 (v15g): each owner's 8 rows x 64 (its slot's layout) stored to global memory, then one bulk
    // copy an owner (32 KB of DSMEM stores a block, 8 a thread, took 1.3-2 us).
    const bool odd = (t & 1) != 0;
    const int owner = 2 * warp + (odd ? 1 : 0), col = (t & 2) * 2;
    float* own_partials = reinterpret_cast<float*>(own_new() + c.own_partials);
    float* mine = own_partials + owner * kOwn * kHalf + g * kHalf + col;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const float got0 = __shfl_xor_sync(0xffffffffu, odd ? acc[nt][0] : acc[nt][2], 1);
      const float got1 = __shfl_xor_sync(0xffffffffu, odd ? acc[nt][1] : acc[nt][3], 1);
      *reinterpret_cast<float4*>(mine + 8 * nt) =
          odd ? make_float4(got0, got1, acc[nt][2], acc[nt][3]) : make_float4(acc[nt][0], acc[nt][1], got0, got1);
    }
    // Warp w stores the whole slices of owners 2w and 2w + 1, so it copies them itself, after a warp barrier
    // (v15k: no block barrier waiting for the slowest warp).
    asm volatile("fence.proxy.async.global;" ::: "memory");  // the stores above, before the copies read them
    __syncwarp();
    if (lane < 2) {
      const int d = 2 * warp + lane;
      multicast(slot(rank), own_partials + d * kOwn * kHalf, kOwn * kHalf * 4, bar(kBarPartials),
                static_cast<std::uint16_t>(1u << d));
    }
  }
  // `tiles`: the last step's new values (b0 among them) are on their way into this block first.
  __device__ void first_reduce(bool tiles) {
    add_metrics();
    wait(kBarPartials, 2u * c.groups * kOwn * kHalf * 4);  // every part's, this block's own among them
    if (tiles) wait(kBarTiles, tile_bytes());
    const int j = static_cast<int>(threadIdx.x) >> 5, col = (static_cast<int>(threadIdx.x) & 31) * 4, h = col >> 6;
    float z[4] = {};
    // Every group's slot the next 4 KB on; unrolled over the most groups (8), so the loads need not wait for
    // the adds before them (v16b: a loop over the run-time count).
    const float* part = slot(h) + j * kHalf + (col & 63);
#pragma unroll
    for (int q = 0; q < kRowsCtas / 2; ++q) {
      if (q >= c.groups) break;
      const float4 v = *reinterpret_cast<const float4*>(part + q * 2 * kOwn * kHalf);
      z[0] += v.x;
      z[1] += v.y;
      z[2] += v.z;
      z[3] += v.w;
    }
    __syncthreads();  // A1 aliases the partials
    const bool valid = kOwn * rank + j < rows;
    float y[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) y[q] = valid && col + q < width(1) ? activation<kAct>(z[q] + bias(0)[col + q]) : 0.0f;
    store_pair(act(1) + j * kLd + col, y[0], y[1]);
    store_pair(act(1) + j * kLd + col + 2, y[2], y[3]);
    __syncthreads();
  }

  // ---- the own rows through the rest: A_{h+1}ᵀ[16w.., rows] = f(W_h[16w.., :] · A_hᵀ + b_h).
  __device__ void forward(int h) const {
    const bf16* w = tiles(h);
    const bf16* x = act(h);
    float acc[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < 8; ks += 2) {
      std::uint32_t fa0[4], fa1[4], fb0[2], fb1[2];
      const bf16* tile = w + ((warp >> 1) * 4 + (ks >> 1)) * kTileElems + (warp & 1) * 16 * kTileLd;
      load_a(fa0, tile, kTileLd);
      load_a(fa1, tile + 16, kTileLd);
      load_b(fb0, x + 16 * ks, kLd);
      load_b(fb1, x + 16 * ks + 16, kLd);
      mma_bf16(acc[0], fa0, fb0);
      mma_bf16(acc[1], fa1, fb1);
    }
    bf16* y = act(h + 1);
    const float* b = bias(h);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int o = 16 * warp + g + 8 * (e >> 1), row = 2 * t + (e & 1);
      const bool valid = o < width(h + 1) && kOwn * rank + row < rows;
      y[row * kLd + o] = __float2bfloat16_rn(valid ? activation<kAct>(acc[0][e] + acc[1][e] + b[o]) : 0.0f);
    }
    __syncthreads();
  }
  // Warp 0: the own rows' logits (8 rows, twice: the mma's 16 rows), loss and dlogits; each row's loss
  // and hit into block 0 (its rows of this step's parity).
  __device__ void output(int parity) const {
    if (warp == 0) {
      const FusedLayer& out = layer(hidden());
      const bf16* x = act(hidden());
      const bf16* wo = at<bf16>(c.wo);
      float acc[2][4] = {};
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        std::uint32_t fa[4];
        ptx::ldmatrix_x4(fa, shared_address(x + (lane & 7) * kLd + 16 * ks + (lane >> 4) * 8));
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          std::uint32_t fb[2];
          ptx::ldmatrix_x2(fb, shared_address(wo + ((2 * ks + ((lane >> 3) & 1)) * kRowsMaxClasses + 8 * nt + (lane & 7)) * 8));
          mma_bf16(acc[nt], fa, fb);
        }
      }
      const int classes = out.out, row = kOwn * rank + g;
      const bool valid = row < rows;
      const int label = valid ? at<int>(c.labels)[g] : 0;
      float v[4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int cls = 8 * nt + 2 * t + e;
          v[2 * nt + e] = cls < classes ? acc[nt][e] + bias(hidden())[cls] : -INFINITY;
        }
      const bool mse = a.loss == FusedLoss::kMse;
      const float grad_scale = mse ? 2.0f / static_cast<float>(rows * classes) : 1.0f / static_cast<float>(rows);
      const auto r = fused::row_loss<fused::FragmentRow<2>>(v, classes, label, mse, a.smoothing, grad_scale);
      bf16* dl = at<bf16>(c.dl) + row * kLdDl;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        store_pair(dl + 8 * nt + 2 * t, valid ? r.grad[2 * nt] : 0.0f, valid ? r.grad[2 * nt + 1] : 0.0f);
      }
      if (t == 0) {
        const cg::cluster_group cluster = cg::this_cluster();
        *cluster.map_shared_rank(at<double>(c.row_loss) + parity * kRows + row, 0) = valid ? r.loss : 0.0;
        *cluster.map_shared_rank(at<int>(c.row_hit) + parity * kRows + row, 0) = valid && r.best_index == label ? 1 : 0;
      }
    }
    __syncthreads();
  }
  // G_H = (dlogits · Wo) ⊙ f'(A_H), the own rows.
  __device__ void output_backward() const {
    std::uint32_t fa[4], fb[2];
    const int m = lane >> 3, r = lane & 7;
    ptx::ldmatrix_x4_trans(fa, shared_address(at<bf16>(c.wo) + ((2 * warp + (m & 1)) * kRowsMaxClasses + r + (m >> 1) * 8) * 8));
    load_b(fb, at<bf16>(c.dl) + kOwn * rank * kLdDl, kLdDl);
    float acc[4] = {};
    mma_bf16(acc, fa, fb);
    const bf16* y = act(hidden());
    bf16* d = grad(hidden());
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 16 * warp + g + 8 * (e >> 1), row = 2 * t + (e & 1);
      d[row * kLd + i] = __float2bfloat16_rn(acc[e] * slope_from_output<kAct>(__bfloat162float(y[row * kLd + i])));
    }
    __syncthreads();
  }
  // G_h = (G_{h+1} · W_h) ⊙ f'(A_h), the own rows.
  __device__ void backward(int h) const {
    const bf16* w = tiles(h);
    const bf16* dz = grad(h + 1);
    float acc[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < 8; ks += 2) {
      std::uint32_t fa0[4], fa1[4], fb0[2], fb1[2];
      const bf16* tile = w + ((ks >> 1) * 4 + (warp >> 1)) * kTileElems + (warp & 1) * 16;
      load_a_trans(fa0, tile, kTileLd);
      load_a_trans(fa1, tile + 16 * kTileLd, kTileLd);
      load_b(fb0, dz + 16 * ks, kLd);
      load_b(fb1, dz + 16 * ks + 16, kLd);
      mma_bf16(acc[0], fa0, fb0);
      mma_bf16(acc[1], fa1, fb1);
    }
    const bf16* x = act(h);
    bf16* below = grad(h);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 16 * warp + g + 8 * (e >> 1), row = 2 * t + (e & 1);
      below[row * kLd + i] =
          __float2bfloat16_rn((acc[0][e] + acc[1][e]) * slope_from_output<kAct>(__bfloat162float(x[row * kLd + i])));
    }
    __syncthreads();
  }

  // ---- the sends once the own rows' gradients are done: G1's rows to every block of each neuron half
  // (the path: the first layer's backward waits for them), then the tiles' and Wo's operands.
  // G1 through L2 (v15e): the own 8 rows of each half are one contiguous KB of D1's canonical layout, stored
  // to global memory and multicast into the 8 blocks of the half (16 KB of DSMEM stores a block, 4 a
  // thread, took ~2 us to land).
  __device__ void send_g1() const {
    // Warp h takes half h's KB, two 16-byte pieces a lane, and copies it after a warp barrier (v15k).
    if (warp >= 2) return;
    const int h = warp;
    unsigned char* own_rows = own_new() + c.own_g1 + h * kOwn * kHalf * 2;
#pragma unroll
    for (int q = lane; q < kOwn * 8; q += 32) {
      const int j = q >> 3, p = q & 7;
      *reinterpret_cast<uint4*>(own_rows + core_at(j, 8 * p, kHalf) * 2) =
          *reinterpret_cast<const uint4*>(grad(1) + j * kLd + h * kHalf + 8 * p);
    }
    asm volatile("fence.proxy.async.global;" ::: "memory");  // before the copy reads them
    __syncwarp();
    if (lane == 0) {
      multicast(d1() + core_at(kOwn * rank, 0, kHalf), own_rows, kOwn * kHalf * 2, bar(kBarG1),
                static_cast<std::uint16_t>(0x5555u << h));
    }
  }
  // The operands beside the path go through L2 like the new values (v13's probe: 36 KB of DSMEM stores a
  // block cost ~2 us a step on the path): every block writes its rows of them to global memory, then
  // multicasts each 8-row slice to the blocks that need it, completing on their side mbarrier.
  // What lands on a block's side mbarrier a step: every hidden-to-hidden layer's two operands ([128][32]
  // bf16), the other blocks' dlogits rows, every block's rows of its Wo columns.
  __device__ std::uint32_t side_bytes() const {
    return tiled() * 2u * kRows * 32 * 2 + (kRowsCtas - 1u) * kOwn * kLdDl * 2 + kRowsCtas * kOwn * 16u;
  }
  // This block's 8-row slice of layer h's gradient (input = 0) or input (1) operand for tile row or column
  // `key`, [8 rows][64 bytes], in its multicast region (rows_layout.h: own_operands).
  __device__ unsigned char* operand_slice(int h, int input, int key) const {
    return own_new() + c.own_operands + (((h - 1) * 2 + input) * 4 + key) * kOwn * 64;
  }
  __device__ void send_side() const {
    unsigned char* dl_rows = own_new() + c.own_dl;
    unsigned char* col_rows = own_new() + c.own_cols;
    // The tile operands' pieces, each row's 16-byte pieces swizzled as the receivers keep them (swizzled()).
    for (int idx = static_cast<int>(threadIdx.x); idx < 256 * tiled(); idx += kThreads) {
      const int h = (idx >> 8) + 1, input = (idx >> 7) & 1, key = (idx >> 5) & 3, j = (idx >> 2) & 7, p = idx & 3;
      const uint4 value = *reinterpret_cast<const uint4*>((input ? act(h) : grad(h + 1)) + j * kLd + 32 * key + 8 * p);
      const int b = kOwn * rank + j;
      *reinterpret_cast<uint4*>(operand_slice(h, input, key) + j * 64 + ((p ^ ((b >> 1) & 3)) << 4)) = value;
    }
    // dlogits' own rows (8 x 48 bytes), and the last hidden layer's own rows of each block's 8 columns.
    for (int i = static_cast<int>(threadIdx.x); i < 24 + 128; i += kThreads) {
      if (i < 24) {
        const int j = i / 3, p = i % 3;
        *reinterpret_cast<uint4*>(dl_rows + j * 48 + 16 * p) =
            *reinterpret_cast<const uint4*>(at<bf16>(c.dl) + (kOwn * rank + j) * kLdDl + 8 * p);
      } else {
        const int d = (i - 24) >> 3, j = (i - 24) & 7;
        *reinterpret_cast<uint4*>(col_rows + (d * kOwn + j) * 16) =
            *reinterpret_cast<const uint4*>(act(hidden()) + j * kLd + 8 * d);
      }
    }
    asm volatile("fence.proxy.async.global;" ::: "memory");  // the stores above, before the copies read them
    __syncthreads();
    if (lane != 0) return;
    // The copies, lane 0 of warp k % 8 issuing copy k: a tile operand's slice to the 4 blocks of its tile
    // row (gradient) or column (input), the dlogits rows to every other block, block d's columns to d.
    const std::uint32_t side_bar = bar(kBarSide);
    for (int k = warp; k < 8 * tiled() + 1 + kRowsCtas; k += kThreads / 32) {
      if (k < 8 * tiled()) {
        const int h = k / 8 + 1, input = (k >> 2) & 1, key = k & 3;
        const std::uint16_t mask = input ? static_cast<std::uint16_t>(0x1111u << key) : static_cast<std::uint16_t>(0xFu << (4 * key));
        multicast((input ? x_operand(h) : gz_operand(h)) + kOwn * rank * 32, operand_slice(h, input, key), kOwn * 64,
                  side_bar, mask);
      } else if (k == 8 * tiled()) {
        multicast(at<bf16>(c.dl) + kOwn * rank * kLdDl, dl_rows, kOwn * kLdDl * 2, side_bar,
                  static_cast<std::uint16_t>(0xFFFFu & ~(1u << rank)));
      } else {
        const int d = k - 8 * tiled() - 1;
        multicast(at<bf16>(c.out_cols) + kOwn * rank * 8, col_rows + d * kOwn * 16, kOwn * 16, side_bar,
                  static_cast<std::uint16_t>(1u << d));
      }
    }
  }

  // ---- the first layer's weight gradient over the batch and its update (v11a's 4 x 2 warps), and its
  // biases' half (blocks 14 and 15). Branch-free: every warp computes 8 feature tiles (with 7 a warp, the
  // first four warps' eighth is the next four's first, the last four's the zero padding of X0) and steps
  // all 32 registers, storing only the valid ones (a branch a tile had split every ldmatrix and mma into
  // its own basic block: 5.5 us a step instead of ~1, measured).
  __device__ void first_backward() {
    if (has_part()) {
      const int m_tile = warp & 3, n0 = (warp >> 2) * first_tiles();
      float acc[8][4] = {};
#ifdef SPRINTNET_HAS_WGMMA
      // v14: warpgroup w / 4 takes feature tiles n0.. against all 64 neurons, k = the batch's 128 rows: both
      // operands MN-major. Its 64 features run past the group's when first_tiles() < 8 (into X0's next rows
      // or the region after it): those are the discarded eighth tiles below.
      float(&d)[32] = reinterpret_cast<float(&)[32]>(acc);
      // A k-step is the next 16 rows: two core-matrix rows of each operand, 2 x 16 x width bytes on (v16).
      const std::uint64_t g1_rows = fused::mn_major(d1(), kHalf);
      const std::uint64_t x_rows = fused::mn_major(x0() + core_at(0, 8 * n0, c.group), c.group);
      const std::uint32_t x_step = 32u * static_cast<std::uint32_t>(c.group);
      fused::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        fused::wgmma_m64n64k16<1, 1>(d, fused::advanced(g1_rows, 32u * kHalf * ks), fused::advanced(x_rows, x_step * ks),
                                     ks > 0);
      }
      fused::wgmma_commit();
      fused::wgmma_wait_all();
#else
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        std::uint32_t fa[4];
        fused::load_a_core_trans(fa, d1(), kHalf, 16 * m_tile, 16 * ks);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          std::uint32_t fb[2];
          fused::load_b_core_trans(fb, x0(), c.group, 8 * (n0 + j), 16 * ks);
          mma_bf16(acc[j], fa, fb);
        }
      }
#endif
      // No validity test a parameter: the padding's (neurons past the layer's width, features past its
      // inputs) start at zero with zero state and get zero gradients (G1's and X0's padding is zero), so
      // they stay zero under every update form; the eighth tile of the first four warps (another warp's
      // parameters) is stepped in registers and never stored.
      // Feature tile j is the next core matrix, 64 elements on (v16: the address from the runtime width a store).
      bf16* const w_rows[2] = {w0() + core_at(16 * m_tile + g, 8 * n0 + 2 * t, c.group),
                               w0() + core_at(16 * m_tile + g + 8, 8 * n0 + 2 * t, c.group)};
#pragma unroll
      for (int j = 0; j < 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float w[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int q = 2 * h + e;
            float unused = 0.0f;
            w[e] = step(acc[j][q], p0[j][q], m0[j][q], kAdam ? v0[kAdam ? j : 0][q] : unused);
          }
          if (j < first_tiles()) store_pair(w_rows[h] + 64 * j, w[0], w[1]);
        }
      }
      ptx::fence_proxy_async();  // the new W0, before the next step's products read it
    }
    stamp();  // profile: a sub-stage
    if (!steps_first_bias() || !layer(0).bias) return;
    // b0's half: the column sums of G1, into the block's new values.
    const int k = static_cast<int>(threadIdx.x);
    const float sum = column_sum(kHalf, [&](int b, int col) { return __bfloat162float(d1()[core_at(b, col, kHalf)]); });
    if (k < kHalf) {
      new_bias()[k] = half() * kHalf + k < layer(0).out ? rounded(step(sum, bias_state(0)[k], bias_state(1)[k], bias_state(2)[k])) : 0.0f;
    }
  }

  // ---- beside the path: the block's tiles, Wo's 8 columns and its biases stepped from their operands
  // (sent by every row owner), the new values through global memory into all 16 blocks.
  // acc: the warp's 16 x 8 piece of the tile's gradient; sums: the same 16 rows of the gradient operand
  // summed over the batch (the tile row's bias gradient), one more mma a k-step against B = 1 (v13e: a
  // column sum over the block cost 0.3 us and two block barriers on the step's path).
  // kSums: only the warps that step a tile row's biases add the sums (v16: 8 mma a warp fewer elsewhere; the
  // stage's time did not move measurably, its cost is the index arithmetic and the latencies).
  template <bool kSums>
  __device__ void tile_gradient(float (&acc)[4], float (&sums)[4], int h) const {
    const int ms = warp >> 2, ns = warp & 3;
    constexpr std::uint32_t kOnes = 0x3F803F80u;  // two bf16 1.0
    const std::uint32_t ones[2] = {kOnes, kOnes};
    // k-step ks reads rows 16 ks on, whose swizzle is k-step 0's ((16 ks + b) / 2 % 4 = b / 2 % 4): the
    // addresses of k-step 0 and 1 KB a step (v16b: load_*_swizzled computed them anew a k-step).
    const int l = lane_id();
    const std::uint32_t a_rows = shared_address(gz_operand(h) + swizzled((l & 7) + (l >> 4) * 8, 16 * ms + ((l >> 3) & 1) * 8));
    const std::uint32_t b_rows = shared_address(x_operand(h) + swizzled((l & 7) + ((l >> 3) & 1) * 8, 8 * ns));
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      std::uint32_t fa[4], fb[2];
      ptx::ldmatrix_x4_trans(fa, a_rows + 1024 * ks);
      ptx::ldmatrix_x2_trans(fb, b_rows + 1024 * ks);
      mma_bf16(acc, fa, fb);
      if constexpr (kSums) mma_bf16(sums, fa, ones);
    }
  }
  __device__ std::uint32_t tile_bytes() const {
    std::uint32_t bytes = 16u * (tiled() * kRowsTileBytes + kWoBlock * 2);
    if (layer(0).bias) bytes += 2u * kHalf * 4 + tiled() * 4u * 32 * 4 + kRowsMaxClasses * 4;
    return bytes;
  }
  static_assert(2 * kRowsOwn * kRowsLocalLd * 2 >= kThreads * 4 * 4, "Wo's partials fit one hidden layer's own-rows buffers");
  __device__ float* wo_partials() const { return at<float>(c.local); }  // [warp][lane][4], 4 KB
  __device__ void step_wo() {
    float grad[4] = {};
    for (int from = 0; from < kThreads / 32; ++from) {  // warp order
      const float4 v = *reinterpret_cast<const float4*>(wo_partials() + (from * 32 + lane) * 4);
      grad[0] += v.x;
      grad[1] += v.y;
      grad[2] += v.z;
      grad[3] += v.w;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float w[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) w[e] = out_valid(2 * r + e) ? step(grad[2 * r + e], po[2 * r + e], mo[2 * r + e], vo[2 * r + e]) : 0.0f;
      store_pair(new_wo() + out_cls(2 * r) * 8 + 2 * t, w[0], w[1]);
    }
  }
  // `staging`: the next batch's copies' wait, a block barrier and the conversion, before the barrier in front of
  // the copies (v15i: the conversion had two block barriers of its own after them); its block barrier also puts
  // Wo's partial products before warp 0 adds them (v16).
  template <typename F>
  __device__ void side(F staging) {
    wait(kBarSide, side_bytes());
    stamp();  // profile: a sub-stage
#pragma unroll
    for (int h = 1; h < kRowsMaxHidden; ++h) {
      if (h >= hidden()) break;
      const FusedLayer& L = layer(h);
      float acc[4] = {}, sums[4] = {};
      const bool steps_biases = steps_tile_bias(h) && L.bias && (warp & 3) == 0;
      if (steps_biases) {
        tile_gradient<true>(acc, sums, h);
      } else {
        tile_gradient<false>(acc, sums, h);
      }
      bf16* to = new_tile(h);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float w[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int q = 2 * r + e;
          float unused = 0.0f;
          w[e] = tile_o(q) < L.out && tile_i(q) < L.in
                     ? step(acc[q], pt[h - 1][q], mt[h - 1][q], kAdam ? vt[kAdam ? h - 1 : 0][q] : unused)
                     : 0.0f;
        }
        store_pair(to + (16 * (warp >> 2) + g + 8 * r) * kTileLd + 8 * (warp & 3) + 2 * t, w[0], w[1]);
      }
      // The tile row's biases: the first column's warps (4 x 2 x 8 lanes: rows g and g + 8 of each 16) step
      // them from their sums (every column of `sums` holds the same row sums).
      if (steps_biases && t == 0) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int k = 16 * (warp >> 2) + g + 8 * r, slot = kHalf + 32 * (h - 1) + k;
          new_bias()[slot] = 32 * tile_row() + k < L.out
                                 ? rounded(step(sums[2 * r], bias_state(0)[slot], bias_state(1)[slot], bias_state(2)[slot]))
                                 : 0.0f;
        }
      }
    }
    stamp();  // profile: a sub-stage (v16: the tiles, Wo, the output biases, the copies' wait, the conversion)
    const FusedLayer& out = layer(hidden());
    {  // Wo's gradient: k-step `warp` (16 rows) a warp, its partial product into the own rows' buffers (free
       // since the sends); warp 0 adds them in warp order after the staging's barrier (v16: warp 0's chain of
       // 8 k-steps took 0.44 us on the step's path while the other warps waited).
      float acc[4] = {};
      std::uint32_t fa[4], fb[2];
      load_a_trans(fa, at<bf16>(c.dl) + 16 * warp * kLdDl, kLdDl);
      load_b_trans(fb, at<bf16>(c.out_cols) + 16 * warp * 8, 8);
      mma_bf16(acc, fa, fb);
      *reinterpret_cast<float4*>(wo_partials() + (warp * 32 + lane) * 4) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    }
    stamp();  // profile
    if (steps_out_bias() && out.bias) {  // the output layer's biases: column sums of dlogits
      const float sum = column_sum(kRowsMaxClasses, [&](int b, int col) { return __bfloat162float(at<bf16>(c.dl)[b * kLdDl + col]); });
      const int cls = static_cast<int>(threadIdx.x), slot = kHalf + 32 * tiled() + cls;
      if (cls < kRowsMaxClasses) {
        new_bias()[slot] = cls < out.out ? rounded(step(sum, bias_state(0)[slot], bias_state(1)[slot], bias_state(2)[slot])) : 0.0f;
      }
    }
    stamp();  // profile
    staging();
    if (warp == 0) step_wo();
    stamp();  // profile
    asm volatile("fence.proxy.async.global;" ::: "memory");  // the stores above, before the copies read them
    __syncthreads();
    stamp();  // profile: a sub-stage
    // The copies, a warp's lane 0 each (one thread issuing them all took 0.65 us a step): warp h - 1 a
    // tile and its biases, the last warp Wo's columns and the first and output layers' biases.
    if (lane != 0) return;
    const std::uint32_t tiles_bar = bar(kBarTiles);
    const bool biases = layer(0).bias != 0;
    if (warp + 1 < hidden()) {
      const int h = warp + 1;
      multicast(tiles(h) + rank * kTileElems, new_tile(h), kRowsTileBytes, tiles_bar);
      if (biases && steps_tile_bias(h)) {
        multicast(bias(h) + 32 * tile_row(), new_bias() + kHalf + 32 * (h - 1), 32 * 4, tiles_bar);
      }
    }
    if (warp != kThreads / 32 - 1) return;
    multicast(at<bf16>(c.wo) + rank * kWoBlock, new_wo(), kWoBlock * 2, tiles_bar);
    if (biases && steps_first_bias()) multicast(bias(0) + half() * kHalf, new_bias(), kHalf * 4, tiles_bar);
    if (biases && steps_out_bias()) {
      multicast(bias(hidden()), new_bias() + kHalf + 32 * tiled(), kRowsMaxClasses * 4, tiles_bar);
    }
  }

  // Called while the block waits for its partials.
  __device__ void add_metrics() { OneClusterBlock::add_metrics(kRows, layer(hidden()).out); }

  __device__ void train() {
    state = *a.state;
    first_step = state.step;
    stamp();
    load(static_cast<const bf16*>(a.copies[state.step & 1]));
    __syncthreads();  // the shared memory zeroed before the barriers are set up in it
    if (threadIdx.x == 0) {
      for (int id = 0; id < 4; ++id) ptx::mbarrier_init(bar(id));
      ptx::fence_mbarrier_init();
    }
    if (a.steps > 0) {
      for (int i = static_cast<int>(threadIdx.x); i < rows_of(0); i += kThreads) {
        at<int>(c.next)[i] = static_cast<int>(sample(i));
      }
      __syncthreads();
      copy_batch(0);
      copy_labels(0);
      ptx::copy_async_wait_all();
      __syncthreads();
      convert_batch(0);
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
      if (has_part()) {
        first_partial();
      } else {
        stamp();  // profile: the same stamps on every block (the timeline lines them up)
        ptx::cluster_wait();
      }
      stamp();  // profile: a sub-stage
      first_reduce(s > 0);
      stamp();
      for (int h = 1; h < hidden(); ++h) forward(h);
      output(parity);
      stamp();
      output_backward();
      for (int h = hidden() - 1; h >= 1; --h) backward(h);
      ptx::copy_async_wait_all();  // the next step's sample indices
      __syncthreads();
      stamp();
      send_g1();
      send_side();
      copy_batch(s + 1);
      copy_labels(s + 1);
      // The own rows' losses and hits, stored into block 0 in output(), are read there after the step's
      // cluster barrier, whose arrival is relaxed (v13d, v15): their writers fence here, while they wait anyway.
      if (warp == 0 && t == 0) ptx::fence_cluster();
      wait(kBarG1, 16u * kOwn * kHalf * 2);
      __syncthreads();
      stamp();
      first_backward();
      __syncthreads();
      stamp();
      side([&] {
        ptx::copy_async_wait_all();  // this thread's copies (the batch's, the labels')
        __syncthreads();  // v15i without it: racecheck saw the copies race the next step's partials (relaxed arrival)
        stamp();  // profile
        convert_batch(s + 1);
      });
      stamp();
      last_rows = rows;
      advance_step_state(state, false, false, nullptr);
      // Relaxed (v13d, v15): what the barrier frees is this block's partials' slots and what aliases them,
      // which it has only read since the last barrier (its reads are complete); the one write read across
      // it is fenced above. (A release here is a GPU-scope fence in every warp: ~0.5 us on the step's path.)
      ptx::cluster_arrive_relaxed();
    }
    end_epoch(*this, kBarTiles);
  }
};

#endif  // SPRINTNET_HAS_CLUSTERS

template <UpdateForm kUpdate, ActivationKind kAct>
__global__ void __launch_bounds__(kThreads, 1) rows_epoch_kernel(const __grid_constant__ RowsArgs args) {
#ifdef SPRINTNET_HAS_CLUSTERS
  extern __shared__ __align__(128) unsigned char smem[];
  Rows<kUpdate, kAct> k(args, smem, static_cast<int>(cg::this_cluster().block_rank()));
  k.train();
#else
  __trap();
#endif
}

using RowsKernel = void (*)(RowsArgs);

template <UpdateForm kUpdate>
RowsKernel kernel_for(ActivationKind activation) {
  return for_cluster_activation(activation, [](auto act) -> RowsKernel { return rows_epoch_kernel<kUpdate, decltype(act)::value>; });
}

RowsKernel kernel_for(const FusedEpochArgs& args) {
  return for_update_form(args.optimizer, [&](auto form) { return kernel_for<decltype(form)::value>(args.activation); });
}

ClusterShape shape_of(std::int64_t shared_bytes) { return {kRowsCtas, kThreads, shared_bytes}; }

const ClusterProbe& rows_probe(int device, std::int64_t shared_bytes) {
  return probe_cluster_kernel(device, kernel_for<UpdateForm::kAdam>(ActivationKind::kReLU), shape_of(shared_bytes),
                              "the rows kernel");
}

}  // namespace

const char* rows_epoch_unavailable(int device, std::int64_t shared_bytes) {
  return rows_probe(device, shared_bytes).why_not;
}

int rows_epoch_active_clusters(int device, std::int64_t shared_bytes) {
  return active_clusters(rows_probe(device, shared_bytes));
}

cudaError_t launch_rows_epoch(const FusedEpochArgs& args, const RowsLayout& layout, void* scratch, cudaStream_t stream) {
  const NvtxRange range("rows_epoch");
  // A null kernel (GELU or SiLU: fused_rows_unsupported says so first) is refused.
  return launch_cluster_kernel(kernel_for(args), shape_of(layout.bytes), stream,
                               RowsArgs{args, layout, static_cast<unsigned char*>(scratch)});
}

}  // namespace sprintnet::cuda
