#pragma once
// The fused engine's split kernel (split_epoch.h; docs/FUSED.md, v7). Hidden layers of
// 784: 98 blocks in 14 clusters of 7; of 256: 32 blocks in 8 clusters of 4 (Shape,
// below); one block an SM. Block r = C c + k (C ranks a cluster) owns neurons
// 8r..8r+7 of every hidden layer (its biases, the output layer's columns 8r..8r+7,
// its groups of 8 pixel columns of each batch); rank k of cluster c takes range
// k of the k (or o) dimension of every product against the cluster's 8C neurons
// (784: 112 wide against 56; 256: 64 against 32):
//   forward l   partial X_l[:, cluster's span] over the rank's inputs: X_{l-1}'s 128-row slice and
//               W_l's tile of the span's rows (the bf16 copy); each block's own 8 columns' C
//               partials are added by their owner in rank order, then bias and activation
//   output      partial logits over the rank's range, summed by every block (each computes the
//               whole loss and dlogits, the last hidden layer's gradient D[:, own] and the
//               output layer's weight gradient of its columns own)
//   backward l  partial D_{l-1}[:, cluster's span] = D_l[:, range] · W_l[range, span] from the fp32
//               master tile, and dW_l[range, span] = D_l[:, range]ᵀ · X_{l-1}[:, span] applied at once
//               to that tile (its optimizer state in fragment order for the epoch, a float4 a lane)
// Where the width is not 784 (256) the first layer's 784 inputs do not split like its neurons: its
// forward gives rank k tiles 49k/C .. 49(k+1)/C of the 49 16-wide k tiles (12 or 13), and its
// weight gradient gives cluster c the groups 98c/n .. 98(c+1)/n of the 98 groups of 8 inputs
// (n clusters; 12 or 13 groups), each a template case of its stage (kFirst).
// With one to three hidden layers (kDepth). Partial sums travel as bulk copies (cp.async.bulk over
// DSMEM) onto each receiver's mbarrier; activations through L2, a grid barrier ending each stage
// (2 kDepth + 1 a step: 7 for 784-784-784-784-10); a forward stage fetches the next stage's weights
// while it exchanges and waits (prefetch_weights). Every sum has a fixed
// order: reruns are bit-identical. A partial last batch masks its missing rows (zero input, zero
// dlogits, so zero gradients). The bf16 copy the products read is copies[0] during the epoch;
// at its end the fp32 master, rounded, goes into both copies with the bias columns, for the
// grid kernel's evaluation (copies[step % 2]).
//
// This header is the kernel; split_epoch_instance.cu.in instantiates it, one translation unit (one
// CUDA module) for each shape and depth, and split_epoch.cu launches it.
#include <cuda_bf16.h>

#include "sprintnet/ops/cuda/activation_math.cuh"
#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/fused/grid_barrier.cuh"
#include "sprintnet/ops/cuda/fused/update_form.cuh"
#include "sprintnet/ops/cuda/fused/progress_record.cuh"
#include "sprintnet/ops/cuda/fused/ptx.cuh"
#include "sprintnet/ops/cuda/fused/row_loss.cuh"
#include "sprintnet/ops/cuda/fused/split_epoch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"

namespace sprintnet::cuda::split {


using bf16 = __nv_bfloat16;

constexpr int kBatch = kSplitMaxBatch, kIn = kSplitInputs, kClasses = kSplitClasses;
constexpr int kMaxHidden = kSplitMaxHidden;  // buffers and shared memory are sized for it
constexpr int kOwn = 8;                                   // neurons (and pixel columns) a block owns
constexpr int kInTiles = kIn / 16, kInGroups = kIn / 8;   // the first layer's 49 k tiles, 98 groups of 8
constexpr int kWarps = 8, kThreads = 32 * kWarps;         // a warp a 16-row m-tile
constexpr int kTileBytes = kBatch * 32;                   // 128 rows x 16 bf16
constexpr int kXtStride = kBatch + 8;                     // bf16: own columns, transposed
static_assert(kThreads == 2 * kBatch && kBatch == 16 * kWarps, "two threads a row, a warp an m-tile");
static_assert(kClasses == 10, "the output stage's pieces carry classes 0-7 from every lane and 8-9 from t = 0");
static_assert(kIn % 16 == 0, "the first layer's k in whole tiles");

constexpr int max_of(int a, int b) { return a > b ? a : b; }
// A row stride of bf16 elements that ldmatrix reads without bank conflicts: an odd number of 16 bytes.
constexpr int odd_stride(int elements) { return (elements / 8) % 2 == 1 ? elements : elements + 8; }

// A shape the kernel is compiled for (split_epoch.h's kSplitShapes): hidden layers kWidth_ wide,
// clusters of kCluster_ ranks, and where everything lives in a block's shared memory.
template <int kWidth_, int kCluster_>
struct Shape {
  static constexpr int kWidth = kWidth_, kCluster = kCluster_;
  static constexpr int kBlocks = kWidth / kOwn;                    // 98, 32
  static constexpr int kClusters = kBlocks / kCluster;             // 14, 8
  static constexpr int kSpan = kCluster * kOwn;                    // 56, 32 neurons a cluster
  static constexpr int kRange = kWidth / kCluster;                 // 112, 64: a rank's share of k (or o)
  static constexpr int kRangeTiles = kRange / 16;                  // 7, 4
  static constexpr int kSpanTiles = kSpan / 8;                     // 7, 4 n-tiles
  static constexpr int kGradTiles = kRangeTiles * kSpanTiles;      // 49, 16 weight-gradient tiles of 16 x 8
  // The first layer, where its 784 inputs do not split like the neurons (kFirst's stages): the most
  // k tiles a rank takes, input groups a cluster takes, and input groups a block gathers.
  static constexpr bool kSplitInput = kIn != kWidth;
  static constexpr int kInRangeTiles = kSplitInput ? (kInTiles + kCluster - 1) / kCluster : kRangeTiles;  // 7, 13
  static constexpr int kInSpanTiles = kSplitInput ? (kInGroups + kClusters - 1) / kClusters : kSpanTiles;  // 7, 13
  static constexpr int kOwnGroups = (kInGroups + kBlocks - 1) / kBlocks;                                  // 1, 4
  static constexpr int kMaxGradTiles = kRangeTiles * kInSpanTiles;                                        // 49, 52
  static constexpr int kTileStride = kRange + 8;                   // the master tile's floats a row, W's bf16
  static constexpr int kInWtStride = 16 * kInRangeTiles + 8;       // W_1's bf16 a row (kFirst)
  static constexpr int kXcStride = odd_stride(kSpan);              // X_{l-1}[:, span]'s bf16 a row
  static constexpr int kInXcStride = odd_stride(8 * kInSpanTiles);  // ... of X_0 (kFirst)
  static constexpr int kMasterRows1 = 8 * kInSpanTiles;            // the first layer's master tile: inputs
  static_assert(kBlocks * kOwn == kWidth && kBlocks % kCluster == 0 && kCluster * kRange == kWidth,
                "whole clusters of whole ranges");
  static_assert(kRange % 16 == 0, "ranges of whole tiles");
  static_assert(kSplitInput || (kInRangeTiles == kRangeTiles && kOwnGroups == 1), "784 splits like the neurons");
  static_assert(kMaxGradTiles >= kGradTiles, "the fragments' stride");
  static_assert(kSpanTiles == kCluster, "n-tile q of a span is rank q's 8 neurons (slice_product, send_pieces)");
  static_assert(kSpanTiles <= kWarps, "a warp an n-tile of a hidden layer's weight gradient at least (backward_layer)");
  static_assert(kBlocks <= kInGroups, "every block gathers at least one group of 8 pixels (fetch_own)");

  // Shared memory, a block: [offset, bytes) of each region (16-byte aligned: cp.async and bulk copies).
  static constexpr int kSliceOff = 0, kSliceBytes = max_of(kRangeTiles, kInRangeTiles) * kTileBytes;  // X or D[:, range]
  static constexpr int kWtOff = kSliceOff + kSliceBytes;
  static constexpr int kWtBytes = max_of(kSpan * kTileStride, kSplitInput ? kSpan * kInWtStride : 0) * 2;  // W[span, range]
  static constexpr int kXcOff = kWtOff + kWtBytes;
  static constexpr int kXcBytes = kBatch * max_of(kXcStride, kSplitInput ? kInXcStride : 0) * 2;  // X_{l-1}[:, span]
  static constexpr int kRecvOff = kXcOff + kXcBytes, kRecvBytes = kCluster * kBatch * kOwn * 4;  // [source][128][8]
  static constexpr int kPartOff = kRecvOff + kRecvBytes, kPartBytes = kCluster * kBatch * kOwn * 4;  // [owner][128][8]
  static constexpr int kMasterOff = kPartOff + kPartBytes;
  static constexpr int kMasterBytes = (kMasterRows1 + (kMaxHidden - 1) * kSpan) * kTileStride * 4;
  static constexpr int kXtOff = kMasterOff + kMasterBytes, kXtBytes = kMaxHidden * kOwn * kXtStride * 2;
  static constexpr int kPreOff = kXtOff + kXtBytes, kPreBytes = kMaxHidden * kOwn * kXtStride * 2;
  static constexpr int kLogitOff = kPreOff + kPreBytes, kLogitBytes = kBatch * 16 * 4;
  static constexpr int kDlOff = kLogitOff + kLogitBytes, kDlBytes = kBatch * kClasses * 4;
  static constexpr int kDtOff = kDlOff + kDlBytes, kDtBytes = kOwn * kBatch * 4;
  static constexpr int kSmallOff = kDtOff + kDtBytes, kSmallFloats = 464 + kBatch + 116;
  static constexpr int kBarOff = kSmallOff + kSmallFloats * 4;
  static constexpr int kSmemBytes = kBarOff + 8;
  static_assert(kSmemBytes <= 227 * 1024, "one block an SM");
  static_assert(kBatch * kClasses * 4 <= kPartBytes, "the partial logits fit the partials' buffer");
  static_assert(kCluster * kBatch * kClasses * 4 <= kXcBytes + kRecvBytes && kRecvOff == kXcOff + kXcBytes,
                "the ranks' partial logits land over XC and the receive buffer");
  static_assert(16 * kTileStride * 2 <= kWtBytes, "W_4's 16 padded rows fit W's tile");
  static_assert(kWtOff % 16 == 0 && kXcOff % 16 == 0 && kRecvOff % 16 == 0 && kPartOff % 16 == 0 &&
                    kSmallOff % 16 == 0,
                "16-byte aligned copies");
  static_assert(kXtOff % 16 == 0 && kDtOff % 16 == 0, "16-byte loads in the output stage's batch sums");

  // The first layer's k tiles of rank k (forward) and input groups of cluster c (weight gradient).
  __device__ static int in_tile0(int rank) { return kInTiles * rank / kCluster; }
  __device__ static int in_group0(int cluster) { return kInGroups * cluster / kClusters; }
};
using Wide = Shape<784, 7>;
using Narrow = Shape<256, 4>;

// Global scratch: X_0 (even steps), X_0 (odd steps), X_1..X_3, D_1..D_3 (bf16 [128][784] each, rows
// kIn or kWidth apart), b_4 as every block reads
// it, then the hidden layers' optimizer state (momentum; Adam: both moments) in the order the weight-gradient fragments hold it
// ([layer][block][tile][lane], a float4 a lane: one 512-byte load and store a warp a tile; the flat
// layout's two float2 from 16 rows measured ~1.4 us a backward stage slower, docs/FUSED.md).
constexpr std::int64_t kActivationBytes = std::int64_t{kBatch} * max_of(kIn, Wide::kWidth) * 2;
constexpr int kScratchActivations = 2 + 2 * kMaxHidden;
constexpr std::int64_t kLiveBiasBytes = 64;
template <class S>
constexpr std::int64_t kMomentumBytesOf = std::int64_t{kMaxHidden} * S::kBlocks * S::kMaxGradTiles * 32 * 16;
constexpr std::int64_t kMomentumBytes =
    kMomentumBytesOf<Wide> > kMomentumBytesOf<Narrow> ? kMomentumBytesOf<Wide> : kMomentumBytesOf<Narrow>;
static_assert(Wide::kWidth == kSplitShapes[0].width && Wide::kBlocks == kSplitShapes[0].blocks &&
                  Wide::kCluster == kSplitShapes[0].cluster && Narrow::kWidth == kSplitShapes[1].width &&
                  Narrow::kBlocks == kSplitShapes[1].blocks && Narrow::kCluster == kSplitShapes[1].cluster,
              "split_epoch.h's shapes");

struct SplitParams {
  const std::uint8_t* images;
  const std::int32_t* labels;
  const std::int32_t* order;  // the epoch's permutation: step s takes order[s * batch ..]
  std::int64_t samples;
  int steps, batch;
  float scale, shift;                // x = u8 * scale + shift
  bf16* x[kMaxHidden + 1];              // x[0] the gathered batch of even steps, x[l] hidden layer l's output
  bf16* x0_odd;                      // the gathered batch of odd steps (see backward's last stage)
  bf16* d[kMaxHidden + 1];              // d[l]: the gradient of hidden layer l's pre-activation
  bf16* w[kMaxHidden + 2];              // layer l's rows in copies[0], the epoch's copy (1-based)
  bf16* w_other[kMaxHidden + 2];        // ... in copies[1], written at the end
  float* master[kMaxHidden + 2];        // the flat fp32 master, layer l's rows [out][ld[l]]
  float* mom[kMaxHidden + 2];           // the flat momentum (null without)
  float* var[kMaxHidden + 2];           // Adam's flat second moment (null for SGD)
  float4* mom_frag;                  // the hidden layers' momentum (Adam: first moment) during the epoch, or null
  float4* var_frag;                  // ... and Adam's second moment, or null
  int ld[kMaxHidden + 2];               // layer l's row stride (in_pad); the bias is column in_of(l)
  int bias;
  float* b4_live;                    // [16]: b_4, updated by block 0, read by every block
  FlatOptimizerArgs opt;
  int mse;
  float smoothing;
  StepState* state;
  StepMetrics* metrics;
  FusedProgress* progress;
  unsigned* barrier;
  std::uint64_t* clock;
  int clock_capacity;
};

// Thread-block clusters, DSMEM bulk copies and mbarrier transaction counts exist from sm_90: builds
// for older GPUs compile the kernel empty (split_epoch_unavailable refuses it there).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define SPRINTNET_HAS_SPLIT_KERNEL 1
#endif

#ifdef SPRINTNET_HAS_SPLIT_KERNEL

using ptx::mma_bf16;
using ptx::shared_address;
using ptx::copy_async_16;
using ptx::copy_async_commit;
using ptx::copy_async_wait_group;

__device__ __forceinline__ std::uint32_t pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
__device__ __forceinline__ void cluster_sync() {
  ptx::cluster_arrive();
  ptx::cluster_wait();
}

// A slice tile holds 128 x 16 as 128 rows of 32 B; row b's two 16-B halves are swapped when bit 2
// of b is set, so the 8 rows an ldmatrix phase reads fall in distinct banks.
__device__ __forceinline__ int slot_offset(int row, int half) { return row * 32 + ((half ^ ((row >> 2) & 1)) << 4); }

// A(16 rows from m0, the tile's 16 columns) for mma.
__device__ __forceinline__ void tile_a(std::uint32_t (&a)[4], const std::uint8_t* tile, int m0) {
  const int lane = threadIdx.x & 31;
  ptx::ldmatrix_x4(a, shared_address(tile + slot_offset(m0 + (lane & 15), lane >> 4)));
}
// A = the tile's transpose: 16 columns (rows of A) x 16 rows from k0 (A's k).
__device__ __forceinline__ void tile_a_trans(std::uint32_t (&a)[4], const std::uint8_t* tile, int k0) {
  const int lane = threadIdx.x & 31;
  ptx::ldmatrix_x4_trans(a, shared_address(tile + slot_offset(k0 + ((lane >> 4) & 1) * 8 + (lane & 7), (lane >> 3) & 1)));
}

// Σ_b f(b) over the batch's 128 rows by one warp (launch_config.cuh's butterfly: a fixed order,
// every lane ends with the same bits).
template <class F>
__device__ __forceinline__ float batch_sum(F&& f) {
  const int lane = threadIdx.x & 31;
  return warp_sum((f(lane) + f(lane + 32)) + (f(lane + 64) + f(lane + 96)));
}

template <class S>
struct Smem {
  std::uint8_t* slice;  // swizzled 128 x 16 tiles: the rank's columns of X_{l-1} or D_l
  bf16* wt;             // [span or 16][stride]: W_l[cluster's span, range] (forward), W_4[:, range]
  bf16* xc;             // [128][stride]: X_{l-1}[:, cluster's span] (backward)
  float* recv;          // [source rank][128][8]: the partial sums of this block's own 8 columns
  float* part;          // [owner rank][128][8]: this block's partial sums, sent; or [128][10] logits
  float* master;        // [layer 1..3][span][kTileStride]: W_l[range, cluster's span] transposed, fp32
  bf16* xt;             // [layer 1..3][8][kXtStride]: X_l[:, own] transposed
  bf16* pre;            // [layer 1..3][8][kXtStride]: the pre-activation of X_l[:, own] (GELU, SiLU)
  float* logit;         // [128][16]: the summed logits
  float* dl;            // [128][10]: dlogits
  float* dt;            // [8][128]: D[:, own] (the bias gradients)
  float *w4, *w4_mom, *w4_grad;  // [10][8]: W_4[:, own]
  float *b_master, *b_mom;       // [3][8]: b_1..b_3[own]
  float *b4, *b4_mom, *b4_grad;  // [10] (updated by block 0)
  float* row_loss;               // [128]
  float* b4_live;                // [16]: b_4 as read in the output stage
  int* row_hit;                  // [128]: the row's first maximum is its label
  float *w4_var, *b_var, *b4_var;  // Adam's second moment of W_4[:, own], b_1..b_3[own], b_4
  std::uint64_t* bar;            // completes when the other ranks' copies of a stage have landed
  __device__ explicit Smem(std::uint8_t* s) {
    slice = s + S::kSliceOff;
    wt = reinterpret_cast<bf16*>(s + S::kWtOff);
    xc = reinterpret_cast<bf16*>(s + S::kXcOff);
    recv = reinterpret_cast<float*>(s + S::kRecvOff);
    part = reinterpret_cast<float*>(s + S::kPartOff);
    master = reinterpret_cast<float*>(s + S::kMasterOff);
    xt = reinterpret_cast<bf16*>(s + S::kXtOff);
    pre = reinterpret_cast<bf16*>(s + S::kPreOff);
    logit = reinterpret_cast<float*>(s + S::kLogitOff);
    dl = reinterpret_cast<float*>(s + S::kDlOff);
    dt = reinterpret_cast<float*>(s + S::kDtOff);
    float* f = reinterpret_cast<float*>(s + S::kSmallOff);
    w4 = f; w4_mom = f + 80; w4_grad = f + 160;
    b_master = f + 240; b_mom = f + 264;
    b4 = f + 288; b4_mom = f + 298; b4_grad = f + 308;
    row_loss = f + 320;
    b4_live = f + 448;  // 16-byte aligned: a cp.async destination
    row_hit = reinterpret_cast<int*>(f + 464);
    w4_var = f + 592; b_var = f + 672; b4_var = f + 696;
    bar = reinterpret_cast<std::uint64_t*>(s + S::kBarOff);
  }
  // The first layer's tile is kMasterRows1 rows (kSpan where the inputs split like the neurons).
  __device__ float* master_of(int l) const {
    if constexpr (!S::kSplitInput) {
      return master + (l - 1) * S::kSpan * S::kTileStride;
    } else {
      return l == 1 ? master : master + (S::kMasterRows1 + (l - 2) * S::kSpan) * S::kTileStride;
    }
  }
  __device__ bf16* xt_of(int l) const { return xt + (l - 1) * kOwn * kXtStride; }
  __device__ bf16* pre_of(int l) const { return pre + (l - 1) * kOwn * kXtStride; }
};

// The batch's own groups of 8 pixel columns of row threadIdx.x (groups r, r + blocks, ...),
// fetched a stage before they are stored.
template <int kGroups>
struct OwnRow {
  uint2 bytes[kGroups] = {};
  int label = 0;
  bool valid = false;
};

// S: the shape; kDepth: the model's hidden layers (1 to kMaxHidden); the stages loop over them.
template <class S, ActivationKind kAct, UpdateForm kUpdate, int kDepth>
struct Epoch {
  static constexpr int kWidth = S::kWidth, kCluster = S::kCluster, kBlocks = S::kBlocks, kSpan = S::kSpan;
  static constexpr int kRange = S::kRange, kRangeTiles = S::kRangeTiles, kSpanTiles = S::kSpanTiles;
  static constexpr int kTileStride = S::kTileStride, kXcStride = S::kXcStride;
  static constexpr int kMaxGradTiles = S::kMaxGradTiles;
  using Own = OwnRow<S::kOwnGroups>;
  __device__ static constexpr int in_of(int l) { return l == 1 ? kIn : kWidth; }
  // GELU's and SiLU's slopes need the pre-activation; the others' follow from the output.
  static constexpr bool kKeepsPre = kAct == ActivationKind::kGELU || kAct == ActivationKind::kSiLU;
  const SplitParams& p;
  const Smem<S> s;
  const int r, c, k, warp, lane, g, t;
  std::int64_t first_step = 0, first_update = 0;  // the state at the epoch's start
  int rows = 0;                                    // of the step running
  BlockScalars scalars{};                          // its learning rate, whether it is the first update, Adam's
  double next_lr = 0.0;                            // the next step's, loaded a step ahead
  double beta1_t = 1.0, beta2_t = 1.0;             // Adam: beta^t of the step's update count t
  std::uint32_t phase = 0;                         // the parity the exchange's mbarrier completes next
  double loss_total = 0.0;                         // block 0, add_metrics' lane: the epoch's sums
  std::int64_t hits_total = 0;
  GridBarrier barrier_;                            // ends each stage; its clock also takes the stamps inside

  __device__ Epoch(const SplitParams& params, std::uint8_t* smem)
      : p(params),
        s(smem),
        r(static_cast<int>(blockIdx.x)),
        c(static_cast<int>(blockIdx.x) / kCluster),
        k(static_cast<int>(blockIdx.x) % kCluster),
        warp(static_cast<int>(threadIdx.x) >> 5),
        lane(static_cast<int>(threadIdx.x) & 31),
        g((static_cast<int>(threadIdx.x) & 31) >> 2),
        t(static_cast<int>(threadIdx.x) & 3),
        barrier_(params.barrier, params.clock, params.clock_capacity) {}

  static constexpr bool kAdamUpdate = kUpdate == UpdateForm::kAdam;
  __device__ bool momentum() const { return p.mom[1] != nullptr; }
  // One parameter's update: its state `m` (SGD's momentum, Adam's first moment) and `v` (Adam's
  // second moment; unused for SGD).
  __device__ void update(float& w, float& m, float& v, float grad) const {
    fused_step<kUpdate>(p.opt, scalars, w, m, v, grad, momentum());
  }
  // The profile's stamps inside a stage (SPRINTNET_FUSED_PROFILE; block 0's thread 0, warp 0's view):
  // with the barriers', split_stamps_per_step (split_epoch.h) a step, which the host's profile reads.
  __device__ void stamp() { barrier_.stamp(); }
  __device__ int rows_of(int step) const {
    const std::int64_t left = p.samples - static_cast<std::int64_t>(step) * p.batch;
    return static_cast<int>(left < p.batch ? left : p.batch);
  }
  __device__ bf16* input_of(int step) const { return (step & 1) != 0 ? p.x0_odd : p.x[0]; }
  __device__ const bf16* below_of(int l, int step) const { return l == 1 ? input_of(step) : p.x[l - 1]; }

  // ---- the batch: a block gathers its own groups of 8 pixel columns of every row.
  // Row threadIdx.x's sample of a step (-1: no such row), read a few stages before its pixels
  // (fetch_own) so that their loads do not wait for it (v17b).
  __device__ int sample_of(int step) const {
    const int b = static_cast<int>(threadIdx.x);
    if (b >= kBatch || step >= p.steps || b >= rows_of(step)) return -1;
    return __ldg(p.order + static_cast<std::int64_t>(step) * p.batch + b);
  }
  __device__ Own fetch_own(int sample) const {
    Own row;
    if (sample < 0) return row;
#pragma unroll
    for (int j = 0; j < S::kOwnGroups; ++j) {
      const int group = r + j * kBlocks;
      if (j == 0 || group < kInGroups) {  // every block has a first group (kBlocks <= kInGroups)
        row.bytes[j] = __ldg(reinterpret_cast<const uint2*>(p.images + static_cast<std::int64_t>(sample) * kIn + group * kOwn));
      }
    }
    row.label = __ldg(p.labels + sample);
    row.valid = true;
    return row;
  }
  // Normalised into X_0 (rows kIn apart, the other parity's buffer: peers may still read this
  // step's); rows past the batch are zeros.
  __device__ void store_own(const Own& own, int step) const {
    const int b = static_cast<int>(threadIdx.x);
    if (b >= kBatch) return;
#pragma unroll
    for (int j = 0; j < S::kOwnGroups; ++j) {
      const int group = r + j * kBlocks;
      if (j > 0 && group >= kInGroups) break;
      const auto* u = reinterpret_cast<const std::uint8_t*>(&own.bytes[j]);
      bf16 v[kOwn];
#pragma unroll
      for (int n = 0; n < kOwn; ++n) {
        v[n] = __float2bfloat16_rn(own.valid ? static_cast<float>(u[n]) * p.scale + p.shift : 0.0f);
      }
      *reinterpret_cast<uint4*>(input_of(step) + b * kIn + group * kOwn) = *reinterpret_cast<const uint4*>(v);
    }
  }

  // ---- loads into shared memory (cp.async).
  // src[:, col0 .. col0 + 16 tiles) (rows `stride` apart) into the slice's first `tiles` tiles (at most
  // kTiles), one group a tile (kTiles groups, the last ones empty where tiles < kTiles), so a product
  // starts on tile 0 while the others land (slice_product). A thread's copies share its row and half:
  // warp w copies the rows 16w .. 16w + 15 its products read (v17).
  template <int kTiles>
  __device__ void load_slice(const bf16* src, int stride, int col0, int tiles) const {
    const int row = static_cast<int>(threadIdx.x) >> 1, half = static_cast<int>(threadIdx.x) & 1;
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
      if (tile < tiles) {
        copy_async_16(s.slice + tile * kTileBytes + slot_offset(row, half),
                      src + row * stride + col0 + tile * 16 + half * 8);
      }
      copy_async_commit();
    }
  }
  // Tile ks of a slice of kTiles groups, and the groups before it, landed for this warp's rows (the
  // only ones its products read: no block barrier).
  template <int kTiles>
  __device__ static void wait_own_rows(int ks) {
    copy_async_wait_group(kTiles - 1 - ks);
    __syncwarp();
  }
  // The rank's hidden range: src[:, kRange k ..] of a [128][kWidth] activation or gradient.
  __device__ void load_slice(const bf16* src) const { load_slice<kRangeTiles>(src, kWidth, k * kRange, kRangeTiles); }
  // Rows row0 .. row0 + count - 1 of layer l's bf16 weights, columns col0 .. col0 + cols (at most
  // kCols, a multiple of 8), into wt with rows `stride` apart.
  template <int kCols>
  __device__ void load_weight_tile(int l, int row0, int count, int col0, int cols, int stride) const {
    for (int q = static_cast<int>(threadIdx.x); q < count * (kCols / 8); q += kThreads) {
      const int n = q / (kCols / 8), j = q % (kCols / 8);
      if (j * 8 < cols) {
        copy_async_16(s.wt + n * stride + j * 8,
                      p.w[l] + static_cast<std::int64_t>(row0 + n) * p.ld[l] + col0 + j * 8);
      }
    }
  }
  // ... the rank's hidden range of columns.
  __device__ void load_weight_tile(int l, int row0, int count) const {
    load_weight_tile<kRange>(l, row0, count, k * kRange, kRange, kTileStride);
  }

  // ---- the exchange (v7g): a block's pieces go to the cluster's ranks by one bulk copy each, completing
  // on the receiver's mbarrier, which its block waits on. A stage's copies start only after every
  // block has passed the grid barrier ending the previous stage, so an mbarrier phase never holds
  // two stages' bytes and no copy lands in a buffer its block still reads.
  __device__ void init_exchange() const {
    if (threadIdx.x == 0) {
      ptx::mbarrier_init(shared_address(s.bar));
      ptx::fence_mbarrier_init();  // published by the cluster barrier
    }
  }
  // Piece q (bytes long, at source + q * stride) goes to rank q, at dest + k * bytes there. The
  // block's own piece is copied by its threads (compute-sanitizer rejects a bulk copy to the block
  // itself), the kCluster - 1 others by a bulk copy each.
  __device__ void send_pieces(const void* source, int stride, const void* dest, int bytes) const {
    __syncthreads();  // the pieces are written
    {
      const auto* from = reinterpret_cast<const float4*>(static_cast<const char*>(source) + k * stride);
      auto* to = reinterpret_cast<float4*>(static_cast<char*>(const_cast<void*>(dest)) + k * bytes);
      for (int i = static_cast<int>(threadIdx.x); i < bytes / 16; i += kThreads) to[i] = from[i];
    }
    ptx::fence_proxy_async();  // the writes, before the copies read them
    __syncthreads();
    if (static_cast<int>(threadIdx.x) >= kCluster - 1) return;
    const int q = static_cast<int>(threadIdx.x) >= k ? static_cast<int>(threadIdx.x) + 1 : static_cast<int>(threadIdx.x);
    ptx::bulk_copy_to_block(ptx::in_block(shared_address(dest) + k * bytes, q), shared_address(source) + q * stride,
                            bytes, ptx::in_block(shared_address(s.bar), q));
  }
  // The whole block waits for the 6 other ranks' pieces (bytes each) of this stage.
  __device__ void receive_pieces(int bytes) {
    if (threadIdx.x == 0) ptx::mbarrier_expect_bytes(shared_address(s.bar), (kCluster - 1) * bytes);
    ptx::mbarrier_wait(shared_address(s.bar), phase);
    phase ^= 1u;
  }
  // This block's own 8 columns, the ranks' partials added in rank order: thread i takes row
  // i / 2, columns 4 (i % 2) .. +3.
  __device__ float4 sum_ranks() const {
    const int row = static_cast<int>(threadIdx.x) >> 1, h = static_cast<int>(threadIdx.x) & 1;
    float4 v[kCluster];
#pragma unroll
    for (int q = 0; q < kCluster; ++q) v[q] = *reinterpret_cast<const float4*>(s.recv + (q * kBatch + row) * kOwn + 4 * h);
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

  // part[owner][rows][8] = this warp's 16 rows of the slice · B(n-tile nt) for the span's n-tiles
  // (n-tile nt belongs to rank nt), over the slice's first `tiles` k-steps (at most kTiles), each
  // as its tile lands (load_slice's groups, the slice's the newest); b_of(ks, nt, b) loads B's fragment.
  template <int kTiles, class BFragment>
  __device__ void slice_product(int tiles, BFragment&& b_of) const {
    const int m0 = warp * 16;
    float acc[kSpanTiles][4] = {};
#pragma unroll
    for (int ks = 0; ks < kTiles; ++ks) {
      if (ks >= tiles) break;
      wait_own_rows<kTiles>(ks);
      std::uint32_t a[4];
      tile_a(a, s.slice + ks * kTileBytes, m0);
#pragma unroll
      for (int j = 0; j < kSpanTiles; ++j) {
        std::uint32_t b[2];
        b_of(ks, j, b);
        mma_bf16(acc[j], a, b);
      }
    }
#pragma unroll
    for (int j = 0; j < kSpanTiles; ++j) {
      float* at = s.part + (j * kBatch + m0 + g) * kOwn + 2 * t;
      *reinterpret_cast<float2*>(at) = make_float2(acc[j][0], acc[j][1]);
      *reinterpret_cast<float2*>(at + 8 * kOwn) = make_float2(acc[j][2], acc[j][3]);
    }
  }

  // The end of a stage's own 8 columns: thread i holds the sums of row i / 2, columns 4 (i % 2)
  // .. +3. Forward: bias and activation into X_layer (global) and the block's transposed copy
  // (GELU and SiLU: the pre-activation too, in bf16 as the other engines keep it). Input
  // gradient: times the activation's slope into D_layer and the fp32 copy the bias gradient sums.
  template <bool kForward>
  __device__ void finish_own(int layer, const float (&sum)[4]) const {
    const int row = static_cast<int>(threadIdx.x) >> 1, h = static_cast<int>(threadIdx.x) & 1;
    bf16 out[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = 4 * h + j;
      bf16& own = s.xt_of(layer)[n * kXtStride + row];
      if constexpr (kForward) {
        const float z = sum[j] + s.b_master[(layer - 1) * kOwn + n];
        if constexpr (kKeepsPre) {
          const bf16 z16 = __float2bfloat16_rn(z);
          s.pre_of(layer)[n * kXtStride + row] = z16;
          out[j] = __float2bfloat16_rn(activate<kAct>(__bfloat162float(z16)));
        } else {
          out[j] = __float2bfloat16_rn(activate<kAct>(z));
        }
        own = out[j];
      } else {
        const float y = __bfloat162float(own);
        if constexpr (kAct == ActivationKind::kReLU) {
          out[j] = __float2bfloat16_rn(y > 0.0f ? sum[j] : 0.0f);
        } else if constexpr (kAct == ActivationKind::kIdentity) {
          out[j] = __float2bfloat16_rn(sum[j]);
        } else if constexpr (kKeepsPre) {
          const float z = __bfloat162float(s.pre_of(layer)[n * kXtStride + row]);
          out[j] = __float2bfloat16_rn(activate_derivative<kAct>(z, y) * sum[j]);
        } else {
          out[j] = __float2bfloat16_rn(activate_derivative<kAct>(0.0f, y) * sum[j]);  // tanh, sigmoid: from y
        }
        s.dt[n * kBatch + row] = __bfloat162float(out[j]);
      }
    }
    bf16* dst = kForward ? p.x[layer] : p.d[layer];
    *reinterpret_cast<uint2*>(dst + row * kWidth + r * kOwn + 4 * h) = *reinterpret_cast<const uint2*>(out);
  }

  // b_{j+1}[own] from D_{j+1}[:, own] in s.dt: warp n sums column n.
  __device__ void apply_bias(int j) const {
    if (!p.bias) return;
    const int n = warp;
    const float v = batch_sum([&](int row) { return s.dt[n * kBatch + row]; });
    if (lane == 0) update(s.b_master[j * kOwn + n], s.b_mom[j * kOwn + n], s.b_var[j * kOwn + n], v);
  }

  // W_4[:, own] and (block 0) b_4, from the gradients the output stage kept, once every block has
  // read them for its logits.
  __device__ void apply_output_update() const {
    const int i = static_cast<int>(threadIdx.x);
    if (i < kClasses * kOwn) {
      update(s.w4[i], s.w4_mom[i], s.w4_var[i], s.w4_grad[i]);
      p.w[kDepth + 1][(i / kOwn) * p.ld[kDepth + 1] + r * kOwn + i % kOwn] = __float2bfloat16_rn(s.w4[i]);
    } else if (r == 0 && p.bias && i < kClasses * kOwn + kClasses) {
      const int cls = i - kClasses * kOwn;
      update(s.b4[cls], s.b4_mom[cls], s.b4_var[cls], s.b4_grad[cls]);
      p.b4_live[cls] = s.b4[cls];
    }
  }

  // ---- the stages.
  // kFirst: the first layer where its 784 inputs do not split like the neurons (S::kSplitInput).
  template <bool kFirst>
  __device__ void forward_layer(int l, int step) {
    constexpr int kTiles = kFirst ? S::kInRangeTiles : kRangeTiles;
    constexpr int kWtStride = kFirst ? S::kInWtStride : kTileStride;
    // W_l's tile: here for the first layer (its update ended the stage before), waited for by the whole
    // block before the products (its own group, the oldest); for the others the stage before fetched it
    // (prefetch_weights) and every thread waited for its copies between that stage's barrier arrival and
    // wait (run()).
    const bool weights_here = kFirst || l == 1;
    if constexpr (kFirst) {
      const int tile0 = S::in_tile0(k), tiles = S::in_tile0(k + 1) - tile0;
      load_weight_tile<16 * kTiles>(l, c * kSpan, kSpan, 16 * tile0, 16 * tiles, kWtStride);
      copy_async_commit();
      load_slice<kTiles>(input_of(step), kIn, 16 * tile0, tiles);
    } else {
      if (l == 1) {
        load_weight_tile(l, c * kSpan, kSpan);
        copy_async_commit();
      }
      load_slice(below_of(l, step));
    }
    if (weights_here) {
      copy_async_wait_group(kTiles);
      __syncthreads();
    }
    const int tiles = kFirst ? S::in_tile0(k + 1) - S::in_tile0(k) : kRangeTiles;
    slice_product<kTiles>(tiles, [&](int ks, int nt, std::uint32_t(&b)[2]) {
      ptx::ldmatrix_x2(b, shared_address(s.wt + (nt * 8 + (lane & 7)) * kWtStride + ks * 16 + ((lane >> 3) & 1) * 8));
    });
    stamp();  // profile: the products
    constexpr int kPiece = kBatch * kOwn * 4;
    send_pieces(s.part, kPiece, s.recv, kPiece);  // its __syncthreads: every warp has read W_l's tile
    prefetch_weights(l + 1);
    stamp();  // profile: sent
    receive_pieces(kPiece);
    stamp();  // profile: received
    const float4 v = sum_ranks();
    finish_own<true>(l, {v.x, v.y, v.z, v.w});
    stamp();  // profile: the own columns stored (the barrier's arrival follows)
  }
  // The next stage's weights into wt while this one exchanges and waits at the grid barrier: W_next's
  // tile (next <= kDepth), or W_out's and b_4 for the output stage, with W_out's padding rows zeroed
  // (every warp has read wt: send_pieces' block barrier). Every thread waits for its copies between
  // its block's arrival at the stage's grid barrier and the wait (run()), whose block barrier makes
  // them the whole block's; the owners rewrite those weights (layer next's backward,
  // apply_output_update) stages later.
  __device__ void prefetch_weights(int next) const {
    if (next <= kDepth) {
      load_weight_tile(next, c * kSpan, kSpan);
    } else {
      for (int i = static_cast<int>(threadIdx.x); i < (16 - kClasses) * kTileStride; i += kThreads) {
        s.wt[kClasses * kTileStride + i] = bf16(0.0f);
      }
      if (threadIdx.x < 3) copy_async_16(s.b4_live + 4 * threadIdx.x, p.b4_live + 4 * threadIdx.x);
      load_weight_tile(kDepth + 1, 0, kClasses);
    }
    copy_async_commit();
  }
  __device__ void forward(int l, int step) {
    if constexpr (S::kSplitInput) {
      if (l == 1) return forward_layer<true>(l, step);
    }
    forward_layer<false>(l, step);
  }

  // The output layer: partial logits over the rank's range, every block adds the cluster's (rank
  // order) and runs the loss, its gradient, D_L[:, own] (L = kDepth) and the output layer's gradients.
  __device__ void output(int step, int label) {
    // W_out's tile and b_4 came in during the last forward stage (prefetch_weights).
    load_slice(p.x[kDepth]);
    {  // the partial logits [128][10] to every rank, landing at [source][128][10] over XC and recv
      float acc[2][4] = {};
#pragma unroll
      for (int ks = 0; ks < kRangeTiles; ++ks) {
        wait_own_rows<kRangeTiles>(ks);
        std::uint32_t a[4], bq[4];
        tile_a(a, s.slice + ks * kTileBytes, warp * 16);
        ptx::ldmatrix_x4(bq, shared_address(s.wt + ((lane & 7) + ((lane >> 4) << 3)) * kTileStride + ks * 16 + ((lane >> 3) & 1) * 8));
        const std::uint32_t b0[2] = {bq[0], bq[1]}, b1[2] = {bq[2], bq[3]};
        mma_bf16(acc[0], a, b0);
        mma_bf16(acc[1], a, b1);
      }
      float* at = s.part + (warp * 16 + g) * kClasses + 2 * t;
      *reinterpret_cast<float2*>(at) = make_float2(acc[0][0], acc[0][1]);
      *reinterpret_cast<float2*>(at + 8 * kClasses) = make_float2(acc[0][2], acc[0][3]);
      if (t == 0) {  // classes 8 and 9
        *reinterpret_cast<float2*>(at + 8) = make_float2(acc[1][0], acc[1][1]);
        *reinterpret_cast<float2*>(at + 8 * kClasses + 8) = make_float2(acc[1][2], acc[1][3]);
      }
    }
    stamp();  // profile: the partial logits
    constexpr int kPiece = kBatch * kClasses * 4;
    const float* logits_in = reinterpret_cast<const float*>(s.xc);
    send_pieces(s.part, 0, logits_in, kPiece);  // the same piece to every rank
    receive_pieces(kPiece);
    stamp();  // profile: received
    {  // thread i: row i / 2, classes 5 (i % 2) ..
      const int row = static_cast<int>(threadIdx.x) >> 1, h = static_cast<int>(threadIdx.x) & 1;
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
    output_loss(step, label);
  }

  // Softmax cross-entropy (torch's label smoothing) or MSE against the one-hot label, thread b
  // for row b (row_loss.cuh, ThreadRow): the row's loss, first maximum and dlogits (zero past the
  // batch's rows). Only block 0 keeps the loss and hits (add_metrics).
  __device__ void row_loss(int label) const {
    const int row = static_cast<int>(threadIdx.x);
    const bool valid = row < rows;
    float z[kClasses];
#pragma unroll
    for (int cls = 0; cls < kClasses; ++cls) z[cls] = s.logit[row * 16 + cls] + s.b4_live[cls];
    // 1 / rows: exact for 128 (and any power of two)
    const float grad_scale = p.mse ? 2.0f / static_cast<float>(rows * kClasses) : 1.0f / static_cast<float>(rows);
    const bool metrics = r == 0;
    const auto loss = fused::row_loss<fused::ThreadRow<kClasses>>(z, kClasses, label, p.mse, p.smoothing, grad_scale,
                                                                  metrics);
#pragma unroll
    for (int cls = 0; cls < kClasses; ++cls) s.dl[row * kClasses + cls] = valid ? loss.grad[cls] : 0.0f;
    if (metrics) {
      s.row_loss[row] = valid ? static_cast<float>(loss.loss) : 0.0f;
      s.row_hit[row] = valid && loss.best_index == label ? 1 : 0;
    }
  }

  // Block 0's last warp (the one with the fewest gradient tiles), at the start of the step's last
  // stage: the step's mean loss and hits added to the epoch's sums, and the progress record (one
  // 16-byte store the host reads while the epoch runs). Not in the output stage: the store goes to
  // host memory, and the grid barrier's release waits for it (~1 us on the critical path there).
  __device__ void add_metrics(int step) {
    if (r != 0 || warp != kWarps - 1) return;
    const float loss = batch_sum([&](int row) { return s.row_loss[row]; });
    const float hits = batch_sum([&](int row) { return static_cast<float>(s.row_hit[row]); });
    if (lane != 0) return;
    loss_total += static_cast<double>(loss) / static_cast<double>(p.mse ? rows * kClasses : rows);
    hits_total += static_cast<std::int64_t>(hits);
    fused::write_progress(p.progress, step + 1, loss_total);
  }

  __device__ void output_loss(int step, int label) {
    if (threadIdx.x < kBatch) row_loss(label);
    __syncthreads();
    stamp();  // profile: the logits summed, the loss
    {  // D_L[:, own] = (dlogits · bf16(W_out[:, own])) ⊙ f'(X_L[:, own]), L = kDepth
      const int row = static_cast<int>(threadIdx.x) >> 1, h = static_cast<int>(threadIdx.x) & 1;
      float sum[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        sum[j] = 0.0f;
#pragma unroll
        for (int cls = 0; cls < kClasses; ++cls) {
          sum[j] += s.dl[row * kClasses + cls] * __bfloat162float(__float2bfloat16_rn(s.w4[cls * kOwn + 4 * h + j]));
        }
      }
      finish_own<false>(kDepth, sum);
    }
    __syncthreads();
    stamp();  // profile: D_L[:, own]
    // Sums over the batch: dW_4[c][own n] (80), b_3[own] (8), and b_4 (10); two threads an item,
    // 64 rows each in four interleaved sums (a dependent chain of 16 adds, not 64: v17c), the halves
    // added by a shuffle (a fixed order).
    const int item = static_cast<int>(threadIdx.x) >> 1, half = static_cast<int>(threadIdx.x) & 1;
    constexpr int kItems = kClasses * kOwn + kOwn + kClasses, kHalf = kBatch / 2;
    static_assert(2 * kItems <= kThreads, "two threads an item");
    static_assert(kHalf % 8 == 0 && kXtStride % 8 == 0, "8 rows of X_L[:, n] in one 16-byte load");
    const int row0 = half * kHalf;
    float sum[4] = {};
    if (item < kClasses * kOwn) {
      const int cls = item / kOwn, n = item % kOwn;
      const float* d = s.dl + row0 * kClasses + cls;
      const bf16* x = s.xt_of(kDepth) + n * kXtStride + row0;
#pragma unroll
      for (int i = 0; i < kHalf; i += 8) {
        const uint4 eight = *reinterpret_cast<const uint4*>(x + i);
        const bf16* xs = reinterpret_cast<const bf16*>(&eight);
#pragma unroll
        for (int q = 0; q < 8; ++q) sum[q & 3] += d[(i + q) * kClasses] * __bfloat162float(xs[q]);
      }
    } else if (item < kClasses * kOwn + kOwn) {
      const int n = item - kClasses * kOwn;
      const auto* d = reinterpret_cast<const float4*>(s.dt + n * kBatch + row0);
#pragma unroll
      for (int i = 0; i < kHalf / 4; ++i) {
        const float4 four = d[i];
        sum[0] += four.x;
        sum[1] += four.y;
        sum[2] += four.z;
        sum[3] += four.w;
      }
    } else if (item < kItems) {
      const int cls = item - kClasses * kOwn - kOwn;
      const float* d = s.dl + row0 * kClasses + cls;
#pragma unroll
      for (int i = 0; i < kHalf; ++i) sum[i & 3] += d[i * kClasses];
    }
    float v = (sum[0] + sum[1]) + (sum[2] + sum[3]);
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    stamp();  // profile: the batch sums
    if (half != 0) return;
    if (item < kClasses * kOwn) {
      s.w4_grad[item] = v;
    } else if (item < kClasses * kOwn + kOwn) {
      const int n = item - kClasses * kOwn;
      if (p.bias) {
        update(s.b_master[(kDepth - 1) * kOwn + n], s.b_mom[(kDepth - 1) * kOwn + n], s.b_var[(kDepth - 1) * kOwn + n],
               v);
      }
    } else if (item < kItems && r == 0) {
      s.b4_grad[item - kClasses * kOwn - kOwn] = v;
    }
  }

  // The span of layer l's inputs cluster c takes in the weight gradient: its first input and n-tiles.
  template <bool kFirst>
  __device__ int span_first() const {
    if constexpr (kFirst) return kOwn * S::in_group0(c);
    return c * kSpan;
  }
  template <bool kFirst>
  __device__ int span_tiles() const {
    if constexpr (kFirst) return S::in_group0(c + 1) - S::in_group0(c);
    return kSpanTiles;
  }

  // Layer l's backward: the input gradient D_{l-1}[:, cluster's span] (l > 1) from the old weights,
  // and dW_l[range, cluster's span] applied at once to the master tile. kFirst: the first layer where
  // its inputs do not split like the neurons (span_first / span_tiles).
  // With an input gradient (l > 1) the layer passes the stage's grid barrier itself: it arrives once
  // D_{l-1}[:, own] is stored and steps its last weight-gradient tiles before it waits (v7h: nothing
  // reads them before the next step's F_l). Returns whether it did.
  template <bool kFirst>
  __device__ bool backward_layer(int l, int step, GridBarrier& barrier) {
    constexpr int kNTiles = kFirst ? S::kInSpanTiles : kSpanTiles;  // the most n-tiles of the span
    constexpr int kXc = kFirst ? S::kInXcStride : kXcStride;
    // The weight-gradient tiles a warp takes. A hidden layer's (kSpanTiles n-tiles): warp w takes n-tile
    // w % kSpanTiles and kMoPerWarp consecutive m-tiles of it, so its tiles share their B fragments
    // (X_{l-1}[:, span]'s, loaded once) and step their addresses by constants (v17e; at 784 the eighth
    // warp takes none, as many tiles as the busiest warp had before). The first layer's 12-13 n-tiles
    // (kFirst) keep tiles warp, warp + 8, ...
    constexpr int kWarpsPerN = kWarps / kSpanTiles;
    constexpr int kMoPerWarp = (kRangeTiles + kWarpsPerN - 1) / kWarpsPerN;
    constexpr int kGradTilesPerWarp = kFirst ? (kRangeTiles * kNTiles + kWarps - 1) / kWarps : kMoPerWarp;
    constexpr int kBelowStride = kFirst || !S::kSplitInput ? kIn : kWidth;  // X_{l-1}'s row
    const int n_tiles = span_tiles<kFirst>(), i0 = span_first<kFirst>(), grad_tiles = kRangeTiles * n_tiles;
    // The warp's j-th tile: its m-tile and n-tile, and whether it has one.
    const auto tile_of = [&](int j, int& mo, int& ni) {
      if constexpr (kFirst) {
        const int tile = warp + j * kWarps;
        mo = tile / n_tiles;
        ni = tile % n_tiles;
        return tile < grad_tiles;
      } else {
        ni = warp % kSpanTiles;
        mo = (warp / kSpanTiles) * kMoPerWarp + j;
        return warp < kWarpsPerN * kSpanTiles && mo < kRangeTiles;
      }
    };
    if (l == kDepth) apply_output_update();
    for (int q = static_cast<int>(threadIdx.x); q < kBatch * kNTiles; q += kThreads) {  // X_{l-1}[:, span]
      const int row = q / kNTiles, j = q % kNTiles;
      if (j < n_tiles) copy_async_16(s.xc + row * kXc + j * 8, below_of(l, step) + row * kBelowStride + i0 + j * 8);
    }
    copy_async_commit();
    load_slice(p.d[l]);  // the newest groups: the input gradient's product takes each tile as it lands
    if (l == 1) add_metrics(step);  // the output stage's row losses and hits are still in place
    // This warp's weight-gradient tiles (tile_of) and their momentum, a float4 a lane.
    const int ld = p.ld[l];
    float4* frag = momentum() ? fragments(p.mom_frag, l) : nullptr;
    float4* var_frag = kAdamUpdate ? fragments(p.var_frag, l) : nullptr;
    float4 mom[kGradTilesPerWarp], var[kAdamUpdate ? kGradTilesPerWarp : 1];
#pragma unroll
    for (int j = 0; j < kGradTilesPerWarp; ++j) {
      int mo = 0, ni = 0;
      const bool here = tile_of(j, mo, ni);
      const int tile = mo * n_tiles + ni;
      mom[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (here && frag != nullptr) mom[j] = __ldcg(frag + tile * 32 + lane);
      if constexpr (kAdamUpdate) {
        if (here) var[j] = __ldcg(var_frag + tile * 32 + lane);
      }
    }
    float* master = s.master_of(l);
    const bool input_grad = !kFirst && l > 1;
    if (input_grad) {  // partial D_{l-1}[:, cluster's span] over the rank's o range: bf16 of the fp32 master
      slice_product<kRangeTiles>(kRangeTiles, [&](int ks, int nt, std::uint32_t(&b)[2]) {
        const float* m = master + (nt * 8 + g) * kTileStride + ks * 16 + 2 * t;
        const float2 lo = *reinterpret_cast<const float2*>(m);
        const float2 hi = *reinterpret_cast<const float2*>(m + 8);
        b[0] = pack(lo.x, lo.y);
        b[1] = pack(hi.x, hi.y);
      });
    }
    stamp();  // profile: the input gradient's products (B_1: nothing)
    constexpr int kPiece = kBatch * kOwn * 4;
    copy_async_wait_group<0>();  // the whole slice and X_{l-1}[:, span], the block's after the barrier below
    if (input_grad) {
      send_pieces(s.part, kPiece, s.recv, kPiece);  // its __syncthreads: every warp has read the old weights
    } else {
      __syncthreads();  // every warp has read the old weights before any is updated
    }
    stamp();  // profile: sent (B_1: the slice and X_0 landed)
    // dW_l[range, cluster's span] = D_l[:, range]ᵀ · X_{l-1}[:, span], a tile at a time (interleaving
    // the tiles' chains measured slower in the lab): the first kEarlyTiles of a warp's while the
    // partials are exchanged, the rest after the barrier's arrival where there is one.
    constexpr int kEarlyTiles = kGradTilesPerWarp / 2;
    const auto x_fragment = [&](int kb, int ni, std::uint32_t(&b)[2]) {
      ptx::ldmatrix_x2_trans(b, shared_address(s.xc + (kb * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kXc + ni * 8));
    };
    std::uint32_t x_frags[kFirst ? 1 : kBatch / 16][2];  // a hidden layer's: the warp's n-tile, every k-step
    if constexpr (!kFirst) {
#pragma unroll
      for (int kb = 0; kb < kBatch / 16; ++kb) x_fragment(kb, warp % kSpanTiles, x_frags[kb]);
    }
    const auto grad_tile = [&](int j) {  // j a constant once the loops below are unrolled
      int mo = 0, ni = 0;
      if (!tile_of(j, mo, ni)) return;
      const int tile = mo * n_tiles + ni;
      float dw[4] = {};
#pragma unroll
      for (int kb = 0; kb < kBatch / 16; ++kb) {
        std::uint32_t a[4], b[2];
        tile_a_trans(a, s.slice + mo * kTileBytes, kb * 16);
        if constexpr (kFirst) {
          x_fragment(kb, ni, b);
        } else {
          b[0] = x_frags[kb][0];
          b[1] = x_frags[kb][1];
        }
        mma_bf16(dw, a, b);
      }
      float* m = &mom[j].x;
      float* v = &var[kAdamUpdate ? j : 0].x;
      bf16 fresh[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int o = mo * 16 + g + (q >> 1) * 8, i = ni * 8 + 2 * t + (q & 1);
        float& w = master[i * kTileStride + o];
        update(w, m[q], v[q], dw[q]);
        fresh[q] = __float2bfloat16_rn(w);
      }
      if (frag != nullptr) __stcg(frag + tile * 32 + lane, mom[j]);
      if constexpr (kAdamUpdate) __stcg(var_frag + tile * 32 + lane, var[j]);
      const std::int64_t at = static_cast<std::int64_t>(k * kRange + mo * 16 + g) * ld + i0 + ni * 8 + 2 * t;
      *reinterpret_cast<__nv_bfloat162*>(p.w[l] + at) = __halves2bfloat162(fresh[0], fresh[1]);
      *reinterpret_cast<__nv_bfloat162*>(p.w[l] + at + 8 * ld) = __halves2bfloat162(fresh[2], fresh[3]);
    };
#pragma unroll
    for (int j = 0; j < kEarlyTiles; ++j) grad_tile(j);
    stamp();  // profile: the early gradient tiles
    if (!input_grad) {
#pragma unroll
      for (int j = kEarlyTiles; j < kGradTilesPerWarp; ++j) grad_tile(j);
      stamp();  // profile: the late gradient tiles
      return false;
    }
    receive_pieces(kPiece);
    stamp();  // profile: received
    const float4 v = sum_ranks();
    finish_own<false>(l - 1, {v.x, v.y, v.z, v.w});
    __syncthreads();
    apply_bias(l - 2);  // b_{l-1}[own]
    stamp();  // profile: D_{l-1}[:, own] stored, its bias stepped (the barrier's arrival follows)
    barrier.arrive();
#pragma unroll
    for (int j = kEarlyTiles; j < kGradTilesPerWarp; ++j) grad_tile(j);
    stamp();  // profile: the late gradient tiles
    barrier.wait();
    return true;
  }
  __device__ bool backward(int l, int step, GridBarrier& barrier) {
    if constexpr (S::kSplitInput) {
      if (l == 1) return backward_layer<true>(l, step, barrier);
    }
    return backward_layer<false>(l, step, barrier);
  }

  // This block's momentum fragments of hidden layer l: [tile][lane] float4, lane (g, t) of tile
  // (mo, ni) holding rows o, o + 8 (o = kRange k + 16mo + g) and columns i, i + 1 (i = the span's
  // first + 8ni + 2t) of the flat state, as the fragment of dW it updates.
  __device__ float4* fragments(float4* state, int l) const {
    return state + (static_cast<std::int64_t>(l - 1) * kBlocks + r) * kMaxGradTiles * 32;
  }
  // Layer l's span (span_first, span_tiles) whichever kind of layer it is.
  __device__ int span_first_of(int l) const { return S::kSplitInput && l == 1 ? span_first<true>() : span_first<false>(); }
  __device__ int span_tiles_of(int l) const { return S::kSplitInput && l == 1 ? span_tiles<true>() : span_tiles<false>(); }
  // Between a flat state and its fragments: to_fragments at the epoch's start, back at its end.
  __device__ void convert_state(float* const (&flat)[kMaxHidden + 2], float4* state, bool to_fragments) const {
    if (state == nullptr) return;
    for (int l = 1; l <= kDepth; ++l) {
      float4* frag = fragments(state, l);
      const int n_tiles = span_tiles_of(l), i0 = span_first_of(l);
      for (int e = static_cast<int>(threadIdx.x); e < kRangeTiles * n_tiles * 32; e += kThreads) {
        const int tile = e / 32, fg = (e % 32) >> 2, ft = e & 3;
        float* at = flat[l] + static_cast<std::int64_t>(k * kRange + (tile / n_tiles) * 16 + fg) * p.ld[l] + i0 +
                    (tile % n_tiles) * 8 + 2 * ft;
        float* below = at + 8 * p.ld[l];
        if (to_fragments) {
          frag[e] = make_float4(at[0], at[1], below[0], below[1]);
        } else {
          const float4 v = frag[e];
          at[0] = v.x;
          at[1] = v.y;
          below[0] = v.z;
          below[1] = v.w;
        }
      }
    }
  }

  // ---- the epoch's start and end: the resident state from and back to the flat buffers.
  // The rank's tile of each hidden layer (transposed, fp32) and its bf16 into the epoch's copy;
  // W_4[:, own], b_1..b_3[own], b_4 (every block) and their momentum.
  __device__ void load_state() const {
    for (int l = 1; l <= kDepth; ++l) {
      const int cols = kOwn * span_tiles_of(l), i0 = span_first_of(l);
      for (int i = static_cast<int>(threadIdx.x); i < cols * kRange; i += kThreads) {
        const int o = i / cols, n = i % cols;
        const std::int64_t at = static_cast<std::int64_t>(k * kRange + o) * p.ld[l] + i0 + n;
        const float w = p.master[l][at];
        s.master_of(l)[n * kTileStride + o] = w;
        p.w[l][at] = __float2bfloat16_rn(w);
      }
    }
    const int i = static_cast<int>(threadIdx.x);
    const int ld4 = p.ld[kDepth + 1];
    if (i < kClasses * kOwn) {
      const std::int64_t at = (i / kOwn) * ld4 + r * kOwn + i % kOwn;
      s.w4[i] = p.master[kDepth + 1][at];
      s.w4_mom[i] = momentum() ? p.mom[kDepth + 1][at] : 0.0f;
      s.w4_var[i] = kAdamUpdate ? p.var[kDepth + 1][at] : 0.0f;
      p.w[kDepth + 1][at] = __float2bfloat16_rn(s.w4[i]);
    } else if (i < kClasses * kOwn + kDepth * kOwn) {
      const int j = (i - kClasses * kOwn) / kOwn, n = (i - kClasses * kOwn) % kOwn;
      const std::int64_t at = static_cast<std::int64_t>(r * kOwn + n) * p.ld[j + 1] + in_of(j + 1);
      s.b_master[j * kOwn + n] = p.bias ? p.master[j + 1][at] : 0.0f;
      s.b_mom[j * kOwn + n] = p.bias && momentum() ? p.mom[j + 1][at] : 0.0f;
      s.b_var[j * kOwn + n] = p.bias && kAdamUpdate ? p.var[j + 1][at] : 0.0f;
    } else if (i < kClasses * kOwn + kDepth * kOwn + kClasses) {
      const int cls = i - kClasses * kOwn - kDepth * kOwn;
      const std::int64_t at = cls * ld4 + kWidth;
      s.b4[cls] = p.bias ? p.master[kDepth + 1][at] : 0.0f;
      s.b4_mom[cls] = p.bias && momentum() ? p.mom[kDepth + 1][at] : 0.0f;
      s.b4_var[cls] = p.bias && kAdamUpdate ? p.var[kDepth + 1][at] : 0.0f;
      if (r == 0) p.b4_live[cls] = s.b4[cls];  // read by the last forward stage's prefetch, after a barrier
    }
  }

  // A parameter back to the flat master (and its state, where given) and its bf16 into both copies.
  __device__ void put(int l, std::int64_t at, float w, const float* mom, const float* var) const {
    p.master[l][at] = w;
    if (mom != nullptr && momentum()) p.mom[l][at] = *mom;
    if (var != nullptr && kAdamUpdate) p.var[l][at] = *var;
    p.w[l][at] = p.w_other[l][at] = __float2bfloat16_rn(w);
  }

  __device__ void store_state() const {
    for (int l = 1; l <= kDepth; ++l) {
      const int cols = kOwn * span_tiles_of(l), i0 = span_first_of(l);
      for (int i = static_cast<int>(threadIdx.x); i < cols * kRange; i += kThreads) {
        const int o = i / cols, n = i % cols;
        put(l, static_cast<std::int64_t>(k * kRange + o) * p.ld[l] + i0 + n, s.master_of(l)[n * kTileStride + o],
            nullptr, nullptr);  // the tile's state: convert_state
      }
    }
    const int i = static_cast<int>(threadIdx.x);
    const int ld4 = p.ld[kDepth + 1];
    if (i < kClasses * kOwn) {
      put(kDepth + 1, (i / kOwn) * ld4 + r * kOwn + i % kOwn, s.w4[i], &s.w4_mom[i], &s.w4_var[i]);
    } else if (p.bias && i < kClasses * kOwn + kDepth * kOwn) {
      const int j = (i - kClasses * kOwn) / kOwn, n = (i - kClasses * kOwn) % kOwn;
      put(j + 1, static_cast<std::int64_t>(r * kOwn + n) * p.ld[j + 1] + in_of(j + 1), s.b_master[j * kOwn + n],
          &s.b_mom[j * kOwn + n], &s.b_var[j * kOwn + n]);
    } else if (p.bias && r == 0 && i < kClasses * kOwn + kDepth * kOwn + kClasses) {
      const int cls = i - kClasses * kOwn - kDepth * kOwn;
      put(kDepth + 1, cls * ld4 + kWidth, s.b4[cls], &s.b4_mom[cls], &s.b4_var[cls]);
    }
  }

  // The step's rows and update scalars (every thread computes the same; Adam's beta^t as running
  // products, a multiply a step instead of pow's hundreds of instructions a thread).
  __device__ void begin_step(int step) {
    rows = rows_of(step);
    if constexpr (kAdamUpdate) {
      beta1_t *= p.opt.beta1_d;
      beta2_t *= p.opt.beta2_d;
    }
    scalars = update_scalars(p.opt, next_lr, beta1_t, beta2_t, first_update + step == 0, 1.0f, false);
    if (step + 1 < p.steps) next_lr = step_lr(p.opt, first_step + step + 1);  // lands during this step
  }

  // The epoch: the first batch, then each step's forward stages, output stage and backward stages,
  // each ended by the grid barrier; the next batch's sample indices are read before the output stage,
  // its pixels fetched as the last backward stage starts and stored when it ends.
  __device__ void run() {
    const StepState start = *p.state;
    first_step = start.step;
    first_update = start.opt_steps;
    next_lr = step_lr(p.opt, first_step);
    if constexpr (kAdamUpdate) {  // beta^t of the updates applied so far; begin_step takes them one further
      beta1_t = pow(p.opt.beta1_d, static_cast<double>(first_update));
      beta2_t = pow(p.opt.beta2_d, static_cast<double>(first_update));
    }
    load_state();
    convert_state(p.mom, p.mom_frag, true);
    convert_state(p.var, p.var_frag, true);
    init_exchange();
    // Every block of the cluster has started, and its mbarrier is initialised, before any copy into
    // another's shared memory.
    cluster_sync();
    Own own = fetch_own(sample_of(0));
    store_own(own, 0);
    int label = own.label;  // row threadIdx.x's label of the step's batch
    GridBarrier& barrier = barrier_;
    barrier.sync();
    for (int step = 0; step < p.steps; ++step) {
      begin_step(step);
      for (int l = 1; l <= kDepth; ++l) {
        forward(l, step);
        barrier.arrive();
        copy_async_wait_group<0>();  // the next stage's prefetched weights, the block's after the wait's block barrier
        barrier.wait();
      }
      const int next_sample = sample_of(step + 1);  // lands during the output stage's loads
      output(step, label);
      barrier.sync();
      for (int l = kDepth; l >= 1; --l) {
        const Own next = l == 1 ? fetch_own(next_sample) : Own{};  // lands during the stage
        if (backward(l, step, barrier)) continue;
        if (l == 1 && step + 1 < p.steps) {
          store_own(next, step + 1);
          label = next.label;
        }
        barrier.sync();
      }
    }
    store_state();
    convert_state(p.mom, p.mom_frag, false);
    convert_state(p.var, p.var_frag, false);
    if (r == 0 && threadIdx.x == 0) {
      StepState end = start;
      end.step = first_step + p.steps;
      end.opt_steps = first_update + p.steps;
      end.found_inf = 0;
      end.blocks_done = 0;
      *p.state = end;
    }
    if (r == 0 && threadIdx.x == (kWarps - 1) * 32) {  // add_metrics' lane: it holds the sums
      p.metrics->loss_sum += loss_total;
      p.metrics->correct += hits_total;
    }
    cluster_sync();  // no block leaves while another may still read its shared memory
  }
};

#endif  // SPRINTNET_HAS_SPLIT_KERNEL

template <class S, ActivationKind kAct, UpdateForm kUpdate, int kDepth>
__global__ void __launch_bounds__(kThreads, 1) split_epoch_kernel(const __grid_constant__ SplitParams params) {
#ifdef SPRINTNET_HAS_SPLIT_KERNEL
  extern __shared__ __align__(128) std::uint8_t smem[];
  Epoch<S, kAct, kUpdate, kDepth> epoch(params, smem);
  epoch.run();
#else
  __trap();
#endif
}

using SplitKernel = void (*)(SplitParams);

template <class S, UpdateForm kUpdate, int kDepth>
SplitKernel kernel_for(ActivationKind activation) {
  switch (activation) {
    case ActivationKind::kIdentity: return split_epoch_kernel<S, ActivationKind::kIdentity, kUpdate, kDepth>;
    case ActivationKind::kReLU: return split_epoch_kernel<S, ActivationKind::kReLU, kUpdate, kDepth>;
    case ActivationKind::kTanh: return split_epoch_kernel<S, ActivationKind::kTanh, kUpdate, kDepth>;
    case ActivationKind::kSigmoid: return split_epoch_kernel<S, ActivationKind::kSigmoid, kUpdate, kDepth>;
    case ActivationKind::kGELU: return split_epoch_kernel<S, ActivationKind::kGELU, kUpdate, kDepth>;
    case ActivationKind::kSiLU: return split_epoch_kernel<S, ActivationKind::kSiLU, kUpdate, kDepth>;
  }
  return nullptr;
}

template <class S, int kDepth>
SplitKernel kernel_for(const FlatOptimizerArgs& o, ActivationKind activation) {
  switch (update_form_of(o)) {
    case UpdateForm::kPlainSgd: return kernel_for<S, UpdateForm::kPlainSgd, kDepth>(activation);
    case UpdateForm::kSgd: return kernel_for<S, UpdateForm::kSgd, kDepth>(activation);
    case UpdateForm::kAdam: return kernel_for<S, UpdateForm::kAdam, kDepth>(activation);
  }
  return nullptr;
}

// The kernels of one shape and depth (6 activations x 3 updates), each instantiated in its own
// translation unit (split_epoch_instance.cu.in): CUDA's lazy loading loads a whole module at its
// first use, and one module of all 108 kernels cost the default run 0.14 s of its start-up (H100);
// its shape and depth's 18 take ~0.01 s (784 x 3: ~0.08 s).
#define SPRINTNET_SPLIT_INSTANCES(X) X(Wide, 1) X(Wide, 2) X(Wide, 3) X(Narrow, 1) X(Narrow, 2) X(Narrow, 3)
#define SPRINTNET_SPLIT_EXTERN(S, D) extern template SplitKernel kernel_for<S, D>(const FlatOptimizerArgs&, ActivationKind);
SPRINTNET_SPLIT_INSTANCES(SPRINTNET_SPLIT_EXTERN)
#undef SPRINTNET_SPLIT_EXTERN

}  // namespace sprintnet::cuda::split
