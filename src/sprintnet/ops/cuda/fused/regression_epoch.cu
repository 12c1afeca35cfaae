// The fused engine's regression kernel (regression_epoch.h, docs/FUSED.md "v8"): a whole epoch of a
// model without hidden layers in one cluster of 8 blocks, no barrier across blocks inside a step.
//
//   inputs     block r owns k-tiles [t0, t0 + tiles) of the in_pad / 16 (the bias is weight column
//              `in`: its tile, the last, meets a constant 1 in the batch); its slice of every batch
//              (128 rows x its pixels) is gathered two steps ahead by cp.async (warps 8-15, while
//              warps 0-7 compute the loss), from the data set normalised to bf16 once
//              (args.normalised), into a ring of three batch buffers
//   forward    warps w and w + 8: rows 16w..16w+15 (classes 0-7 and 8-15) against the block's slice
//              of W (bf16, shared memory): a partial 16 x 16 tile of logits, copied (one bulk copy)
//              to block w, which owns those rows
//   loss       block q adds the 8 partials of its rows in block order, computes their softmax
//              cross-entropy (or MSE) (warp w < 8: rows w and w + 8), and each warp copies its rows'
//              gradient (bf16) with their loss and hit to every block (a bulk copy each)
//   update     warp w: the weight gradient of 8 pixels of a k-tile (dl^T X: 16 classes x 8
//              pixels over the 128 rows), applied at once to the fp32 master and state its threads hold
//              in registers for the whole epoch; the new bf16 weights into the block's slice
//
// Each exchange completes on the receiver's mbarrier (its phase is the step's parity); a buffer's
// next write depends on data its readers sent after reading it, so no copy lands in a buffer still
// being read (the argument is at each buffer below). Every sum has a fixed order: reruns are
// bit-identical.
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <cmath>
#include <map>
#include <mutex>

#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/fused/grid_barrier.cuh"
#include "sprintnet/ops/cuda/fused/progress_record.cuh"
#include "sprintnet/ops/cuda/fused/ptx.cuh"
#include "sprintnet/ops/cuda/fused/regression_epoch.h"
#include "sprintnet/ops/cuda/fused/row_loss.cuh"
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
static_assert(kOwned == 16 && kWarps == 2 * kCtas, "warps w and w + 8 compute the partial logits of block w's rows");
constexpr int kTileSum = kOwned * kRegressionMaxClasses;  // a 16 x 16 tile of fp32 partial logits
// At most 1040 / 16 = 65 k-tiles (1024 inputs and the bias), 8 or 9 a block.
constexpr int kMaxTiles = ((kRegressionMaxInputs + 16) / 16 + kCtas - 1) / kCtas;
constexpr int kLd = kMaxTiles * 16 + 8;  // bf16 row stride of X and W: 304 bytes, an odd multiple of 16 (no
                                         // ldmatrix bank conflicts)
constexpr int kBuffers = 3;  // batch buffers: step s reads s % 3 while s + 1's and s + 2's land

// What a row's owner sends every block: the gradient of its 16 rows' logits, and their loss and hit.
struct RowRecord {
  double loss;
  int hit;
  int unused;
};
// Warp w < 8 of the owner computes rows w and w + 8 and sends its piece itself (no barrier among the
// loss warps): a message is 8 such pieces.
struct alignas(16) Piece {
  bf16 dl[2][kRegressionMaxClasses];
  RowRecord rows[2];
};
struct Message {
  Piece pieces[kOwned / 2];
};

// The shared-memory layout (byte offsets, each a multiple of 16).
struct Layout {
  static constexpr int kX = 0;  // bf16 [3][128][kLd]: the batch of step s in buffer s % 3
  static constexpr int kXBytes = kRows * kLd * 2;
  static constexpr int kW = kX + kBuffers * kXBytes;  // bf16 [16][kLd]: this block's slice of the weights
  static constexpr int kLabels = kW + kRegressionMaxClasses * kLd * 2;  // int [3][16]: owned rows' labels
  static constexpr int kSend = kLabels + kBuffers * kOwned * 4;       // float [8][16 x 16]: partials by destination
  static constexpr int kRecv = kSend + kCtas * kTileSum * 4;           // float [8][16 x 16]: partials by source
  static constexpr int kMessages = kRecv + kCtas * kTileSum * 4;  // Message [2][8]: by step parity, by owner
  // 2 mbarriers: the partials' and the gradient rows'
  static constexpr int kBars = kMessages + 2 * kCtas * static_cast<int>(sizeof(Message));
  static constexpr int kBytes = kBars + 16;
};
static_assert(sizeof(Piece) % 16 == 0 && Layout::kMessages % 16 == 0, "bulk copies move 16-byte pieces");

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define SPRINTNET_HAS_CLUSTERS 1
#endif

#ifdef SPRINTNET_HAS_CLUSTERS

// Row r (of the owner's 16) in a message: its gradient and its record.
__device__ __forceinline__ const bf16* dl_row(const Message& m, int r) { return m.pieces[r % 8].dl[r / 8]; }
__device__ __forceinline__ const RowRecord& row_record(const Message& m, int r) { return m.pieces[r % 8].rows[r / 8]; }

__device__ __forceinline__ void cp_async_16(void* shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(ptx::shared_address(shared)), "l"(global) : "memory");
}
__device__ __forceinline__ void cp_async_4(void* shared, const void* global) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(ptx::shared_address(shared)), "l"(global) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Every group but the newest has landed (this thread's copies), or every group.
__device__ __forceinline__ void cp_async_wait_older() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// kAdam: Adam or AdamW (a second state in registers); otherwise SGD.
template <bool kAdam>
struct Regression {
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
  int stamps = 0;
  double loss_total = 0.0;  // block 0's last warp: the epoch's sums
  std::int64_t hits_total = 0;
  // This thread's parameters: the weight-gradient fragments of jobs warp and warp + 16 (job j: the
  // 8 pixels 8j..8j+7 of the block's slice), 4 elements each (mma's C layout: classes g and g + 8,
  // pixels 2t and 2t + 1).
  float p[2][4], m[2][4], v[2][4];

  __device__ Regression(const FusedEpochArgs& args, unsigned char* shared)
      : a(args), layer(args.layers[0]), smem(shared), cluster(cg::this_cluster()) {
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
  __device__ float* send_tile(int to) const { return at<float>(Layout::kSend) + to * kTileSum; }
  __device__ float* recv_tile(int from) const { return at<float>(Layout::kRecv) + from * kTileSum; }
  __device__ Message* message(std::int64_t step, int owner) const {
    return at<Message>(Layout::kMessages) + (step & 1) * kCtas + owner;
  }
  __device__ std::uint32_t bar(int i) const { return ptx::shared_address(at<std::uint64_t>(Layout::kBars) + i); }
  __device__ std::uint32_t partials_bar() const { return bar(0); }
  __device__ std::uint32_t gradients_bar() const { return bar(1); }

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

  __device__ void stamp() {
    if (a.stage_clock != nullptr && rank == 0 && threadIdx.x == 0 && stamps < a.stage_clock_capacity) {
      a.stage_clock[stamps] = global_nanoseconds();
    }
    ++stamps;
  }

  // ---- the parameters: element j of job `which`'s fragment (its job: warp + 16 which).
  __device__ int job(int which) const { return warp + kWarps * which; }
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

  // ---- the batch, from the data set normalised to bf16 once (args.normalised, [samples][in]): warp
  // 8 + w copies rows 16w..16w+15 of step s, the block's 16-byte pieces of them in order (a warp's
  // cp.async covers 2-3 rows' contiguous bytes: coalesced), lane l < 16 holding row 16w + l's sample
  // (-1: none); the owned rows' labels too. Warps 8-15 call it while warps 0-7 compute the loss.
  static constexpr int kRowsAWarp = kRows / (kWarps / 2);
  __device__ int gathered_row() const { return kRowsAWarp * (warp - kWarps / 2) + (lane < kRowsAWarp ? lane : 0); }
  __device__ void gather(std::int64_t s, int sample) const {
    const int warp = this->warp - kWarps / 2;
    const int pieces = 2 * max(0, min(tiles, pixel_tiles - tile0));  // 16-byte pieces a row
    const bf16* data = static_cast<const bf16*>(a.normalised) + 16 * tile0;
    for (int p = lane; p < (kRowsAWarp * pieces + 31) / 32 * 32; p += 32) {  // the same count in every lane
      const int r = min(p / max(pieces, 1), kRowsAWarp - 1), k = p - r * pieces;
      const int row_sample = __shfl_sync(kFullWarpMask, sample, r);
      if (p < kRowsAWarp * pieces && row_sample >= 0) {
        cp_async_16(x(s) + (kRowsAWarp * warp + r) * kLd + 8 * k,
                    data + static_cast<std::int64_t>(row_sample) * layer.in + 8 * k);
      }
    }
    const int owned = kRowsAWarp * warp + lane - kOwned * rank;
    if (lane < kRowsAWarp && sample >= 0 && owned >= 0 && owned < kOwned) cp_async_4(labels(s) + owned, a.labels + sample);
    cp_async_commit();
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

  // ---- the forward: warps w and w + 8 (classes 0-7, 8-15), the partial logits of rows 16w..16w+15 over
  // the block's k-tiles (even and odd k-steps: two chains), to block w (its own rows straight into
  // recv_tile(rank)). send_tile(w) is free again: its last copy landed in block w before block w sent
  // the gradient rows this block waited for last step.
  __device__ void forward(std::int64_t s) const {
    const int rows_tile = warp % kCtas, half = warp / kCtas;
    float acc[4] = {}, odd[4] = {};
    const bf16* xa = x(s) + (kOwned * rows_tile + (lane & 15)) * kLd + (lane >> 4) * 8;
    const bf16* wb = w() + (8 * half + (lane & 7)) * kLd + ((lane >> 3) & 1) * 8;
    int ks = 0;
    for (; ks + 1 < tiles; ks += 2) {
      std::uint32_t fa[4], fb[2], fa1[4], fb1[2];
      ptx::ldmatrix_x4(fa, ptx::shared_address(xa + ks * 16));
      ptx::ldmatrix_x2(fb, ptx::shared_address(wb + ks * 16));
      ptx::ldmatrix_x4(fa1, ptx::shared_address(xa + ks * 16 + 16));
      ptx::ldmatrix_x2(fb1, ptx::shared_address(wb + ks * 16 + 16));
      ptx::mma_bf16(acc, fa, fb);
      ptx::mma_bf16(odd, fa1, fb1);
    }
    if (ks < tiles) {
      std::uint32_t fa[4], fb[2];
      ptx::ldmatrix_x4(fa, ptx::shared_address(xa + ks * 16));
      ptx::ldmatrix_x2(fb, ptx::shared_address(wb + ks * 16));
      ptx::mma_bf16(acc, fa, fb);
    }
    float* tile = rows_tile == rank ? recv_tile(rank) : send_tile(rows_tile);
    *reinterpret_cast<float2*>(tile + g * 16 + 8 * half + 2 * t) = make_float2(acc[0] + odd[0], acc[1] + odd[1]);
    *reinterpret_cast<float2*>(tile + (g + 8) * 16 + 8 * half + 2 * t) = make_float2(acc[2] + odd[2], acc[3] + odd[3]);
    ptx::fence_proxy_async();  // this thread's stores, before the copy reads them
    __syncthreads();
    if (half == 0 && lane == 0 && rows_tile != rank) {  // lane 0 of warp w < 8: the copy to block w
      ptx::bulk_copy_to_block(ptx::in_block(ptx::shared_address(recv_tile(rank)), rows_tile),
                              ptx::shared_address(tile), kTileSum * 4, ptx::in_block(partials_bar(), rows_tile));
    }
  }

  // Waits for the step's exchange on `bar` (`bytes` from the 7 other blocks), then the block's own
  // boundary. recv_tile's next copies come after the senders got this block's gradient rows, sent after
  // the loss read these; the messages alternate by parity (block 0 reads a step's records one step
  // later, before it sends the partials every later message needs).
  __device__ static void receive(std::uint32_t bar, std::uint32_t bytes, std::int64_t s) {
    if (threadIdx.x == 0) ptx::mbarrier_expect_bytes(bar, bytes);
    ptx::mbarrier_wait(bar, static_cast<std::uint32_t>(s & 1));
    __syncthreads();
  }

  // ---- the loss of the block's 16 rows (warps 0-7 call it: rows w and w + 8, a half-warp each, a
  // class a lane), the warp's piece of the gradient rows to every block (lane k < 7: to one block).
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
      const fused::RowLoss r =
          fused::warp_row_loss<kRegressionMaxClasses>(z, classes, label, mse, a.smoothing, grad_scale);
      Piece& piece = mine->pieces[warp];
      piece.dl[lane / kRegressionMaxClasses][cls] = __float2bfloat16_rn(valid && cls < classes ? r.grad[0] : 0.0f);
      if (cls == 0) {
        piece.rows[lane / kRegressionMaxClasses] =
            RowRecord{valid ? r.loss : 0.0, valid && r.best_index == label ? 1 : 0, 0};
      }
      ptx::fence_proxy_async();
    }
    __syncwarp();
    if (lane < kCtas - 1) {
      const int to = lane >= rank ? lane + 1 : lane;
      const std::uint32_t from = ptx::shared_address(&mine->pieces[warp]);
      ptx::bulk_copy_to_block(ptx::in_block(from, to), from, sizeof(Piece), ptx::in_block(gradients_bar(), to));
    }
  }

  // ---- the weight gradient of the warp's jobs (8 pixels each) over the step's 128 rows, applied at once.
  __device__ void update(std::int64_t s, const BlockScalars& scalars) {
    const Message* rows = message(s, 0);
    const bf16* xs = x(s);
#pragma unroll
    for (int which = 0; which < 2; ++which) {
      if (job(which) >= 2 * tiles) continue;
      float acc[4] = {}, odd[4] = {};  // even and odd k-steps: two chains of 4 mma's
#pragma unroll
      for (int ks = 0; ks < kRows / 16; ++ks) {
        // A(class, row) = dl[row][class], transposed by ldmatrix; B(row, pixel) = X[row][pixel].
        const int a_row = 16 * ks + (lane & 7) + (lane >> 4) * 8;
        std::uint32_t fa[4], fb[2];
        ptx::ldmatrix_x4_trans(fa, ptx::shared_address(dl_row(rows[a_row / kOwned], a_row % kOwned) + ((lane >> 3) & 1) * 8));
        const int b_row = 16 * ks + (lane & 7) + ((lane >> 3) & 1) * 8;
        ptx::ldmatrix_x2_trans(fb, ptx::shared_address(xs + b_row * kLd + 8 * job(which)));
        ptx::mma_bf16(ks % 2 == 0 ? acc : odd, fa, fb);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (!param_valid(which, j)) continue;
        const float grad = acc[j] + odd[j];
        if constexpr (kAdam) {
          adam_update_fast(a.optimizer, scalars, p[which][j], grad, m[which][j], v[which][j]);
        } else {
          sgd_update_value(a.optimizer, scalars, p[which][j], grad, m[which][j], a.optimizer.state1 != nullptr);
        }
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
      const RowRecord& record = row_record(*message(s, r / kOwned), r % kOwned);
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
    for (int i = static_cast<int>(threadIdx.x); i < Layout::kBytes / 16; i += kThreads) {
      reinterpret_cast<uint4*>(smem)[i] = make_uint4(0, 0, 0, 0);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      ptx::mbarrier_init(partials_bar());
      ptx::mbarrier_init(gradients_bar());
      ptx::fence_mbarrier_init();
    }
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
      cp_async_wait_older();
    }
    clear_rows_past_end(0);
    // Adam's bias corrections as running products of beta^t (t: the update's count, from 1).
    const FlatOptimizerArgs& o = a.optimizer;
    double beta1_t = pow(o.beta1_d, static_cast<double>(state.opt_steps + 1));
    double beta2_t = pow(o.beta2_d, static_cast<double>(state.opt_steps + 1));
    double lr = step_lr(o, state.step);
    cluster.sync();  // the mbarriers and every block's buffers are ready for the others' copies
    stamp();
    for (std::int64_t s = 0; s < a.steps; ++s) {
      const double lr_now = lr;
      lr = step_lr(o, state.step + 1);  // used next step: its load is not waited for here
      forward(s);
      // While the partials travel: step s + 1's batch landed (this thread's copies, the only ones in
      // flight: issued last step; the barrier in receive publishes them), a partial batch's rows past
      // its end cleared.
      if (gathers) cp_async_wait_all();
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
      BlockScalars scalars{};
      if constexpr (kAdam) {
        scalars = update_scalars(o, lr_now, beta1_t, beta2_t, state.opt_steps == 0, 1.0f, false);
        beta1_t *= o.beta1_d;
        beta2_t *= o.beta2_d;
      } else {  // all SGD reads
        scalars.lr = static_cast<float>(lr_now);
        scalars.inv_scale = 1.0f;
        scalars.first_update = state.opt_steps == 0;
      }
      receive(gradients_bar(), (kCtas - 1) * sizeof(Message), s);
      stamp();
      update(s, scalars);
      advance_step_state(state, false, false, nullptr);
      __syncthreads();  // the new weights before the next forward reads them
      stamp();
    }
    if (a.steps > 0) add_metrics(a.steps - 1);
    cp_async_wait_all();
    cluster.sync();  // every copy into this block has landed, and every copy out of it
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

template <bool kAdam>
__global__ void __launch_bounds__(kThreads, 1) regression_epoch_kernel(const __grid_constant__ FusedEpochArgs args) {
#ifdef SPRINTNET_HAS_CLUSTERS
  extern __shared__ __align__(128) unsigned char smem[];
  Regression<kAdam> k(args, smem);
  k.train();
#else
  __trap();
#endif
}

using RegressionKernel = void (*)(FusedEpochArgs);

RegressionKernel kernel_for(const FusedEpochArgs& args) {
  return args.optimizer.kind != FlatOptimizerKind::kSgd ? regression_epoch_kernel<true> : regression_epoch_kernel<false>;
}

cudaError_t configure(RegressionKernel kernel) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Layout::kBytes);
}

cudaLaunchConfig_t launch_config(cudaStream_t stream, cudaLaunchAttribute* attribute) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kCtas);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = Layout::kBytes;
  config.stream = stream;
  attribute->id = cudaLaunchAttributeClusterDimension;
  attribute->val.clusterDim.x = kCtas;
  attribute->val.clusterDim.y = 1;
  attribute->val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

struct ProbeAnswer {
  const char* why_not = nullptr;
  int clusters = 0;
};

ProbeAnswer probe(int device) {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 9) {
    return {"thread-block clusters need compute capability 9.0 or newer", 0};
  }
  cudaFuncAttributes attributes{};
  const RegressionKernel kernel = regression_epoch_kernel<true>;
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess || attributes.binaryVersion < 90) {
    cudaGetLastError();
    return {"this build has no sm_90 code for the regression kernel (CMAKE_CUDA_ARCHITECTURES)", 0};
  }
  ProbeAnswer answer;
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = launch_config(nullptr, &attribute);
  if (configure(kernel) != cudaSuccess || cudaOccupancyMaxActiveClusters(&answer.clusters, kernel, &config) != cudaSuccess ||
      answer.clusters < 1) {
    cudaGetLastError();
    return {"this GPU cannot schedule an 8-block cluster with the regression kernel's shared memory", 0};
  }
  return answer;
}

const ProbeAnswer& probe_answer(int device) {
  static std::mutex mutex;
  static std::map<int, ProbeAnswer> answers;
  const std::lock_guard lock(mutex);
  const auto [at, fresh] = answers.try_emplace(device);
  if (fresh) at->second = probe(device);
  return at->second;
}

}  // namespace

const char* regression_epoch_unavailable(int device) { return probe_answer(device).why_not; }

int regression_epoch_active_clusters(int device) {
  const ProbeAnswer& answer = probe_answer(device);
  return answer.why_not == nullptr ? answer.clusters : 0;
}

cudaError_t launch_regression_epoch(const FusedEpochArgs& args, cudaStream_t stream) {
  const NvtxRange range("regression_epoch");
  const RegressionKernel kernel = kernel_for(args);
  const cudaError_t e = configure(kernel);
  if (e != cudaSuccess) return e;
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = launch_config(stream, &attribute);
  return cudaLaunchKernelEx(&config, kernel, args);
}

}  // namespace sprintnet::cuda
