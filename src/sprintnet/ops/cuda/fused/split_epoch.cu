// The fused engine's split kernel (split_epoch.h; docs/FUSED.md, v7). 98 blocks
// in 14 clusters of 7, one block an SM. Block r = 7c + k owns neurons 8r..8r+7 of
// every hidden layer (its biases, the output layer's columns 8r..8r+7, its pixel
// columns of each batch); rank k of cluster c takes range 112k..112k+111 of the k
// (or o) dimension of every product against the cluster's 56 neurons:
//   forward l   partial X_l[:, cluster's 56] over the rank's inputs: X_{l-1}'s 128 x 112 slice and
//               W_l's 56 x 112 tile (the bf16 copy); each block's own 8 columns' 7 partials are
//               added by their owner in rank order, then bias and activation
//   output      partial logits over the rank's range, summed by every block (each computes the
//               whole loss and dlogits, the last hidden layer's gradient D[:, own] and the
//               output layer's weight gradient of its columns own)
//   backward l  partial D_{l-1}[:, cluster's 56] = D_l[:, range] · W_l[range, 56] from the fp32
//               master tile, and dW_l[range, 56] = D_l[:, range]ᵀ · X_{l-1}[:, 56] applied at once
//               to that tile (its optimizer state in fragment order for the epoch, a float4 a lane)
// With one to three hidden layers (kDepth). Partial sums travel as bulk copies (cp.async.bulk over
// DSMEM) onto each receiver's mbarrier; activations through L2, a grid barrier ending each stage
// (2 kDepth + 1 a step: 7 for 784-784-784-784-10). Every sum has a fixed
// order: reruns are bit-identical. A partial last batch masks its missing rows (zero input, zero
// dlogits, so zero gradients). The bf16 copy the products read is copies[0] during the epoch;
// at its end the fp32 master, rounded, goes into both copies with the bias columns, for the
// grid kernel's evaluation (copies[step % 2]).
#include <cuda_bf16.h>

#include <map>
#include <mutex>

#include "sprintnet/ops/cuda/activation_math.cuh"
#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/fused/grid_barrier.cuh"
#include "sprintnet/ops/cuda/fused/ptx.cuh"
#include "sprintnet/ops/cuda/fused/split_epoch.h"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kBatch = kSplitMaxBatch, kWidth = kSplitWidth, kIn = kSplitInputs, kClasses = kSplitClasses;
constexpr int kMaxHidden = kSplitMaxHidden;  // buffers and shared memory are sized for it
constexpr int kOwn = 8;                                   // neurons (and pixel columns) a block owns
constexpr int kBlocks = kWidth / kOwn;                    // 98
constexpr int kCluster = kSplitClusterSize;               // 7
constexpr int kSpan = kCluster * kOwn;                    // 56 neurons a cluster
constexpr int kRange = kWidth / kCluster;                 // 112: a rank's share of k (or o)
constexpr int kRangeTiles = kRange / 16;                  // 7
constexpr int kSpanTiles = kSpan / 8;                     // 7 n-tiles
constexpr int kGradTiles = kRangeTiles * kSpanTiles;      // 49 weight-gradient tiles of 16 x 8
constexpr int kWarps = 8, kThreads = 32 * kWarps;         // a warp a 16-row m-tile
constexpr int kTileBytes = kBatch * 32;                   // 128 rows x 16 bf16
constexpr int kTileStride = kRange + 8;                   // the master tile's floats a row, W's bf16
constexpr int kXtStride = kBatch + 8;                     // bf16: own columns, transposed
static_assert(kBlocks == kSplitBlocks && kIn == kWidth, "the inputs split like the neurons: 8 a block");
static_assert(kRange % 16 == 0 && kCluster * kRange == kWidth && kBlocks % kCluster == 0, "7 ranks of whole tiles");
static_assert(kThreads == 2 * kBatch && kBatch == 16 * kWarps, "two threads a row, a warp an m-tile");
static_assert(kClasses == 10, "the output stage's pieces carry classes 0-7 from every lane and 8-9 from t = 0");

// Shared memory, a block: [offset, bytes) of each region (16-byte aligned: cp.async and bulk copies).
constexpr int kSliceOff = 0, kSliceBytes = kRangeTiles * kTileBytes;               // X or D[:, range]
constexpr int kWtOff = kSliceOff + kSliceBytes, kWtBytes = kSpan * kTileStride * 2;  // W[56 (or 16), range]
constexpr int kXcOff = kWtOff + kWtBytes, kXcBytes = kBatch * kSpan * 2;           // X_{l-1}[:, cluster's 56]
constexpr int kRecvOff = kXcOff + kXcBytes, kRecvBytes = kCluster * kBatch * kOwn * 4;  // [source][128][8]
constexpr int kPartOff = kRecvOff + kRecvBytes, kPartBytes = kCluster * kBatch * kOwn * 4;  // [owner][128][8]
constexpr int kMasterOff = kPartOff + kPartBytes, kMasterBytes = kMaxHidden * kSpan * kTileStride * 4;
constexpr int kXtOff = kMasterOff + kMasterBytes, kXtBytes = (kMaxHidden + 1) * kOwn * kXtStride * 2;
constexpr int kPreOff = kXtOff + kXtBytes, kPreBytes = kMaxHidden * kOwn * kXtStride * 2;
constexpr int kLogitOff = kPreOff + kPreBytes, kLogitBytes = kBatch * 16 * 4;
constexpr int kDlOff = kLogitOff + kLogitBytes, kDlBytes = kBatch * kClasses * 4;
constexpr int kDtOff = kDlOff + kDlBytes, kDtBytes = kOwn * kBatch * 4;
constexpr int kSmallOff = kDtOff + kDtBytes, kSmallFloats = 464 + kBatch + 116;
constexpr int kBarOff = kSmallOff + kSmallFloats * 4;
constexpr int kSmemBytes = kBarOff + 8;
static_assert(kSmemBytes <= 227 * 1024, "one block an SM");
static_assert(kBatch * kClasses * 4 <= kPartBytes, "the partial logits fit the partials' buffer");
static_assert(kCluster * kBatch * kClasses * 4 <= kXcBytes + kRecvBytes && kRecvOff == kXcOff + kXcBytes,
              "the 7 ranks' partial logits land over XC and the receive buffer");
static_assert(16 * kTileStride * 2 <= kWtBytes, "W_4's 16 padded rows fit W's tile");
static_assert(kWtOff % 16 == 0 && kXcOff % 16 == 0 && kRecvOff % 16 == 0 && kPartOff % 16 == 0 &&
                  kSmallOff % 16 == 0,
              "16-byte aligned copies");

// Global scratch: X_0 (even steps), X_0 (odd steps), X_1..X_3, D_1..D_3, b_4 as every block reads
// it, then the hidden layers' optimizer state (momentum; Adam: both moments) in the order the weight-gradient fragments hold it
// ([layer][block][tile][lane], a float4 a lane: one 512-byte load and store a warp a tile; the flat
// layout's two float2 from 16 rows measured ~1.4 us a backward stage slower, docs/FUSED.md).
constexpr std::int64_t kActivationBytes = std::int64_t{kBatch} * kWidth * 2;
constexpr int kScratchActivations = 2 + 2 * kMaxHidden;
constexpr std::int64_t kLiveBiasBytes = 64;
constexpr std::int64_t kMomentumBytes = std::int64_t{kMaxHidden} * kBlocks * kGradTiles * 32 * 16;

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

// The update a kernel applies: kPlainSgd, SGD with momentum and neither dampening nor Nesterov
// (weight decay or not), three multiply-adds a parameter (the general form's selects and products
// measured ~0.6 us a backward stage, issue-bound; the same arithmetic as sgd_update_value's on
// those settings); kSgd, every other SGD setting; kAdam, Adam and AdamW (flat_update.cuh's).
enum class Update { kPlainSgd, kSgd, kAdam };

// Thread-block clusters, DSMEM bulk copies and mbarrier transaction counts exist from sm_90: builds
// for older GPUs compile the kernel empty (split_epoch_unavailable refuses it there).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define SPRINTNET_HAS_SPLIT_KERNEL 1
#endif

#ifdef SPRINTNET_HAS_SPLIT_KERNEL

using ptx::mma_bf16;
using ptx::shared_address;

__device__ __forceinline__ void cp16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
__device__ __forceinline__ std::uint32_t pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
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

struct Smem {
  std::uint8_t* slice;  // 7 swizzled 128 x 16 tiles: the rank's columns of X_{l-1} or D_l
  bf16* wt;             // [56 or 16][kTileStride]: W_l[cluster's 56, range] (forward), W_4[:, range]
  bf16* xc;             // [128][56]: X_{l-1}[:, cluster's 56] (backward)
  float* recv;          // [source rank][128][8]: the partial sums of this block's own 8 columns
  float* part;          // [owner rank][128][8]: this block's partial sums, sent; or [128][10] logits
  float* master;        // [layer 1..3][56][kTileStride]: W_l[range, cluster's 56] transposed, fp32
  bf16* xt;             // [layer 0..3][8][kXtStride]: X_l[:, own] transposed
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
  std::uint64_t* bar;            // completes when the 7 ranks' copies of a stage have landed
  __device__ explicit Smem(std::uint8_t* s) {
    slice = s + kSliceOff;
    wt = reinterpret_cast<bf16*>(s + kWtOff);
    xc = reinterpret_cast<bf16*>(s + kXcOff);
    recv = reinterpret_cast<float*>(s + kRecvOff);
    part = reinterpret_cast<float*>(s + kPartOff);
    master = reinterpret_cast<float*>(s + kMasterOff);
    xt = reinterpret_cast<bf16*>(s + kXtOff);
    pre = reinterpret_cast<bf16*>(s + kPreOff);
    logit = reinterpret_cast<float*>(s + kLogitOff);
    dl = reinterpret_cast<float*>(s + kDlOff);
    dt = reinterpret_cast<float*>(s + kDtOff);
    float* f = reinterpret_cast<float*>(s + kSmallOff);
    w4 = f; w4_mom = f + 80; w4_grad = f + 160;
    b_master = f + 240; b_mom = f + 264;
    b4 = f + 288; b4_mom = f + 298; b4_grad = f + 308;
    row_loss = f + 320;
    b4_live = f + 448;  // 16-byte aligned: a cp.async destination
    row_hit = reinterpret_cast<int*>(f + 464);
    w4_var = f + 592; b_var = f + 672; b4_var = f + 696;
    bar = reinterpret_cast<std::uint64_t*>(s + kBarOff);
  }
  __device__ float* master_of(int l) const { return master + (l - 1) * kSpan * kTileStride; }
  __device__ bf16* xt_of(int l) const { return xt + l * kOwn * kXtStride; }
  __device__ bf16* pre_of(int l) const { return pre + (l - 1) * kOwn * kXtStride; }
};

// The batch's own 8 pixel columns of row threadIdx.x, fetched a stage before they are stored.
struct OwnRow {
  uint2 bytes = make_uint2(0, 0);
  int label = 0;
  bool valid = false;
};

__device__ constexpr int in_of(int l) { return l == 1 ? kIn : kWidth; }

// kDepth: the model's hidden layers of 784 (1 to kMaxHidden); the stages loop over them.
template <ActivationKind kAct, Update kUpdate, int kDepth>
struct Epoch {
  static constexpr int kGradTilesPerWarp = (kGradTiles + kWarps - 1) / kWarps;
  // GELU's and SiLU's slopes need the pre-activation; the others' follow from the output.
  static constexpr bool kKeepsPre = kAct == ActivationKind::kGELU || kAct == ActivationKind::kSiLU;
  const SplitParams& p;
  const Smem s;
  const int r, c, k, warp, lane, g, t;
  std::int64_t first_step = 0, first_update = 0;  // the state at the epoch's start
  int rows = 0;                                    // of the step running
  BlockScalars scalars{};                          // its learning rate, whether it is the first update, Adam's
  double next_lr = 0.0;                            // the next step's, loaded a step ahead
  double beta1_t = 1.0, beta2_t = 1.0;             // Adam: beta^t of the step's update count t
  std::uint32_t phase = 0;                         // the parity the exchange's mbarrier completes next
  double loss_total = 0.0;                         // block 0, add_metrics' lane: the epoch's sums
  std::int64_t hits_total = 0;

  __device__ Epoch(const SplitParams& params, std::uint8_t* smem)
      : p(params),
        s(smem),
        r(static_cast<int>(blockIdx.x)),
        c(static_cast<int>(blockIdx.x) / kCluster),
        k(static_cast<int>(blockIdx.x) % kCluster),
        warp(static_cast<int>(threadIdx.x) >> 5),
        lane(static_cast<int>(threadIdx.x) & 31),
        g((static_cast<int>(threadIdx.x) & 31) >> 2),
        t(static_cast<int>(threadIdx.x) & 3) {}

  static constexpr bool kAdamUpdate = kUpdate == Update::kAdam;
  __device__ bool momentum() const { return p.mom[1] != nullptr; }
  // One parameter's update: its state `m` (SGD's momentum, Adam's first moment) and `v` (Adam's
  // second moment; unused for SGD).
  __device__ void update(float& w, float& m, float& v, float grad) const {
    if constexpr (kUpdate == Update::kPlainSgd) {
      const float d = fmaf(p.opt.weight_decay, w, grad);
      m = scalars.first_update ? d : fmaf(p.opt.momentum, m, d);  // torch's first update: buf = d
      w = fmaf(-scalars.lr, m, w);
    } else if constexpr (kUpdate == Update::kSgd) {
      sgd_update_value(p.opt, scalars, w, grad, m, momentum());
    } else {
      adam_update(p.opt, scalars, w, grad, m, v);
    }
  }
  __device__ int rows_of(int step) const {
    const std::int64_t left = p.samples - static_cast<std::int64_t>(step) * p.batch;
    return static_cast<int>(left < p.batch ? left : p.batch);
  }
  __device__ bf16* input_of(int step) const { return (step & 1) != 0 ? p.x0_odd : p.x[0]; }
  __device__ const bf16* below_of(int l, int step) const { return l == 1 ? input_of(step) : p.x[l - 1]; }

  // ---- the batch: a block gathers its own 8 pixel columns of every row.
  __device__ OwnRow fetch_own(int step) const {
    const int b = static_cast<int>(threadIdx.x);
    OwnRow row;
    if (b >= kBatch || step >= p.steps || b >= rows_of(step)) return row;
    const int sample = __ldg(p.order + static_cast<std::int64_t>(step) * p.batch + b);
    row.bytes = __ldg(reinterpret_cast<const uint2*>(p.images + static_cast<std::int64_t>(sample) * kIn + r * kOwn));
    row.label = __ldg(p.labels + sample);
    row.valid = true;
    return row;
  }
  // Normalised into X_0 and the block's transposed copy; rows past the batch are zeros.
  __device__ void store_own(const OwnRow& own, int step) const {
    const int b = static_cast<int>(threadIdx.x);
    if (b >= kBatch) return;
    const auto* u = reinterpret_cast<const std::uint8_t*>(&own.bytes);
    bf16 v[kOwn];
#pragma unroll
    for (int n = 0; n < kOwn; ++n) {
      v[n] = __float2bfloat16_rn(own.valid ? static_cast<float>(u[n]) * p.scale + p.shift : 0.0f);
      s.xt_of(0)[n * kXtStride + b] = v[n];
    }
    *reinterpret_cast<uint4*>(input_of(step) + b * kWidth + r * kOwn) = *reinterpret_cast<const uint4*>(v);
  }

  // ---- loads into shared memory (cp.async, one commit group a stage).
  // src[:, 112k .. 112k+111] into the slice's 7 tiles: a thread's 7 copies share its row and half.
  __device__ void load_slice(const bf16* src) const {
    const int row = static_cast<int>(threadIdx.x) >> 1, half = static_cast<int>(threadIdx.x) & 1;
#pragma unroll
    for (int tile = 0; tile < kRangeTiles; ++tile) {
      cp16(s.slice + tile * kTileBytes + slot_offset(row, half), src + row * kWidth + k * kRange + tile * 16 + half * 8);
    }
  }
  // Rows row0 .. row0 + count - 1 of layer l's bf16 weights, the rank's range of columns, into wt.
  __device__ void load_weight_tile(int l, int row0, int count) const {
    for (int q = static_cast<int>(threadIdx.x); q < count * (kRange / 8); q += kThreads) {
      const int n = q / (kRange / 8), j = q % (kRange / 8);
      cp16(s.wt + n * kTileStride + j * 8, p.w[l] + static_cast<std::int64_t>(row0 + n) * p.ld[l] + k * kRange + j * 8);
    }
  }

  // ---- the exchange (v7g): a block's pieces go to the 7 ranks by one bulk copy each, completing
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
  // itself), the 6 others by a bulk copy each.
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
  // This block's own 8 columns, the 7 ranks' partials added in rank order: thread i takes row
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

  // part[owner][rows][8] = this warp's 16 rows of the slice · B(n-tile nt) for the 7 n-tiles (n-tile
  // nt belongs to rank nt), over the slice's 7 k-steps; b_of(ks, nt, b) loads B's fragment.
  template <class BFragment>
  __device__ void slice_product(BFragment&& b_of) const {
    const int m0 = warp * 16;
    float acc[kSpanTiles][4] = {};
#pragma unroll
    for (int ks = 0; ks < kRangeTiles; ++ks) {
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
  __device__ void forward(int l, int step) {
    load_weight_tile(l, c * kSpan, kSpan);
    load_slice(below_of(l, step));
    commit();
    wait_all();
    __syncthreads();
    slice_product([&](int ks, int nt, std::uint32_t(&b)[2]) {
      ptx::ldmatrix_x2(b, shared_address(s.wt + (nt * 8 + (lane & 7)) * kTileStride + ks * 16 + ((lane >> 3) & 1) * 8));
    });
    constexpr int kPiece = kBatch * kOwn * 4;
    send_pieces(s.part, kPiece, s.recv, kPiece);
    receive_pieces(kPiece);
    const float4 v = sum_ranks();
    finish_own<true>(l, {v.x, v.y, v.z, v.w});
  }

  // The output layer: partial logits over the rank's range, every block adds the 7 (rank order)
  // and runs the loss, its gradient, D_3[:, own] and the output layer's gradients.
  __device__ void output(int step, int label) {
    if (threadIdx.x < 3) cp16(s.b4_live + 4 * threadIdx.x, p.b4_live + 4 * threadIdx.x);
    load_weight_tile(kDepth + 1, 0, kClasses);
    for (int i = static_cast<int>(threadIdx.x); i < (16 - kClasses) * kTileStride; i += kThreads) {
      s.wt[kClasses * kTileStride + i] = bf16(0.0f);
    }
    load_slice(p.x[kDepth]);
    commit();
    wait_all();
    __syncthreads();
    {  // the partial logits [128][10] to every rank, landing at [source][128][10] over XC and recv
      float acc[2][4] = {};
#pragma unroll
      for (int ks = 0; ks < kRangeTiles; ++ks) {
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
    constexpr int kPiece = kBatch * kClasses * 4;
    const float* logits_in = reinterpret_cast<const float*>(s.xc);
    send_pieces(s.part, 0, logits_in, kPiece);  // the same piece to every rank
    receive_pieces(kPiece);
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
  // for row b: the row's loss, first maximum and dlogits (zero past the batch's rows).
  __device__ void row_loss(int label) const {
    const int row = static_cast<int>(threadIdx.x);
    const bool valid = row < rows;
    float z[kClasses], top = -INFINITY;
    int best = 0;
#pragma unroll
    for (int cls = 0; cls < kClasses; ++cls) {
      z[cls] = s.logit[row * 16 + cls] + s.b4_live[cls];
      if (z[cls] > top) {  // the first maximum, as torch.argmax
        top = z[cls];
        best = cls;
      }
    }
    float loss = 0.0f;
    if (p.mse) {
      const float scale = 2.0f / static_cast<float>(rows * kClasses);
#pragma unroll
      for (int cls = 0; cls < kClasses; ++cls) {
        const float diff = z[cls] - (cls == label ? 1.0f : 0.0f);
        loss += diff * diff;
        s.dl[row * kClasses + cls] = valid ? scale * diff : 0.0f;
      }
    } else {
      float total = 0.0f, logit_sum = 0.0f;
#pragma unroll
      for (int cls = 0; cls < kClasses; ++cls) {
        total += expf(z[cls] - top);
        logit_sum += z[cls];
      }
      const float log_total = logf(total), off_target = p.smoothing / static_cast<float>(kClasses);
      const float inv_rows = 1.0f / static_cast<float>(rows);  // exact for 128 (and any power of two)
      loss = log_total + top - (1.0f - p.smoothing) * z[label] - off_target * logit_sum;
#pragma unroll
      for (int cls = 0; cls < kClasses; ++cls) {
        const float prob = expf(z[cls] - top - log_total);
        const float target = (cls == label ? 1.0f - p.smoothing : 0.0f) + off_target;
        s.dl[row * kClasses + cls] = valid ? (prob - target) * inv_rows : 0.0f;
      }
    }
    s.row_loss[row] = valid ? loss : 0.0f;
    s.row_hit[row] = valid && best == label ? 1 : 0;
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
    if (p.progress != nullptr) {
      const std::int64_t steps_done = step + 1;
      asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(p.progress), "l"(steps_done),
                   "l"(__double_as_longlong(loss_total))
                   : "memory");
    }
  }

  __device__ void output_loss(int step, int label) {
    if (threadIdx.x < kBatch) row_loss(label);
    __syncthreads();
    {  // D_3[:, own] = (dlogits · bf16(W_4[:, own])) ⊙ f'(X_3[:, own])
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
    // Sums over the batch: dW_4[c][own n] (80), b_3[own] (8), and b_4 (10); two threads an item,
    // 64 rows each, the halves added by a shuffle (a fixed order).
    const int item = static_cast<int>(threadIdx.x) >> 1, half = static_cast<int>(threadIdx.x) & 1;
    constexpr int kItems = kClasses * kOwn + kOwn + kClasses;
    static_assert(2 * kItems <= kThreads, "two threads an item");
    float v = 0.0f;
    const int row0 = half * (kBatch / 2);
    if (item < kClasses * kOwn) {
      const int cls = item / kOwn, n = item % kOwn;
      const bf16* x = s.xt_of(kDepth) + n * kXtStride;
#pragma unroll 8
      for (int row = row0; row < row0 + kBatch / 2; ++row) v += s.dl[row * kClasses + cls] * __bfloat162float(x[row]);
    } else if (item < kClasses * kOwn + kOwn) {
      const int n = item - kClasses * kOwn;
#pragma unroll 8
      for (int row = row0; row < row0 + kBatch / 2; ++row) v += s.dt[n * kBatch + row];
    } else if (item < kItems) {
      const int cls = item - kClasses * kOwn - kOwn;
#pragma unroll 8
      for (int row = row0; row < row0 + kBatch / 2; ++row) v += s.dl[row * kClasses + cls];
    }
    v += __shfl_xor_sync(0xffffffffu, v, 1);
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

  // Layer l's backward: the input gradient D_{l-1}[:, cluster's 56] (l > 1) from the old weights,
  // and dW_l[range, cluster's 56] applied at once to the master tile.
  __device__ void backward(int l, int step) {
    if (l == kDepth) apply_output_update();
    load_slice(p.d[l]);
    for (int q = static_cast<int>(threadIdx.x); q < kBatch * (kSpan / 8); q += kThreads) {  // X_{l-1}[:, 56]
      const int row = q / (kSpan / 8), j = q % (kSpan / 8);
      cp16(s.xc + row * kSpan + j * 8, below_of(l, step) + row * kWidth + c * kSpan + j * 8);
    }
    commit();
    if (l == 1) add_metrics(step);  // the output stage's row losses and hits are still in place
    // This warp's weight-gradient tiles (warp, warp + 8, ...) and their momentum, a float4 a lane.
    const int ld = p.ld[l];
    float4* frag = momentum() ? fragments(p.mom_frag, l) : nullptr;
    float4* var_frag = kAdamUpdate ? fragments(p.var_frag, l) : nullptr;
    float4 mom[kGradTilesPerWarp], var[kAdamUpdate ? kGradTilesPerWarp : 1];
#pragma unroll
    for (int j = 0; j < kGradTilesPerWarp; ++j) {
      const int tile = warp + j * kWarps;
      mom[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (tile < kGradTiles && frag != nullptr) mom[j] = __ldcg(frag + tile * 32 + lane);
      if constexpr (kAdamUpdate) {
        if (tile < kGradTiles) var[j] = __ldcg(var_frag + tile * 32 + lane);
      }
    }
    wait_all();
    __syncthreads();
    float* master = s.master_of(l);
    const bool input_grad = l > 1;
    if (input_grad) {  // partial D_{l-1}[:, cluster's 56] over the rank's o range: bf16 of the fp32 master
      slice_product([&](int ks, int nt, std::uint32_t(&b)[2]) {
        const float* m = master + (nt * 8 + g) * kTileStride + ks * 16 + 2 * t;
        const float2 lo = *reinterpret_cast<const float2*>(m);
        const float2 hi = *reinterpret_cast<const float2*>(m + 8);
        b[0] = pack(lo.x, lo.y);
        b[1] = pack(hi.x, hi.y);
      });
    }
    constexpr int kPiece = kBatch * kOwn * 4;
    if (input_grad) {
      send_pieces(s.part, kPiece, s.recv, kPiece);  // its __syncthreads: every warp has read the old weights
    } else {
      __syncthreads();  // every warp has read the old weights before any is updated
    }
    // dW_l[range, cluster's 56] = D_l[:, range]ᵀ · X_{l-1}[:, 56], a tile at a time (interleaving the
    // tiles' chains measured slower in the lab).
#pragma unroll
    for (int j = 0; j < kGradTilesPerWarp; ++j) {
      const int tile = warp + j * kWarps;
      if (tile >= kGradTiles) break;
      const int mo = tile / kSpanTiles, ni = tile % kSpanTiles;
      float dw[4] = {};
#pragma unroll
      for (int kb = 0; kb < kBatch / 16; ++kb) {
        std::uint32_t a[4], b[2];
        tile_a_trans(a, s.slice + mo * kTileBytes, kb * 16);
        ptx::ldmatrix_x2_trans(b, shared_address(s.xc + (kb * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kSpan + ni * 8));
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
      const std::int64_t at = static_cast<std::int64_t>(k * kRange + mo * 16 + g) * ld + c * kSpan + ni * 8 + 2 * t;
      *reinterpret_cast<__nv_bfloat162*>(p.w[l] + at) = __halves2bfloat162(fresh[0], fresh[1]);
      *reinterpret_cast<__nv_bfloat162*>(p.w[l] + at + 8 * ld) = __halves2bfloat162(fresh[2], fresh[3]);
    }
    if (!input_grad) return;
    receive_pieces(kPiece);
    const float4 v = sum_ranks();
    finish_own<false>(l - 1, {v.x, v.y, v.z, v.w});
    __syncthreads();
    apply_bias(l - 2);  // b_{l-1}[own]
  }

  // This block's momentum fragments of hidden layer l: [tile][lane] float4, lane (g, t) of tile
  // (mo, ni) holding rows o, o + 8 (o = 112k + 16mo + g) and columns i, i + 1 (i = 56c + 8ni + 2t)
  // of the flat state, as the fragment of dW it updates.
  __device__ float4* fragments(float4* state, int l) const {
    return state + (static_cast<std::int64_t>(l - 1) * kBlocks + r) * kGradTiles * 32;
  }
  // Between a flat state and its fragments: to_fragments at the epoch's start, back at its end.
  __device__ void convert_state(float* const (&flat)[kMaxHidden + 2], float4* state, bool to_fragments) const {
    if (state == nullptr) return;
    for (int l = 1; l <= kDepth; ++l) {
      float4* frag = fragments(state, l);
      for (int e = static_cast<int>(threadIdx.x); e < kGradTiles * 32; e += kThreads) {
        const int tile = e / 32, fg = (e % 32) >> 2, ft = e & 3;
        float* at = flat[l] + static_cast<std::int64_t>(k * kRange + (tile / kSpanTiles) * 16 + fg) * p.ld[l] + c * kSpan +
                    (tile % kSpanTiles) * 8 + 2 * ft;
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
      for (int i = static_cast<int>(threadIdx.x); i < kSpan * kRange; i += kThreads) {
        const int o = i / kSpan, n = i % kSpan;
        const std::int64_t at = static_cast<std::int64_t>(k * kRange + o) * p.ld[l] + c * kSpan + n;
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
      if (r == 0) p.b4_live[cls] = s.b4[cls];  // read in the first output stage, barriers later
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
      for (int i = static_cast<int>(threadIdx.x); i < kSpan * kRange; i += kThreads) {
        const int o = i / kSpan, n = i % kSpan;
        put(l, static_cast<std::int64_t>(k * kRange + o) * p.ld[l] + c * kSpan + n, s.master_of(l)[n * kTileStride + o],
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
  // each ended by the grid barrier; the next batch is fetched as the last backward stage starts
  // and stored when it ends.
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
    OwnRow own = fetch_own(0);
    store_own(own, 0);
    int label = own.label;  // row threadIdx.x's label of the step's batch
    GridBarrier barrier(p.barrier, p.clock, p.clock_capacity);
    barrier.sync();
    for (int step = 0; step < p.steps; ++step) {
      begin_step(step);
      for (int l = 1; l <= kDepth; ++l) {
        forward(l, step);
        barrier.sync();
      }
      output(step, label);
      barrier.sync();
      for (int l = kDepth; l >= 1; --l) {
        const OwnRow next = l == 1 ? fetch_own(step + 1) : OwnRow{};  // lands during the stage
        backward(l, step);
        if (l == 1 && step + 1 < p.steps) {
          __syncthreads();  // X_0's own columns are read (dW_1's fragments) before the next batch lands
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

template <ActivationKind kAct, Update kUpdate, int kDepth>
__global__ void __launch_bounds__(kThreads, 1) split_epoch_kernel(const __grid_constant__ SplitParams params) {
#ifdef SPRINTNET_HAS_SPLIT_KERNEL
  extern __shared__ __align__(128) std::uint8_t smem[];
  Epoch<kAct, kUpdate, kDepth> epoch(params, smem);
  epoch.run();
#else
  __trap();
#endif
}

using SplitKernel = void (*)(SplitParams);

template <Update kUpdate, int kDepth>
SplitKernel kernel_for(ActivationKind activation) {
  switch (activation) {
    case ActivationKind::kIdentity: return split_epoch_kernel<ActivationKind::kIdentity, kUpdate, kDepth>;
    case ActivationKind::kReLU: return split_epoch_kernel<ActivationKind::kReLU, kUpdate, kDepth>;
    case ActivationKind::kTanh: return split_epoch_kernel<ActivationKind::kTanh, kUpdate, kDepth>;
    case ActivationKind::kSigmoid: return split_epoch_kernel<ActivationKind::kSigmoid, kUpdate, kDepth>;
    case ActivationKind::kGELU: return split_epoch_kernel<ActivationKind::kGELU, kUpdate, kDepth>;
    case ActivationKind::kSiLU: return split_epoch_kernel<ActivationKind::kSiLU, kUpdate, kDepth>;
  }
  return nullptr;
}

template <int kDepth>
SplitKernel kernel_for(const FlatOptimizerArgs& o, ActivationKind activation) {
  if (o.kind != FlatOptimizerKind::kSgd) return kernel_for<Update::kAdam, kDepth>(activation);
  const bool plain = o.state1 != nullptr && o.keep == 1.0f && !o.nesterov;
  return plain ? kernel_for<Update::kPlainSgd, kDepth>(activation) : kernel_for<Update::kSgd, kDepth>(activation);
}

// The kernel for a model of 1 to 3 hidden layers (nullptr: another depth).
SplitKernel kernel_for(const FusedEpochArgs& a) {
  switch (a.num_layers - 1) {
    case 1: return kernel_for<1>(a.optimizer, a.activation);
    case 2: return kernel_for<2>(a.optimizer, a.activation);
    case 3: return kernel_for<3>(a.optimizer, a.activation);
    default: return nullptr;
  }
}

// 98 blocks in clusters of 7, launched cooperatively (the grid barrier needs them co-resident).
cudaLaunchConfig_t launch_config(cudaStream_t stream, cudaLaunchAttribute (&attributes)[2]) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmemBytes;
  config.stream = stream;
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = kCluster;
  attributes[0].val.clusterDim.y = 1;
  attributes[0].val.clusterDim.z = 1;
  attributes[1].id = cudaLaunchAttributeCooperative;
  attributes[1].val.cooperative = 1;
  config.attrs = attributes;
  config.numAttrs = 2;
  return config;
}

const char* probe(int device) {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 9) {
    return "thread-block clusters and their bulk copies need compute capability 9.0 or newer";
  }
  const SplitKernel kernel = kernel_for<Update::kPlainSgd, kMaxHidden>(ActivationKind::kReLU);
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess || attributes.binaryVersion < 90) {
    cudaGetLastError();
    return "this build has no sm_90 code for the split kernel (CMAKE_CUDA_ARCHITECTURES)";
  }
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes) != cudaSuccess) {
    cudaGetLastError();
    return "this GPU does not give a block the split kernel's shared memory";
  }
  cudaLaunchAttribute launch_attributes[2];
  cudaLaunchConfig_t config = launch_config(nullptr, launch_attributes);
  config.numAttrs = 1;  // the occupancy query takes the cluster shape only
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess || clusters < kBlocks / kCluster) {
    cudaGetLastError();
    return "this GPU cannot hold 14 clusters of 7 blocks of the split kernel at once";
  }
  return nullptr;
}

}  // namespace

std::int64_t split_epoch_scratch_bytes() {
  return kScratchActivations * kActivationBytes + kLiveBiasBytes + 2 * kMomentumBytes;  // SGD uses one state
}

const char* split_epoch_unavailable(int device) {
  static std::mutex mutex;
  static std::map<int, const char*> answers;
  const std::lock_guard lock(mutex);
  const auto [at, fresh] = answers.try_emplace(device, nullptr);
  if (fresh) at->second = probe(device);
  return at->second;
}

cudaError_t launch_split_epoch(const FusedEpochArgs& a, void* scratch, cudaStream_t stream) {
  const NvtxRange range("split_epoch");
  const SplitKernel kernel = kernel_for(a);  // null for a depth other than 1-3
  const int depth = a.num_layers - 1;
  if (kernel == nullptr || !a.train || a.type != ElementType::kBF16 || a.batch < 1 || a.batch > kBatch ||
      a.steps > (1 << 30) || (a.optimizer.kind != FlatOptimizerKind::kSgd && a.optimizer.state2 == nullptr)) {
    return cudaErrorInvalidValue;  // fused_split_unsupported says why first
  }
  for (int l = 0; l <= depth; ++l) {
    const FusedLayer& layer = a.layers[l];
    if (layer.in != (l == 0 ? kIn : kWidth) || layer.out != (l == depth ? kClasses : kWidth) ||
        layer.bias != a.layers[0].bias) {
      return cudaErrorInvalidValue;
    }
  }
  SplitParams p{};
  p.images = a.images;
  p.labels = a.labels;
  p.order = a.order;
  p.samples = a.samples;
  p.steps = static_cast<int>(a.steps);
  p.batch = static_cast<int>(a.batch);
  p.scale = a.scale;
  p.shift = a.shift;
  auto* bytes = static_cast<std::uint8_t*>(scratch);
  const auto activation = [&](int i) { return reinterpret_cast<bf16*>(bytes + i * kActivationBytes); };
  p.x[0] = activation(0);
  p.x0_odd = activation(1);
  for (int l = 1; l <= kMaxHidden; ++l) {
    p.x[l] = activation(1 + l);
    p.d[l] = activation(1 + kMaxHidden + l);
  }
  p.b4_live = reinterpret_cast<float*>(bytes + kScratchActivations * kActivationBytes);
  const bool adam = a.optimizer.kind != FlatOptimizerKind::kSgd;
  auto* state_scratch = bytes + kScratchActivations * kActivationBytes + kLiveBiasBytes;
  p.mom_frag = a.optimizer.state1 != nullptr ? reinterpret_cast<float4*>(state_scratch) : nullptr;
  p.var_frag = adam ? reinterpret_cast<float4*>(state_scratch + kMomentumBytes) : nullptr;
  for (int l = 1; l <= depth + 1; ++l) {
    const FusedLayer& layer = a.layers[l - 1];
    p.w[l] = static_cast<bf16*>(a.copies[0]) + layer.weight_offset;
    p.w_other[l] = static_cast<bf16*>(a.copies[1]) + layer.weight_offset;
    p.master[l] = a.optimizer.master + layer.weight_offset;
    p.mom[l] = a.optimizer.state1 != nullptr ? a.optimizer.state1 + layer.weight_offset : nullptr;
    p.var[l] = a.optimizer.state2 != nullptr ? a.optimizer.state2 + layer.weight_offset : nullptr;
    p.ld[l] = layer.in_pad;
  }
  p.bias = a.layers[0].bias;
  p.opt = a.optimizer;
  p.mse = a.loss == FusedLoss::kMse ? 1 : 0;
  p.smoothing = a.smoothing;
  p.state = a.state;
  p.metrics = a.metrics;
  p.progress = a.progress;
  p.barrier = a.barrier;
  p.clock = a.stage_clock;
  p.clock_capacity = a.stage_clock_capacity;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (e != cudaSuccess) return e;
  cudaLaunchAttribute attributes[2];
  const cudaLaunchConfig_t config = launch_config(stream, attributes);
  return cudaLaunchKernelEx(&config, kernel, p);
}

}  // namespace sprintnet::cuda
