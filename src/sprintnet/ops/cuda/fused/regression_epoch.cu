// The fused engine's regression kernel (regression_epoch.h, docs/FUSED.md "v8"): a whole epoch of a
// model without hidden layers in one cluster of 8 blocks, no barrier across blocks inside a step.
//
//   inputs     block r owns k-tiles [t0, t0 + tiles) of the in_pad / 16 (the bias is weight column
//              `in`: its tile, the last, meets a constant 1 in the batch); its slice of every batch
//              (128 rows x its pixels) is gathered two steps ahead, a bulk copy a row (warps 8-15,
//              while warps 0-7 compute the loss), from the data set normalised to bf16 once
//              (args.normalised), into a ring of three batch buffers
//   forward    warp w < 8: rows 16w..16w+15 against the block's slice of W (bf16, shared memory): a
//              partial 16 x 16 tile of logits, stored from registers into block w, which owns those
//              rows (st.async)
//   loss       block q adds the 8 partials of its rows in block order, computes their softmax
//              cross-entropy (or MSE) (warp w < 8: rows w and w + 8), and each warp stores its rows'
//              gradient (bf16) into every block, their loss and hit into block 0 (st.async, 16 bytes
//              a store)
//   update     warp w < tiles: the weight gradient of the block's k-tile w (dl^T X: 16 classes x 16
//              pixels over the 128 rows), applied at once to the fp32 master and state its threads hold
//              in registers for the whole epoch; the new bf16 weights into the block's slice
//
// Each exchange completes on the receiver's mbarrier (its phase is the step's parity): no staging
// buffer, proxy fence or block barrier before a send (v8d; v8c sent by bulk copies); a buffer's
// next write depends on data its readers sent after reading it, so no copy lands in a buffer still
// being read (the argument is at each buffer below). Every sum has a fixed order: reruns are
// bit-identical.
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <cmath>

#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/fused/cluster_launch.h"
#include "sprintnet/ops/cuda/fused/grid_barrier.cuh"
#include "sprintnet/ops/cuda/fused/progress_record.cuh"
#include "sprintnet/ops/cuda/fused/ptx.cuh"
#include "sprintnet/ops/cuda/fused/regression_epoch.h"
#include "sprintnet/ops/cuda/fused/row_loss.cuh"
#include "sprintnet/ops/cuda/fused/stage_stamps.cuh"
#include "sprintnet/ops/cuda/fused/update_form.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

namespace cg = cooperative_groups;
using bf16 = __nv_bfloat16;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kCtas = kRegressionCtas;
constexpr int kRows = kRegressionRows;
constexpr int kOwned = kRows / kCtas;  // rows a block owns: one 16-row tile
static_assert(kOwned == 16 && kWarps == 2 * kCtas, "warp w < 8 computes the partial logits of block w's rows, warps 8-15 gather");
constexpr int kTileSum = kOwned * kRegressionMaxClasses;  // a 16 x 16 tile of fp32 partial logits
// At most 1040 / 16 = 65 k-tiles (1024 inputs and the bias), 8 or 9 a block: a warp each in the update.
constexpr int kMaxTiles = ((kRegressionMaxInputs + 16) / 16 + kCtas - 1) / kCtas;
static_assert(kMaxTiles <= kWarps, "the update takes a k-tile a warp");
constexpr int kLd = kMaxTiles * 16 + 8;  // bf16 row stride of X and W: 304 bytes, an odd multiple of 16 (no
                                         // ldmatrix bank conflicts)
constexpr int kBuffers = 3;  // batch buffers: step s reads s % 3 while s + 1's and s + 2's land

// What a row's owner sends: the gradient of each of its 16 rows' logits to every block, and their loss
// and hit to block 0 (the metrics'). 48 bytes a row: the update's ldmatrix reads 8 rows at once, 16 bytes each, and rows 48 bytes
// apart fall in 8 distinct 4-bank groups (32 bytes apart would put two rows on the same banks).
struct RowRecord {
  double loss;
  int hit;
  int unused;
};
struct alignas(16) RowMessage {
  bf16 dl[kRegressionMaxClasses];
  RowRecord record;
};
// Warp w < 8 of the owner computes rows w and w + 8 and stores them itself (no barrier among the loss
// warps).
struct Message {
  RowMessage rows[kOwned];
};

// The shared-memory layout (byte offsets, each a multiple of 16).
struct Layout {
  static constexpr int kX = 0;  // bf16 [3][128][kLd]: the batch of step s in buffer s % 3
  static constexpr int kXBytes = kRows * kLd * 2;
  static constexpr int kW = kX + kBuffers * kXBytes;  // bf16 [16][kLd]: this block's slice of the weights
  static constexpr int kLabels = kW + kRegressionMaxClasses * kLd * 2;  // int [3][16]: owned rows' labels
  static constexpr int kRecv = kLabels + kBuffers * kOwned * 4;  // float [8][16 x 16]: partials by source
  static constexpr int kMessages = kRecv + kCtas * kTileSum * 4;  // Message [2][8]: by step parity, by owner
  // 5 mbarriers: the partials', the gradient rows', and each batch buffer's
  static constexpr int kBars = kMessages + 2 * kCtas * static_cast<int>(sizeof(Message));
  static constexpr int kBytes = kBars + 48;
};
static_assert(sizeof(RowMessage) == 48 && sizeof(RowRecord) == 16 && Layout::kMessages % 16 == 0,
              "rows travel as 16-byte stores, the record last");

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define SPRINTNET_HAS_CLUSTERS 1
#endif

#ifdef SPRINTNET_HAS_CLUSTERS

// kUpdate: the optimizer's form (update_form.cuh); Adam and AdamW keep a second state in registers.
template <UpdateForm kUpdate>
struct Regression {
  static constexpr bool kAdam = kUpdate == UpdateForm::kAdam;
  const FusedEpochArgs& a;
  const FusedLayer& layer;
  unsigned char* smem;
  cg::cluster_group cluster;
  int rank, warp, lane, g, t;
  int tile0, tiles;   // this block's k-tiles
  int pixel_tiles;    // in / 16: the data's tiles; the one after them (with a bias) is the constant 1
  int classes;
  StepState state;
  std::int64_t first_step = 0;
  StageStamps stamps;  // the kernel lab's per-stage profile
  double loss_total = 0.0;  // block 0's last warp: the epoch's sums
  std::int64_t hits_total = 0;
  // This thread's parameters (warp w < tiles: the block's k-tile w): the weight-gradient fragments of
  // jobs 2w and 2w + 1 (job j: the 8 pixels 8j..8j+7 of the block's slice), 4 elements each (mma's C
  // layout: classes g and g + 8, pixels 2t and 2t + 1).
  float p[2][4], m[2][4], v[2][4];
  unsigned valid_params = 0;  // bit 4 which + j: param_valid(which, j)

  __device__ Regression(const FusedEpochArgs& args, unsigned char* shared)
      : a(args),
        layer(args.layers[0]),
        smem(shared),
        cluster(cg::this_cluster()),
        stamps(args.stage_clock, args.stage_clock_capacity, cluster.block_rank() == 0 && threadIdx.x == 0) {
    rank = static_cast<int>(cluster.block_rank());
    warp = static_cast<int>(threadIdx.x) / 32;
    lane = static_cast<int>(threadIdx.x) & 31;
    g = lane >> 2;
    t = lane & 3;
    const int all_tiles = layer.in_pad / 16;
    tile0 = all_tiles * rank / kCtas;
    tiles = all_tiles * (rank + 1) / kCtas - tile0;
    pixel_tiles = layer.in / 16;
    classes = layer.out;
  }

  template <typename T>
  __device__ T* at(int offset) const {
    return reinterpret_cast<T*>(smem + offset);
  }
  // The batch buffer of step s (an epoch's steps fit an int).
  __device__ static int buffer(std::int64_t s) { return static_cast<int>(s) % kBuffers; }
  __device__ bf16* x(std::int64_t s) const { return at<bf16>(Layout::kX) + buffer(s) * (kRows * kLd); }
  __device__ bf16* w() const { return at<bf16>(Layout::kW); }
  __device__ int* labels(std::int64_t s) const { return at<int>(Layout::kLabels) + buffer(s) * kOwned; }
  __device__ float* recv_tile(int from) const { return at<float>(Layout::kRecv) + from * kTileSum; }
  __device__ Message* message(std::int64_t step, int owner) const {
    return at<Message>(Layout::kMessages) + (step & 1) * kCtas + owner;
  }
  __device__ std::uint32_t bar(int i) const { return ptx::shared_address(at<std::uint64_t>(Layout::kBars) + i); }
  __device__ std::uint32_t partials_bar() const { return bar(0); }
  __device__ std::uint32_t gradients_bar() const { return bar(1); }
  __device__ std::uint32_t batch_bar(std::int64_t s) const { return bar(2 + buffer(s)); }
  __device__ static std::uint32_t batch_parity(std::int64_t s) { return static_cast<std::uint32_t>(s / kBuffers) & 1; }

  __device__ std::int64_t rows_of(std::int64_t s) const {
    const std::int64_t left = a.samples - s * a.batch;
    return left < a.batch ? left : a.batch;
  }
  // The sample behind `row` of step `s`, or -1 past the epoch or the step's rows.
  __device__ int sample_or_none(std::int64_t s, int row) const {
    if (s >= a.steps || row >= rows_of(s)) return -1;
    const std::int64_t i = s * a.batch + row;
    return a.order != nullptr ? a.order[i] : static_cast<int>(i);
  }

  __device__ void stamp() { stamps.stamp(); }

  // ---- the parameters: element j of job `which`'s fragment (its job: 2 warp + which).
  __device__ int job(int which) const { return 2 * warp + which; }
  __device__ int param_class(int j) const { return g + 8 * (j >> 1); }
  __device__ int param_column(int which, int j) const { return 8 * job(which) + 2 * t + (j & 1); }  // in the slice
  __device__ bool param_valid(int which, int j) const {
    const int column = 16 * tile0 + param_column(which, j);
    return job(which) < 2 * tiles && param_class(j) < classes && column < layer.in + layer.bias;
  }
  __device__ std::int64_t param_index(int which, int j) const {
    return layer.weight_offset + static_cast<std::int64_t>(param_class(j)) * layer.in_pad + 16 * tile0 +
           param_column(which, j);
  }

  __device__ void load_parameters() {
    const FlatOptimizerArgs& o = a.optimizer;
    const bf16* copy = static_cast<const bf16*>(a.copies[state.step & 1]);
    for (int i = static_cast<int>(threadIdx.x); i < classes * tiles * 16; i += kThreads) {
      const int cls = i / (tiles * 16), k = i % (tiles * 16);
      w()[cls * kLd + k] = copy[layer.weight_offset + static_cast<std::int64_t>(cls) * layer.in_pad + 16 * tile0 + k];
    }
#pragma unroll
    for (int which = 0; which < 2; ++which) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const bool valid = param_valid(which, j);
        valid_params |= (valid ? 1u : 0u) << (4 * which + j);
        const std::int64_t index = param_index(which, j);
        p[which][j] = valid ? o.master[index] : 0.0f;
        m[which][j] = valid && o.state1 != nullptr ? o.state1[index] : 0.0f;
        v[which][j] = kAdam && valid ? o.state2[index] : 0.0f;
      }
    }
  }
  __device__ void store_parameters() const {
    const FlatOptimizerArgs& o = a.optimizer;
    bf16* copy = static_cast<bf16*>(a.copies[state.step & 1]);
    for (int i = static_cast<int>(threadIdx.x); i < classes * tiles * 16; i += kThreads) {
      const int cls = i / (tiles * 16), k = i % (tiles * 16);
      copy[layer.weight_offset + static_cast<std::int64_t>(cls) * layer.in_pad + 16 * tile0 + k] = w()[cls * kLd + k];
    }
#pragma unroll
    for (int which = 0; which < 2; ++which) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (!param_valid(which, j)) continue;
        const std::int64_t index = param_index(which, j);
        o.master[index] = p[which][j];
        if (o.state1 != nullptr) o.state1[index] = m[which][j];
        if constexpr (kAdam) o.state2[index] = v[which][j];
      }
    }
  }

  // ---- the batch, from the data set normalised to bf16 once (args.normalised, [samples][in]): lane
  // l < 16 of warp 8 + w copies row 16w + l of step s (its sample; -1: none), the block's pixels of it
  // in one bulk copy onto the buffer's mbarrier (the copy engine's work, not the load/store unit's:
  // v8c's cp.async of 16 bytes a lane held up the loss warps beside them); the owned rows' labels by
  // cp.async. Warps 8-15 call it while warps 0-7 compute the loss.
  static constexpr int kRowsAWarp = kRows / (kWarps / 2);
  __device__ int gathered_row() const { return kRowsAWarp * (warp - kWarps / 2) + (lane < kRowsAWarp ? lane : 0); }
  __device__ void gather(std::int64_t s, int sample) const {
    const int warp = this->warp - kWarps / 2;
    const int bytes = 32 * max(0, min(tiles, pixel_tiles - tile0));  // the block's pixels of a row
    if (warp == 0 && lane == 0) {  // the buffer's arrival for this use (nothing to wait for past the epoch)
      const std::int64_t n = s < a.steps ? rows_of(s) : 0;
      ptx::mbarrier_expect_bytes(batch_bar(s), static_cast<std::uint32_t>(n * bytes));
    }
    const int row = kRowsAWarp * warp + lane;
    if (lane < kRowsAWarp && sample >= 0 && bytes > 0) {
      const bf16* from = static_cast<const bf16*>(a.normalised) + static_cast<std::int64_t>(sample) * layer.in + 16 * tile0;
      ptx::bulk_copy_from_global(ptx::shared_address(x(s) + row * kLd), from, bytes, batch_bar(s));
    }
    const int owned = row - kOwned * rank;
    if (lane < kRowsAWarp && sample >= 0 && owned >= 0 && owned < kOwned) {
      ptx::copy_async_4(labels(s) + owned, a.labels + sample);
    }
    ptx::copy_async_commit();
  }
  // A partial batch (the epoch's last): its rows past the end zeros, bias column and labels included
  // (no copy wrote them: they hold an older step's). Published by the next barrier.
  __device__ void clear_rows_past_end(std::int64_t s) const {
    const std::int64_t n = rows_of(s);
    if (n >= kRows) return;
    for (int i = static_cast<int>(threadIdx.x); i < kRows * tiles * 2; i += kThreads) {
      const int row = i / (tiles * 2), k = i % (tiles * 2);
      if (row >= n) *reinterpret_cast<uint4*>(x(s) + row * kLd + 8 * k) = make_uint4(0, 0, 0, 0);
    }
    if (threadIdx.x < kOwned && kOwned * rank + static_cast<int>(threadIdx.x) >= n) labels(s)[threadIdx.x] = 0;
  }
  // Every row of every batch buffer starts with the bias column's 1 (no copy writes it).
  __device__ void set_bias_column() const {
    if (!layer.bias || pixel_tiles < tile0 || pixel_tiles >= tile0 + tiles) return;
    for (int i = static_cast<int>(threadIdx.x); i < kBuffers * kRows; i += kThreads) {
      x(i / kRows)[(i % kRows) * kLd + 16 * (pixel_tiles - tile0)] = __float2bfloat16_rn(1.0f);
    }
  }

  // ---- the forward: warp w < 8, the partial logits of rows 16w..16w+15 over the block's k-tiles (classes
  // 0-7 and 8-15, even and odd k-steps: four chains; each row of X and W read once a warp), stored
  // into block w's recv_tile(rank) from the registers (its own rows: generic stores, published by the
  // receive's barrier).
  __device__ void forward(std::int64_t s) const {
    if (warp >= kCtas) return;
    ptx::mbarrier_wait(batch_bar(s), batch_parity(s));  // the batch's rows landed
    float acc[2][4] = {}, odd[2][4] = {};
    const bf16* xa = x(s) + (kOwned * warp + (lane & 15)) * kLd + (lane >> 4) * 8;
    const bf16* wb = w() + ((lane & 7) + (lane >> 4) * 8) * kLd + ((lane >> 3) & 1) * 8;
    int ks = 0;
    for (; ks + 1 < tiles; ks += 2) {
      std::uint32_t fa[4], fb[4], fa1[4], fb1[4];
      ptx::ldmatrix_x4(fa, ptx::shared_address(xa + ks * 16));
      ptx::ldmatrix_x4(fb, ptx::shared_address(wb + ks * 16));
      ptx::ldmatrix_x4(fa1, ptx::shared_address(xa + ks * 16 + 16));
      ptx::ldmatrix_x4(fb1, ptx::shared_address(wb + ks * 16 + 16));
      ptx::mma_bf16(acc[0], fa, {fb[0], fb[1]});
      ptx::mma_bf16(acc[1], fa, {fb[2], fb[3]});
      ptx::mma_bf16(odd[0], fa1, {fb1[0], fb1[1]});
      ptx::mma_bf16(odd[1], fa1, {fb1[2], fb1[3]});
    }
    if (ks < tiles) {
      std::uint32_t fa[4], fb[4];
      ptx::ldmatrix_x4(fa, ptx::shared_address(xa + ks * 16));
      ptx::ldmatrix_x4(fb, ptx::shared_address(wb + ks * 16));
      ptx::mma_bf16(acc[0], fa, {fb[0], fb[1]});
      ptx::mma_bf16(acc[1], fa, {fb[2], fb[3]});
    }
    float* tile = recv_tile(rank);
    const bool mine = warp == rank;
    const std::uint32_t to = ptx::in_block(ptx::shared_address(tile), warp);
    const std::uint32_t bar = ptx::in_block(partials_bar(), warp);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float2 top = make_float2(acc[half][0] + odd[half][0], acc[half][1] + odd[half][1]);
      const float2 bottom = make_float2(acc[half][2] + odd[half][2], acc[half][3] + odd[half][3]);
      const int at_top = g * 16 + 8 * half + 2 * t, at_bottom = at_top + 8 * 16;
      if (mine) {
        *reinterpret_cast<float2*>(tile + at_top) = top;
        *reinterpret_cast<float2*>(tile + at_bottom) = bottom;
      } else {
        ptx::store_to_block(to + 4 * at_top, top, bar);
        ptx::store_to_block(to + 4 * at_bottom, bottom, bar);
      }
    }
  }

  // Waits for the step's exchange on `bar` (`bytes` from the 7 other blocks), then the block's own
  // boundary. recv_tile's next stores come after the senders got this block's gradient rows, sent after
  // the loss read these; the messages alternate by parity (block 0 reads step s's records during step
  // s + 1, before it sends the step s + 2 partials that the next write into the same slot needs). A
  // sender's bytes of step s + 1 come after this phase completed: the partials' need this block's
  // gradient rows of step s, the gradient rows' its partials of step s + 1.
  __device__ static void receive(std::uint32_t bar, std::uint32_t bytes, std::int64_t s) {
    if (threadIdx.x == 0) ptx::mbarrier_expect_bytes(bar, bytes);
    ptx::mbarrier_wait_cluster(bar, static_cast<std::uint32_t>(s & 1));
    __syncthreads();
  }

  // ---- the loss of the block's 16 rows (warps 0-7 call it: rows w and w + 8, a half-warp each, a
  // class a lane), the warp's two rows into every block: 16-byte stores, lane i the 16 bytes i % 6 of the
  // rows' 96 to the (i / 6)-th other block, the records (the last 16 bytes of a row) to block 0 alone.
  __device__ void loss(std::int64_t s) const {
    Message* mine = message(s, rank);
    {
      const std::int64_t n = rows_of(s);
      const bool mse = a.loss == FusedLoss::kMse;
      const float grad_scale = mse ? 2.0f / static_cast<float>(n * classes) : 1.0f / static_cast<float>(n);
      const int row = warp + (kOwned / 2) * (lane / kRegressionMaxClasses), cls = lane % kRegressionMaxClasses;
      const bool valid = kOwned * rank + row < n;
      float z[2] = {-INFINITY, -INFINITY};
      if (cls < classes) {
        float sum = 0.0f;
#pragma unroll
        for (int from = 0; from < kCtas; ++from) sum += recv_tile(from)[row * 16 + cls];
        z[0] = sum;
      }
      const int label = labels(s)[row];
      const auto r =
          fused::row_loss<fused::SpreadRow<kRegressionMaxClasses>>(z, classes, label, mse, a.smoothing, grad_scale);
      RowMessage& out = mine->rows[row];
      out.dl[cls] = __float2bfloat16_rn(valid && cls < classes ? r.grad[0] : 0.0f);
      if (cls == 0) out.record = RowRecord{valid ? r.loss : 0.0, valid && r.best_index == label ? 1 : 0, 0};
    }
    __syncwarp();
    constexpr int kChunks = sizeof(RowMessage) / 16;  // a row's 16-byte pieces
    for (int i = lane; i < (kCtas - 1) * 2 * kChunks; i += kWarpSize) {
      const int other = i / (2 * kChunks), to = other >= rank ? other + 1 : other, chunk = i % (2 * kChunks);
      if (to != 0 && chunk % kChunks == kChunks - 1) continue;  // the record: block 0 alone adds the metrics
      const uint4* piece = reinterpret_cast<const uint4*>(&mine->rows[warp + (kOwned / 2) * (chunk / kChunks)]) +
                           chunk % kChunks;
      ptx::store_to_block(ptx::in_block(ptx::shared_address(piece), to), *piece, ptx::in_block(gradients_bar(), to));
    }
  }

  // ---- the weight gradient of the warp's k-tile (16 classes x 16 pixels over the step's 128 rows:
  // classes x rows of dl times rows x pixels of X, even and odd k-steps for each 8 pixels: four chains
  // of 4 mma's), applied at once. Each warp reads dl whole: the fewer warps, the less shared-memory
  // traffic (the update was bound by it with a warp for every 8 pixels).
  __device__ void update(std::int64_t s, const BlockScalars& scalars) {
    if (warp >= tiles) return;
    const Message* rows = message(s, 0);
    const bf16* xs = x(s);
    float acc[2][4] = {}, odd[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < kRows / 16; ++ks) {
      // A(class, row) = dl[row][class], transposed by ldmatrix; B(row, pixel) = X[row][pixel].
      const int a_row = (lane & 7) + (lane >> 4) * 8;
      std::uint32_t fa[4], fb[4];
      ptx::ldmatrix_x4_trans(fa, ptx::shared_address(rows[ks].rows[a_row].dl + ((lane >> 3) & 1) * 8));
      const int b_row = 16 * ks + (lane & 7) + ((lane >> 3) & 1) * 8;
      ptx::ldmatrix_x4_trans(fb, ptx::shared_address(xs + b_row * kLd + 16 * warp + (lane >> 4) * 8));
      ptx::mma_bf16(ks % 2 == 0 ? acc[0] : odd[0], fa, {fb[0], fb[1]});
      ptx::mma_bf16(ks % 2 == 0 ? acc[1] : odd[1], fa, {fb[2], fb[3]});
    }
#pragma unroll
    for (int which = 0; which < 2; ++which) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        // Computed for every element and kept where valid (a select, not a branch a parameter).
        const float grad = acc[which][j] + odd[which][j];
        float p_new = p[which][j], m_new = m[which][j], v_new = v[which][j];
        fused_step<kUpdate>(a.optimizer, scalars, p_new, m_new, v_new, grad, a.optimizer.state1 != nullptr);
        const bool valid = (valid_params >> (4 * which + j)) & 1;
        p[which][j] = valid ? p_new : p[which][j];
        m[which][j] = valid ? m_new : m[which][j];
        if constexpr (kAdam) v[which][j] = valid ? v_new : v[which][j];
      }
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        *reinterpret_cast<__nv_bfloat162*>(w() + param_class(j) * kLd + param_column(which, j)) =
            __floats2bfloat162_rn(p[which][j], p[which][j + 1]);
      }
    }
  }

  // Block 0's last warp: step s's mean loss and hits added to the epoch's sums (rows in order,
  // as the cluster kernel), and the progress record.
  __device__ void add_metrics(std::int64_t s) {
    if (rank != 0 || warp != kWarps - 1) return;
    double loss = 0.0, hits = 0.0;
    for (int r = lane; r < kRows; r += 32) {
      const RowRecord& record = message(s, r / kOwned)->rows[r % kOwned].record;
      loss += record.loss;
      hits += record.hit;
    }
    loss = fused::group_sum<kWarpSize>(loss);
    hits = fused::group_sum<kWarpSize>(hits);
    if (lane == 0) {
      const std::int64_t n = rows_of(s);
      const double weight = 1.0 / static_cast<double>(a.loss == FusedLoss::kMse ? n * classes : n);
      loss_total += weight * loss;
      hits_total += static_cast<std::int64_t>(hits);
      fused::write_progress(a.progress, s + 1, loss_total);
    }
  }

  __device__ void train() {
    state = *a.state;
    first_step = state.step;
    stamp();
    // Everything but the mbarriers, which their init sets (a zero store racing thread 0's init is a
    // plain store to a live mbarrier).
    for (int i = static_cast<int>(threadIdx.x); i < Layout::kBars / 16; i += kThreads) {
      reinterpret_cast<uint4*>(smem)[i] = make_uint4(0, 0, 0, 0);
    }
    ptx::fence_proxy_async();  // the zeros before the bulk copies that overwrite them
    if (threadIdx.x == 0) {
      ptx::mbarrier_init(partials_bar());
      ptx::mbarrier_init(gradients_bar());
      for (int b = 0; b < kBuffers; ++b) ptx::mbarrier_init(batch_bar(b));
      ptx::fence_mbarrier_init();
    }
    __syncthreads();
    set_bias_column();
    load_parameters();
    // Warps 8-15 gather: lane l < 16 of warp 8 + w holds row 16w + l's sample of the step gathered
    // next (loaded a step before).
    const bool gathers = warp >= kWarps / 2;
    const int row = gathered_row();
    int next_sample = -1;
    if (gathers) {
      gather(0, sample_or_none(0, row));
      gather(1, sample_or_none(1, row));
      next_sample = sample_or_none(2, row);
      ptx::copy_async_wait_group<1>();  // every group but the newest
    }
    clear_rows_past_end(0);
    const FlatOptimizerArgs& o = a.optimizer;
    RunningScalars<kUpdate> running(o, state.opt_steps);
    double lr = step_lr(o, state.step);
    cluster.sync();  // the mbarriers and every block's buffers are ready for the others' copies
    stamp();
    for (std::int64_t s = 0; s < a.steps; ++s) {
      const double lr_now = lr;
      lr = step_lr(o, state.step + 1);  // used next step: its load is not waited for here
      forward(s);
      // While the partials travel: step s + 1's labels landed (this thread's cp.async, issued last step;
      // the barrier in receive publishes them; the rows are waited for on their buffer's mbarrier in
      // the forward), a partial batch's rows past its end cleared.
      if (gathers) ptx::copy_async_wait_group<0>();
      if (s + 1 < a.steps) clear_rows_past_end(s + 1);
      stamp();
      receive(partials_bar(), (kCtas - 1) * kTileSum * 4, s);
      stamp();
      // Warps 0-7: the loss; meanwhile warps 8-15 gather step s + 2's batch into the buffer step s - 1
      // left (not before the forward, where the copies' issue held up the step's critical path:
      // docs/FUSED.md), and block 0's last warp adds the metrics of step s - 1. Then everyone: the
      // update's scalars (Adam's in double) while the gradient rows travel.
      if (gathers) {
        gather(s + 2, next_sample);
        next_sample = sample_or_none(s + 3, row);
        if (s > 0) add_metrics(s - 1);
      } else {
        loss(s);
      }
      const BlockScalars scalars = running.next(o, lr_now, state.opt_steps);
      receive(gradients_bar(), (kCtas - 1) * (rank == 0 ? sizeof(Message) : kOwned * sizeof(RowMessage::dl)), s);
      stamp();
      update(s, scalars);
      advance_step_state(state, false, false, nullptr);
      __syncthreads();  // the new weights before the next forward reads them
      stamp();
    }
    if (a.steps > 0) add_metrics(a.steps - 1);
    ptx::copy_async_wait_group<0>();
    cluster.sync();  // no block leaves while another may still read its shared memory
    store_parameters();
    if (rank == 0 && threadIdx.x == 0) {
      state.found_inf = 0;
      state.blocks_done = 0;
      *a.state = state;
    }
    if (rank == 0 && warp == kWarps - 1 && lane == 0) {
      a.metrics->loss_sum += loss_total;
      a.metrics->correct += hits_total;
    }
  }
};

#endif  // SPRINTNET_HAS_CLUSTERS

template <UpdateForm kUpdate>
__global__ void __launch_bounds__(kThreads, 1) regression_epoch_kernel(const __grid_constant__ FusedEpochArgs args) {
#ifdef SPRINTNET_HAS_CLUSTERS
  extern __shared__ __align__(128) unsigned char smem[];
  Regression<kUpdate> k(args, smem);
  k.train();
#else
  __trap();
#endif
}

using RegressionKernel = void (*)(FusedEpochArgs);

RegressionKernel kernel_for(const FusedEpochArgs& args) {
  return for_update_form(args.optimizer,
                         [](auto form) -> RegressionKernel { return regression_epoch_kernel<decltype(form)::value>; });
}

constexpr ClusterShape kShape{kCtas, kThreads, Layout::kBytes};

const ClusterProbe& regression_probe(int device) {
  return probe_cluster_kernel(device, regression_epoch_kernel<UpdateForm::kAdam>, kShape, "the regression kernel");
}

}  // namespace

const char* regression_epoch_unavailable(int device) { return regression_probe(device).why_not; }

int regression_epoch_active_clusters(int device) {
  return active_clusters(regression_probe(device));
}

cudaError_t launch_regression_epoch(const FusedEpochArgs& args, cudaStream_t stream) {
  const NvtxRange range("regression_epoch");
  // The kernel's shapes are fixed (regression_epoch.h); fused_fit.h keeps other models away, and a
  // caller that did not would read and write past its buffers.
  const FusedLayer& layer = args.layers[0];
  if (!args.train || args.type != ElementType::kBF16 || args.num_layers != 1 || args.batch < 1 ||
      args.batch > kRegressionRows || layer.in < 1 || layer.in > kRegressionMaxInputs || layer.out < 1 ||
      layer.out > kRegressionMaxClasses || args.normalised == nullptr) {
    return cudaErrorInvalidValue;
  }
  return launch_cluster_kernel(kernel_for(args), kShape, stream, args);
}

}  // namespace sprintnet::cuda
