// The fused engine's cluster kernel (docs/FUSED.md, v4, v5 and v9): a whole training
// epoch of a small MLP (hidden widths <= 128, batch <= 128) in ONE cluster of 16
// blocks. The weights stay in the blocks' shared memory for the whole epoch:
//
//   first layer   block r owns 64 input features: it gathers them from the uint8
//                 data set and keeps W[:, its features]; its partial product
//                 (128 x H0, fp32) is summed over the blocks by each column's owner.
//                 A 113-128-wide first layer splits 2 x 8 instead (v11a): block r
//                 owns feature group r / 2 (112 of 784) against neuron half r % 2
//   hidden layer  block r owns columns 8r..8r+7: W's rows for its forward, W's
//                 columns for its share of the input gradient (updated by their
//                 owners through distributed shared memory, two copies by parity)
//   output layer  replicated: every block computes the logits, the loss and the
//                 layer's update, its master weights and state in shared memory;
//                 then its 8 columns of the last hidden layer's gradient (all of
//                 them, without exchange, where there is one hidden layer)
//
// Each block stores the 8 columns it computes of a layer's output (or gradient)
// into every other block from registers (st.async, a row at a time), completing
// on the receiver's mbarrier for that buffer (send / receive); the stages wait
// for their data, not for each other. The first layer's partial sums go to
// their owners' shared memory the same way, after a split cluster barrier that
// ends each step (with one hidden layer: through L2, a cluster barrier after
// them). Without a hidden layer
// (softmax regression) block r adds the partial logits of rows 8r..8r+7, computes
// their loss and gradient and writes those rows into every block: 2 barriers a
// step. The first layer's fp32 master weights and optimizer state live in the
// registers of the threads that compute their gradients (v6), the output layer's in
// shared memory; the hidden layers' stay in the flat buffers (L2), their loads
// issued before the weight gradient's product.
// Every sum has a fixed order: reruns are bit-identical.
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/fused/activation_of_output.cuh"
#include "sprintnet/ops/cuda/fused/cluster_epoch.h"
#include "sprintnet/ops/cuda/fused/cluster_launch.h"
#include "sprintnet/ops/cuda/fused/fragment_loads.cuh"
#include "sprintnet/ops/cuda/fused/grid_barrier.cuh"
#include "sprintnet/ops/cuda/fused/progress_record.cuh"
#include "sprintnet/ops/cuda/fused/ptx.cuh"
#include "sprintnet/ops/cuda/fused/row_loss.cuh"
#include "sprintnet/ops/cuda/fused/stage_stamps.cuh"
#include "sprintnet/ops/cuda/fused/update_form.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

namespace cg = cooperative_groups;
using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;

struct ClusterArgs {
  FusedEpochArgs a;
  ClusterLayout c;
  float* partials;  // P: [16][128][ld_part] fp32 (cluster_layout.h)
};

// Thread-block clusters exist from sm_90: builds for older GPUs compile the kernel empty (the host
// refuses to launch it there: cluster_epoch_unavailable).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define SPRINTNET_HAS_CLUSTERS 1
#endif

#ifdef SPRINTNET_HAS_CLUSTERS
constexpr int kCols = kClusterCols;
constexpr int kRows = kClusterRows;

// ---- tensor-core fragments (mma.sync m16n8k16, bf16 in, fp32 accumulate) ----
// A fragment: a 16 x 16 tile; B: 16 (k) x 8 (n); C: 16 x 8, thread (g = lane / 4, t = lane % 4)
// holding (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
//
// Two layouts of a matrix M in shared memory, both read by ldmatrix 8 columns (16 bytes) at a time:
// row-major with rows `ld` apart, M(r, c) at p[r * ld + c]; and by column blocks (the exchanged
// activations and gradients, X and D), M(r, c) at p[(c / 8) * kColumnBlock + r * 8 + c % 8], so the
// 8 columns a block owns are 2 contiguous KB, 16 bytes a row. Where an operand may be
// either, it comes as (p, ld, cb): M(r, c) at p[r * ld + (c / 8) * cb + c % 8] (row-major: cb = 8;
// column blocks: ld = 8, cb = kColumnBlock).
constexpr int kColumnBlock = kClusterRows * kClusterCols;  // 1024 elements

using ptx::mma_bf16;
using ptx::shared_address;

// A(m, k) at p[m * ld + (k / 8) * cb + k % 8].
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const bf16* p, int ld, int cb) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  ptx::ldmatrix_x4(a, shared_address(p + (lane & 15) * ld + (lane >> 4) * cb));
}

// A(m, k) at p[k * ld + (m / 8) * cb + m % 8].
__device__ __forceinline__ void load_a_trans(std::uint32_t (&a)[4], const bf16* p, int ld, int cb) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  ptx::ldmatrix_x4_trans(a, shared_address(p + ((lane & 7) + (lane >> 4) * 8) * ld + ((lane >> 3) & 1) * cb));
}

// B(k, n) at p[n * ld + k].
__device__ __forceinline__ void load_b(std::uint32_t (&b)[2], const bf16* p, int ld) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  ptx::ldmatrix_x2(b, shared_address(p + (lane & 7) * ld + ((lane >> 3) & 1) * 8));
}

// B(k, n) at p[k * ld + n] (n < 8: within one column block of either layout).
__device__ __forceinline__ void load_b_trans(std::uint32_t (&b)[2], const bf16* p, int ld) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  ptx::ldmatrix_x2_trans(b, shared_address(p + ((lane & 7) + ((lane >> 3) & 1) * 8) * ld));
}

// acc[0] + acc[1] = A[16 x 16 k_steps] · B, A (a, lda, acb), B(k, n) at b[n * ldb + k]: even and
// odd k-steps in two chains, so consecutive mma's do not wait for each other.
__device__ __forceinline__ void two_chain_product(float (&acc)[2][4], const bf16* a, int lda, int acb, const bf16* b,
                                                  int ldb, int k_steps) {
  int ks = 0;
  for (; ks + 1 < k_steps; ks += 2) {
    std::uint32_t fa0[4], fb0[2], fa1[4], fb1[2];
    load_a(fa0, a + ks * 2 * acb, lda, acb);
    load_b(fb0, b + ks * 16, ldb);
    load_a(fa1, a + (ks + 1) * 2 * acb, lda, acb);
    load_b(fb1, b + ks * 16 + 16, ldb);
    mma_bf16(acc[0], fa0, fb0);
    mma_bf16(acc[1], fa1, fb1);
  }
  if (ks < k_steps) {
    std::uint32_t fa[4], fb[2];
    load_a(fa, a + ks * 2 * acb, lda, acb);
    load_b(fb, b + ks * 16, ldb);
    mma_bf16(acc[0], fa, fb);
  }
}

// acc[nt] += A · B_nt over k_steps k-steps, for nt < tiles (at most kMaxTiles): A (a, lda, acb)
// (16 rows), B_nt(k, n) at b[(nt * 8 + n) * ldb + k], or with kBTrans at b[k * ldb + nt * 8 + n].
// A warp's row tile against several column tiles.
template <int kMaxTiles, bool kBTrans, bool kAll>
__device__ __forceinline__ void row_tiles_pass(float (&acc)[kMaxTiles][4], const bf16* a, int lda, int acb,
                                               const bf16* b, int ldb, int k_steps, int tiles) {
  for (int ks = 0; ks < k_steps; ++ks) {
    std::uint32_t fa[4];
    load_a(fa, a + ks * 2 * acb, lda, acb);
#pragma unroll
    for (int nt = 0; nt < kMaxTiles; ++nt) {
      if (kAll || nt < tiles) {
        std::uint32_t fb[2];
        if constexpr (kBTrans) {
          load_b_trans(fb, b + ks * 16 * ldb + nt * 8, ldb);
        } else {
          load_b(fb, b + nt * 8 * ldb + ks * 16, ldb);
        }
        mma_bf16(acc[nt], fa, fb);
      }
    }
  }
}
template <int kMaxTiles, bool kBTrans>
__device__ __forceinline__ void row_tiles_product(float (&acc)[kMaxTiles][4], const bf16* a, int lda, int acb,
                                                  const bf16* b, int ldb, int k_steps, int tiles) {
  // Every tile (the usual case) without a branch between the loads and mma's: one basic block the
  // compiler can schedule (a branch per tile serialised each ldmatrix with its mma).
  if (tiles >= kMaxTiles) {
    row_tiles_pass<kMaxTiles, kBTrans, true>(acc, a, lda, acb, b, ldb, k_steps, tiles);
  } else {
    row_tiles_pass<kMaxTiles, kBTrans, false>(acc, a, lda, acb, b, ldb, k_steps, tiles);
  }
}

// A weight gradient's tile, transposed: acc(m, n) += sum over the batch's 128 rows b of
// X(b, m) · G(b, n) (16 x 8; X as (x, ldx, xcb) and G(b, n) at gr[b * ldg + n], pointing at the
// tile's first column).
__device__ __forceinline__ void batch_product(float (&acc)[4], const bf16* x, int ldx, int xcb, const bf16* gr,
                                              int ldg) {
  // Even and odd k-steps in two chains (8 dependent mma's would wait for each other), then added.
  float odd[4] = {};
#pragma unroll
  for (int ks = 0; ks < kClusterRows / 16; ks += 2) {
    std::uint32_t fa0[4], fb0[2], fa1[4], fb1[2];
    load_a_trans(fa0, x + ks * 16 * ldx, ldx, xcb);
    load_b_trans(fb0, gr + ks * 16 * ldg, ldg);
    load_a_trans(fa1, x + (ks + 1) * 16 * ldx, ldx, xcb);
    load_b_trans(fb1, gr + (ks + 1) * 16 * ldg, ldg);
    mma_bf16(acc, fa0, fb0);
    mma_bf16(odd, fa1, fb1);
  }
#pragma unroll
  for (int q = 0; q < 4; ++q) acc[q] += odd[q];
}

__device__ __forceinline__ int pad16(int v) { return (v + 15) / 16 * 16; }

using fused::activation;
using fused::store_pair;
using fused::slope_from_output;

// The next batch's share of this block, in flight in registers while the step finishes: 128 rows of
// the block's 64 features in pieces of 8, kPieces (4) a thread; the 2 x 8 split's 112-128 features land
// in shared memory instead (Cluster::fetch; kPieces 1, unused), and only the label waits here.
template <int kPieces>
struct Staged {
  uint2 pixels[kPieces];
  int label;
};

// kUpdate: the optimizer's form (update_form.cuh); Adam and AdamW keep two state buffers, SGD's
// instantiations no second state in registers (the first layer's update prefetches 32 parameters a
// thread). kAct: the hidden layers' activation. kLogitTiles: 8-class tiles of the logits a warp's
// rows hold (2 for up to 16 classes, else 8: the loss's loops run over that many, not over the
// 64-class maximum). kWideFirst: a first layer 113-128 wide with up to 16 classes, split 2 x 8 over the
// blocks (cluster_layout.h's first_split: feature groups x neuron halves), its weight gradient's warps
// 4 x 2 (first_m_tile); an instantiation of its own: both mappings in one kernel cost the registers
// 150 bytes of spills and narrower models 3-4 %, measured (v10g).
template <UpdateForm kUpdate, ActivationKind kAct, int kLogitTiles, bool kWideFirst>
struct Cluster {
  static constexpr bool kAdam = kUpdate == UpdateForm::kAdam;
  const FusedEpochArgs& a;
  const ClusterLayout& c;
  float* partials;
  unsigned char* smem;
  cg::cluster_group cluster;
  int rank, warp, g, t;
  // The step being run.
  StepState state;
  BlockScalars scalars;
  std::int64_t rows;
  int parity;
  std::int64_t first_step = 0;
  StageStamps stamps;
  // Block 0's last warp: the epoch's metric sums, written to a.metrics when it ends.
  double loss_total = 0.0;
  std::int64_t hits_total = 0;

  // The kernel lab's per-stage profile: the start, after the first batch, then the end of every
  // stage of every step.
  __device__ void stamp() { stamps.stamp(); }

  __device__ Cluster(const FusedEpochArgs& args, const ClusterLayout& layout, float* partial_sums, unsigned char* shared)
      : a(args),
        c(layout),
        partials(partial_sums),
        smem(shared),
        cluster(cg::this_cluster()),
        stamps(args.stage_clock, args.stage_clock_capacity, cluster.block_rank() == 0 && threadIdx.x == 0) {
    rank = static_cast<int>(cluster.block_rank());
    warp = static_cast<int>(threadIdx.x) / 32;
    g = (static_cast<int>(threadIdx.x) & 31) >> 2;
    t = static_cast<int>(threadIdx.x) & 3;
  }

  template <typename T>
  __device__ T* at(std::int64_t offset) const {
    return reinterpret_cast<T*>(smem + offset);
  }
  __device__ int count() const { return a.num_layers; }  // Linear layers
  __device__ const FusedLayer& layer(int l) const { return a.layers[l]; }
  __device__ int width(int l) const { return a.layers[l].out; }
  __device__ bf16* x(int l) const { return at<bf16>(c.x[l]); }
  // The first layer's part of this block: feature group first_group() (features f0().., group_width() of
  // them), against every neuron or (kWideFirst) neuron half rank % 2, neurons first_row0()..+63.
  __device__ int first_group() const { return kWideFirst ? rank >> 1 : rank; }
  __device__ bool has_first_part() const { return first_group() < c.slices; }
  __device__ int group_width() const { return kWideFirst ? c.group : kClusterSlice; }  // a constant for 16 x 1
  __device__ int f0() const { return first_group() * group_width(); }
  __device__ int first_row0() const { return kWideFirst ? (rank & 1) * kClusterHalf : 0; }
  // Weight rows of W0 in shared memory (neurons first_row0().. ).
  __device__ int first_rows() const { return kWideFirst ? kClusterHalf : pad16(width(0)); }
  __device__ bool owns(int cols_extent) const { return rank * kCols < cols_extent; }
  __device__ std::int64_t sample(std::int64_t i) const { return a.order != nullptr ? a.order[i] : i; }
  __device__ std::int64_t rows_of(std::int64_t s) const {
    const std::int64_t left = a.samples - s * a.batch;
    return left < a.batch ? left : a.batch;
  }

  // Element (row, col) of a buffer stored by column blocks (X[l], D).
  template <typename T>
  __device__ static T* element(T* buffer, int row, int col) {
    return buffer + (col >> 3) * kColumnBlock + row * kCols + (col & 7);
  }

  // ---- the exchange of X[l] and D (ids l and kDId): the owner of columns 8r..8r+7 (block r <
  // pad16(width) / 8) stores its 2 KB column block into every other block's copy, each warp its 16
  // rows straight from registers (st.async, 16 bytes a row) counted on the destination's mbarrier
  // for that buffer; the consumer waits on its own mbarrier, acquiring at cluster scope (no cluster
  // barrier, no staging, no proxy fence: v9a; v5-v8 sent one bulk copy a destination, after a proxy
  // fence and a block barrier, from the column block in shared memory, which then could not be
  // overwritten until every copy had read it).
  //
  // A block that owns none of a buffer's columns (a layer narrower than the cluster) sends each
  // other block a 16-byte token instead, counted on the same mbarrier, once it is done with the
  // stage. So a block that has received an exchange knows every block has finished the stage that
  // sent it, and with it every read of the stage before: a buffer is written again (the gradients
  // alternate between X[last - 1] and D) only after every block has read what it held, and an
  // mbarrier never holds two phases' bytes. Without the tokens a narrow layer's owners could run a
  // stage ahead of a block that is not one of them and overwrite its X[last - 1] while it still
  // reads it for the logits (racecheck's timing found it on 96-64-40-24-16; v5-v8 had a cluster
  // barrier in the output stage). An arrival on each mbarrier from every warp instead measured
  // 16.3 against 13.7 ms an epoch on 4x128x128: remote arrivals are slow.
  static constexpr int kDId = kClusterMaxLayers - 1;
  static constexpr std::uint32_t kTokenBytes = 16;
  static constexpr int kPartialsId = kClusterMaxLayers;  // the first layer's partials' mbarrier (v9d)
  std::uint32_t phases = 0;  // the parity each buffer's mbarrier completes next, a bit each
  __device__ bf16* exchanged(int id) const { return id == kDId ? at<bf16>(c.d) : x(id); }
  __device__ std::uint32_t exchange_bar(int id) const { return shared_address(at<std::uint64_t>(c.bars) + id); }
  __device__ void init_exchange() const {
    if (threadIdx.x != 0) return;
    for (int id = 0; id <= kPartialsId; ++id) {
      ptx::mbarrier_init(exchange_bar(id));
    }
    ptx::fence_mbarrier_init();
  }
  // The whole block calls it once each warp is done with the stage, having written its 16 rows
  // (16w..16w+15) of this block's columns of buffer `id` if `owner`: lane l reads row 16w + l % 16
  // back and stores it into half of the other blocks. Otherwise the block's tokens.
  __device__ void send(int id, bool owner) const {
    const std::uint32_t bar = exchange_bar(id);
    if (owner) {
      __syncwarp();  // the warp's rows, written by its lanes, are visible to the lane that sends them
      const int lane = static_cast<int>(threadIdx.x) & 31;
      const bf16* row = exchanged(id) + rank * kColumnBlock + (warp * 16 + (lane & 15)) * kCols;
      const uint4 value = *reinterpret_cast<const uint4*>(row);
      const std::uint32_t to = shared_address(row);
#pragma unroll
      for (int dst = lane >> 4; dst < kClusterCtas; dst += 2) {
        if (dst != rank) ptx::store_to_block(ptx::in_block(to, dst), value, ptx::in_block(bar, dst));
      }
      return;
    }
    __syncthreads();  // every warp is done with the stage (owner is the same for the whole block)
    const int dst = static_cast<int>(threadIdx.x);
    if (dst < kClusterCtas && dst != rank) {
      const std::uint32_t token = shared_address(at<uint4>(c.tokens) + rank);
      ptx::store_to_block(ptx::in_block(token, dst), make_uint4(0, 0, 0, 0), ptx::in_block(bar, dst));
    }
  }
  // The whole block waits for every other owner's columns of buffer `id` (`width` columns) and the
  // other blocks' tokens.
  __device__ void receive(int id, int width) {
    const int owners = pad16(width) / kCols;
    if (threadIdx.x == 0) {
      const bool mine = rank < owners;
      const std::uint32_t bytes = static_cast<std::uint32_t>(owners - (mine ? 1 : 0)) * kColumnBlock * 2 +
                                  static_cast<std::uint32_t>(kClusterCtas - owners - (mine ? 0 : 1)) * kTokenBytes;
      ptx::mbarrier_expect_bytes(exchange_bar(id), bytes);
    }
    ptx::mbarrier_wait_cluster(exchange_bar(id), (phases >> id) & 1u);
    phases ^= 1u << id;
    // And the block's own stage boundary (what the cluster barrier gave before): the previous stage's
    // readers of a buffer are done before this stage's writers overwrite it.
    __syncthreads();
  }

  // The permutation's rows of step `step` into next_samples, asynchronously (cp.async, no register
  // waits for them): fetch reads them a few stages later, after wait_samples and a barrier.
  __device__ void prefetch_samples(std::int64_t step) const {
    if (a.order == nullptr || step >= a.steps || threadIdx.x >= rows_of(step)) return;
    const std::int32_t* source = a.order + step * a.batch + threadIdx.x;
    ptx::copy_async_4(shared_address(at<int>(c.next_samples) + threadIdx.x), source);
  }
  __device__ void wait_samples() const { ptx::copy_async_wait_all(); }

  // ---- the batch: this block's features of every row (group_width() of them), in pieces of kPieceBytes
  // (8; 2 x 8: 16): thread i takes piece i % 8 of rows i / 8 + 32 k, k < 4; and every row's label. The
  // rows' sample indices come from next_samples (prefetched) where `prefetched`, else from the
  // permutation. The pieces wait in registers (16 x 1) or, copied by cp.async, in the layout's stage
  // buffer (2 x 8: 112-128 features, whose pieces in registers cost 300 bytes of spills), each thread's
  // own pieces read back by itself (a wait, no barrier).
  static constexpr int kPieceBytes = kWideFirst ? 16 : 8, kPieceSlots = 8, kRowsAPass = kThreads / kPieceSlots;
  static constexpr int kPiecesAThread = kRows / kRowsAPass;
  using Batch = Staged<kWideFirst ? 1 : kPiecesAThread>;
  __device__ int piece_row(int k) const { return static_cast<int>(threadIdx.x) / kPieceSlots + kRowsAPass * k; }
  __device__ int piece_column() const { return static_cast<int>(threadIdx.x) % kPieceSlots * kPieceBytes; }
  __device__ unsigned char* staged_piece(int r) const {
    return at<unsigned char>(c.stage) + r * group_width() + piece_column();
  }
  __device__ void fetch(Batch& s, std::int64_t step, bool prefetched) const {
    const std::int64_t n = rows_of(step), first = step * a.batch;
    const int* rows_sample = at<int>(c.next_samples);
    const auto sample_of = [&](int r) -> std::int64_t {
      return prefetched && a.order != nullptr ? rows_sample[r] : sample(first + r);
    };
    // 2 x 8: whole pieces of 16 (the layout takes it for inputs a multiple of 16).
    const int features = layer(0).in, f = f0() + piece_column();
    const bool column = piece_column() < group_width() && f < features;
#pragma unroll
    for (int k = 0; k < kPiecesAThread; ++k) {
      const int r = piece_row(k);
      if constexpr (kWideFirst) {
        if (r < n && column) {
          ptx::copy_async_16(shared_address(staged_piece(r)), a.images + sample_of(r) * features + f);
        }
      } else {
        s.pixels[k] = make_uint2(0, 0);
        if (r < n && column) {
          s.pixels[k] = *reinterpret_cast<const uint2*>(a.images + sample_of(r) * features + f);
        }
      }
    }
    s.label = threadIdx.x < n ? a.labels[sample_of(static_cast<int>(threadIdx.x))] : 0;
  }
  __device__ void stage(const Batch& s, std::int64_t step) {
    const std::int64_t n = rows_of(step);
    const int features = layer(0).in, f = f0() + piece_column();
    const bool column = piece_column() < group_width();  // 2 x 8 at 784 inputs: 7 of a row's 8 slots
    if constexpr (kWideFirst) ptx::copy_async_wait_all();  // this thread's pieces
    bf16* x0 = at<bf16>(c.x0);
    // Eight pixels (bytes of two words) to four bf16 pairs.
    const auto convert = [&](std::uint32_t lo, std::uint32_t hi, bool valid) {
      const auto value = [&](int j) {
        const std::uint32_t word = j < 4 ? lo : hi;
        const float pixel = ptx::byte_as_float(word, j & 3);
        return valid ? pixel * a.scale + a.shift : 0.0f;
      };
      const auto pair = [&](int j) {
        const __nv_bfloat162 two = __floats2bfloat162_rn(value(j), value(j + 1));
        return *reinterpret_cast<const std::uint32_t*>(&two);
      };
      return make_uint4(pair(0), pair(2), pair(4), pair(6));
    };
#pragma unroll
    for (int k = 0; k < kPiecesAThread && column; ++k) {
      const int r = piece_row(k);
      const bool valid = r < n && f < features;
      uint4* to = reinterpret_cast<uint4*>(x0 + r * c.ld_x0 + piece_column());
      if constexpr (kWideFirst) {
        const uint4 pixels = valid ? *reinterpret_cast<const uint4*>(staged_piece(r)) : make_uint4(0, 0, 0, 0);
        to[0] = convert(pixels.x, pixels.y, valid);
        to[1] = convert(pixels.z, pixels.w, valid);
      } else {
        to[0] = convert(s.pixels[k].x, s.pixels[k].y, valid);
      }
    }
    if (threadIdx.x < kRows) at<int>(c.labels)[threadIdx.x] = s.label;
  }

  // ---- the weights: in from the compute copy at the start, out to it at the end.
  __device__ void load_weights(const bf16* w) {
    const FusedLayer& first = layer(0);
    const int h0 = width(0);
    for (int i = static_cast<int>(threadIdx.x); i < first_rows() * group_width(); i += kThreads) {
      const int row = i / group_width(), f = i % group_width(), o = first_row0() + row;
      if (o < h0 && f0() + f < first.in) {
        at<bf16>(c.w0)[row * c.ld_w0 + f] = w[first.weight_offset + o * first.in_pad + f0() + f];
      }
    }
    if (threadIdx.x < kCols) {
      const int o = rank * kCols + static_cast<int>(threadIdx.x);
      at<float>(c.b0)[threadIdx.x] =
          o < h0 && first.bias ? __bfloat162float(w[first.weight_offset + o * first.in_pad + first.in]) : 0.0f;
    }
    for (int l = 1; l + 1 < count(); ++l) {
      const FusedLayer& L = layer(l);
      for (int i = static_cast<int>(threadIdx.x); i < kCols * L.in; i += kThreads) {
        const int j = i / L.in, k = i % L.in, o = rank * kCols + j;
        if (o < L.out) at<bf16>(c.wr[l])[j * c.ld_wr[l] + k] = w[L.weight_offset + o * L.in_pad + k];
      }
      if (threadIdx.x < kCols) {
        const int o = rank * kCols + static_cast<int>(threadIdx.x);
        at<float>(c.br[l])[threadIdx.x] =
            o < L.out && L.bias ? __bfloat162float(w[L.weight_offset + o * L.in_pad + L.in]) : 0.0f;
      }
      for (int i = static_cast<int>(threadIdx.x); i < kCols * L.out; i += kThreads) {
        const int j = i / L.out, o = i % L.out, k = rank * kCols + j;
        if (k < L.in) at<bf16>(c.wc[l])[j * c.ld_wc[l] + o] = w[L.weight_offset + o * L.in_pad + k];
      }
    }
    const FusedLayer& out = layer(count() - 1);
    if (count() == 1) {
      // Softmax regression: every block's copy of the biases, with their master and state.
      const FlatOptimizerArgs& o = a.optimizer;
      for (int cls = static_cast<int>(threadIdx.x); cls < out.out && out.bias; cls += kThreads) {
        const std::int64_t index = out.weight_offset + static_cast<std::int64_t>(cls) * out.in_pad + out.in;
        regression_bias(0)[cls] = __bfloat162float(w[index]);
        regression_bias(1)[cls] = o.master[index];
        regression_bias(2)[cls] = o.state1 != nullptr ? o.state1[index] : 0.0f;
        regression_bias(3)[cls] = o.state2 != nullptr ? o.state2[index] : 0.0f;
      }
      return;
    }
    // Both parities, padding zeroed (step_output_layer copies whole 8-column blocks).
    for (int i = static_cast<int>(threadIdx.x); i < 2 * c.classes_pad * c.ld_wo; i += kThreads) {
      const int cls = i / c.ld_wo % c.classes_pad, k = i % c.ld_wo;
      const bool weight = cls < out.out && k < out.in;
      at<bf16>(c.wo)[i] = weight ? w[out.weight_offset + cls * out.in_pad + k] : __float2bfloat16_rn(0.0f);
    }
    for (int cls = static_cast<int>(threadIdx.x); cls < out.out; cls += kThreads) {
      at<float>(c.bo)[cls] = out.bias ? __bfloat162float(w[out.weight_offset + cls * out.in_pad + out.in]) : 0.0f;
    }
    // So, from the flat buffers (every block the same).
    const FlatOptimizerArgs& o = a.optimizer;
    for_each_output_parameter([&](std::int64_t index, int k) {
      out_state(0)[k] = o.master[index];
      out_state(1)[k] = o.state1 != nullptr ? o.state1[index] : 0.0f;
      out_state(2)[k] = o.state2 != nullptr ? o.state2[index] : 0.0f;
    });
  }
  // f(flat index, index in So) for every parameter of the output layer, its biases included.
  template <typename F>
  __device__ void for_each_output_parameter(F f) const {
    const FusedLayer& out = layer(count() - 1);
    for (int k = static_cast<int>(threadIdx.x); k < out.out * (out.in + 1); k += kThreads) {
      const int cls = k / (out.in + 1), i = k % (out.in + 1);
      if (i == out.in && !out.bias) continue;
      f(out.weight_offset + static_cast<std::int64_t>(cls) * out.in_pad + i,
        i < out.in ? cls * out.in + i : out.out * out.in + cls);
    }
  }
  __device__ void store_weights(bf16* w, int final_parity) const {
    const FusedLayer& first = layer(0);
    const int h0 = width(0);
    for (int i = static_cast<int>(threadIdx.x); i < first_rows() * group_width(); i += kThreads) {
      const int row = i / group_width(), f = i % group_width(), o = first_row0() + row;
      if (o < h0 && f0() + f < first.in) {
        w[first.weight_offset + o * first.in_pad + f0() + f] = at<bf16>(c.w0)[row * c.ld_w0 + f];
      }
    }
    if (count() == 1) {
      // Softmax regression: block 0 writes the biases (every block holds the same).
      if (rank != 0 || !first.bias) return;
      const FlatOptimizerArgs& o = a.optimizer;
      for (int cls = static_cast<int>(threadIdx.x); cls < h0; cls += kThreads) {
        const std::int64_t index = first.weight_offset + static_cast<std::int64_t>(cls) * first.in_pad + first.in;
        w[index] = __float2bfloat16_rn(regression_bias(1)[cls]);
        o.master[index] = regression_bias(1)[cls];
        if (o.state1 != nullptr) o.state1[index] = regression_bias(2)[cls];
        if (o.state2 != nullptr) o.state2[index] = regression_bias(3)[cls];
      }
      return;
    }
    if (threadIdx.x < kCols && first.bias) {
      const int o = rank * kCols + static_cast<int>(threadIdx.x);
      if (o < h0) {
        w[first.weight_offset + o * first.in_pad + first.in] = __float2bfloat16_rn(at<float>(c.b0)[threadIdx.x]);
      }
    }
    for (int l = 1; l + 1 < count(); ++l) {
      const FusedLayer& L = layer(l);
      for (int i = static_cast<int>(threadIdx.x); i < kCols * L.in; i += kThreads) {
        const int j = i / L.in, k = i % L.in, o = rank * kCols + j;
        if (o < L.out) w[L.weight_offset + o * L.in_pad + k] = at<bf16>(c.wr[l])[j * c.ld_wr[l] + k];
      }
      if (threadIdx.x < kCols && L.bias) {
        const int o = rank * kCols + static_cast<int>(threadIdx.x);
        if (o < L.out) w[L.weight_offset + o * L.in_pad + L.in] = __float2bfloat16_rn(at<float>(c.br[l])[threadIdx.x]);
      }
    }
    const FusedLayer& out = layer(count() - 1);
    // So back to the flat buffers: each weight from the block that steps it, the biases from block 0.
    const FlatOptimizerArgs& o = a.optimizer;
    for_each_output_parameter([&](std::int64_t index, int k) {
      const int i = k < out.out * out.in ? k % out.in : -1;
      if (i >= 0 ? i / kCols != rank : rank != 0) return;
      o.master[index] = out_state(0)[k];
      if (o.state1 != nullptr) o.state1[index] = out_state(1)[k];
      if (o.state2 != nullptr) o.state2[index] = out_state(2)[k];
    });
    if (rank != 0) return;
    const bf16* wo = at<bf16>(c.wo) + final_parity * c.classes_pad * c.ld_wo;
    const float* bo = at<float>(c.bo) + final_parity * c.classes_pad;
    for (int i = static_cast<int>(threadIdx.x); i < out.out * out.in; i += kThreads) {
      const int cls = i / out.in, k = i % out.in;
      w[out.weight_offset + cls * out.in_pad + k] = wo[cls * c.ld_wo + k];
    }
    for (int cls = static_cast<int>(threadIdx.x); cls < out.out && out.bias; cls += kThreads) {
      w[out.weight_offset + cls * out.in_pad + out.in] = __float2bfloat16_rn(bo[cls]);
    }
  }

  // The optimizer's step on one parameter p with its state m and v, in registers.
  __device__ void step_value(float grad, float& p, float& m, float& v) const {
    fused_step<kUpdate>(a.optimizer, scalars, p, m, v, grad, a.optimizer.state1 != nullptr);
  }
  // One parameter updated from the values loaded before (p, state m and v), and stored back.
  __device__ void apply(std::int64_t index, float grad, float& p, float& m, float& v) const {
    const FlatOptimizerArgs& o = a.optimizer;
    step_value(grad, p, m, v);
    o.master[index] = p;
    if (o.state1 != nullptr) o.state1[index] = m;
    if constexpr (kAdam) o.state2[index] = v;
  }
  // Loads issued here, before the product that follows (volatile asm stays in order with the
  // ldmatrix/mma asm; the compiler had sunk plain loads below the product, so the update waited on L2).
  __device__ static float load_early(const float* p) {
    float v;
    asm volatile("ld.global.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
  }
  __device__ void fetch_parameter(std::int64_t index, bool valid, float& p, float& m, float& v) const {
    const FlatOptimizerArgs& o = a.optimizer;
    p = valid ? load_early(o.master + index) : 0.0f;
    m = valid && o.state1 != nullptr ? load_early(o.state1 + index) : 0.0f;
    v = kAdam && valid ? load_early(o.state2 + index) : 0.0f;
  }
  // A bias's update: its state fetched by lane 0 before the stage's products, applied after them
  // with the column sum of dz (a fixed order); the whole warp calls both.
  struct BiasUpdate {
    bool valid;
    std::int64_t index;
    float p, m, v;
  };
  __device__ BiasUpdate fetch_bias(const FusedLayer& L, int o) const {
    BiasUpdate b{L.bias != 0 && o < L.out, L.weight_offset + static_cast<std::int64_t>(o) * L.in_pad + L.in, 0.0f,
                 0.0f, 0.0f};
    if (b.valid && (threadIdx.x & 31) == 0) fetch_parameter(b.index, true, b.p, b.m, b.v);
    return b;
  }
  // Returns the compute copy's value of the updated bias.
  // dz as (p, ld, cb) (see the fragments' layouts).
  __device__ float finish_bias(BiasUpdate& b, const bf16* dz, int ld, int cb, int col) const {
    float sum = 0.0f;
    const bf16* column = dz + (col >> 3) * cb + (col & 7);
    for (int r = static_cast<int>(threadIdx.x) & 31; r < kRows; r += 32) sum += __bfloat162float(column[r * ld]);
    sum = warp_sum(sum);
    if ((threadIdx.x & 31) == 0) apply(b.index, sum, b.p, b.m, b.v);
    return __bfloat162float(__float2bfloat16_rn(__shfl_sync(kFullWarpMask, b.p, 0)));
  }

  // This block's partial products in P (global memory: written here, read by the columns' owners
  // after the barrier through L2, bypassing L1).
  __device__ float* partial(int block) const { return partials + static_cast<std::int64_t>(block) * kRows * c.ld_part; }

  // ---- v9d (c.partials_shared): the step starts when every block has finished the last one (a
  // split cluster barrier: arrived at when a step ends, waited for before the first partial is
  // sent), and then the owners' X[1..] and D are free for the first layer's partials: slot s of the
  // owner holds block s's partial of its 8 columns. Without it the partials go through L2 and a
  // whole cluster barrier follows them.
  static constexpr int kSlotFloats = kRows * kCols;  // [128][8] fp32
  std::uint32_t partials_phase = 0;
  __device__ float* slot(int s) const { return at<float>(c.x[1]) + s * kSlotFloats; }
  // The partials of column tiles half * 8 + nt (owner half * 8 + nt) into their owners' slot
  // first_group(): lanes t and t ^ 1 swap halves of their fragments so each holds 4 columns of one row
  // (16 bytes).
  __device__ void send_partials(const float (&acc)[8][4], int half, int tiles) const {
    const bool odd = (t & 1) != 0;
    const int row = warp * 16 + g + (odd ? 8 : 0), col = (t & 2) * 2;
    float* mine = slot(first_group()) + row * kCols + col;
    const std::uint32_t to = shared_address(mine), bar = exchange_bar(kPartialsId);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int owner = half * 8 + nt;
      if (owner >= tiles) break;
      const float got0 = __shfl_xor_sync(kFullWarpMask, odd ? acc[nt][0] : acc[nt][2], 1);
      const float got1 = __shfl_xor_sync(kFullWarpMask, odd ? acc[nt][1] : acc[nt][3], 1);
      const float4 v = odd ? make_float4(got0, got1, acc[nt][2], acc[nt][3]) : make_float4(acc[nt][0], acc[nt][1], got0, got1);
      if (owner == rank) {
        *reinterpret_cast<float4*>(mine) = v;
      } else {
        const uint4 bits = make_uint4(__float_as_uint(v.x), __float_as_uint(v.y), __float_as_uint(v.z), __float_as_uint(v.w));
        ptx::store_to_block(ptx::in_block(to, owner), bits, ptx::in_block(bar, owner));
      }
    }
  }

  // ---- forward, first layer: this block's features' share of its columns (fp32), to the owners: every
  // column (16 x 1) or the block's neuron half (2 x 8).
  __device__ void first_partial() {
    const bool shared = c.partials_shared;
    if (!has_first_part()) {
      if (shared) ptx::cluster_wait();
      return;
    }
    const int tiles = pad16(width(0)) / 8;
    float* part = partial(first_group());
    const int row = warp * 16 + g;
    // Two halves of 8 column tiles (16 x 1; 2 x 8: the block's half, rank % 2): 16 tiles' accumulators
    // beside the first layer's state (in registers all epoch) would spill.
#pragma unroll
    for (int pass = 0; pass < (kWideFirst ? 1 : 2); ++pass) {
      const int half = kWideFirst ? rank & 1 : pass;
      if (half * 8 >= tiles) break;
      float acc[8][4] = {};
      row_tiles_product<8, false>(acc, at<bf16>(c.x0) + warp * 16 * c.ld_x0, c.ld_x0, 8,
                                  at<bf16>(c.w0) + (kWideFirst ? 0 : half * 64 * c.ld_w0), c.ld_w0, group_width() / 16,
                                  tiles - half * 8);
      if (shared) {
        if (pass == 0) ptx::cluster_wait();  // the first product overlaps the slowest block's last step
        send_partials(acc, half, tiles);
        continue;
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        if (half * 8 + nt < tiles) {
          const int col = (half * 8 + nt) * 8 + 2 * t;
          __stcg(reinterpret_cast<float2*>(part + row * c.ld_part + col), make_float2(acc[nt][0], acc[nt][1]));
          __stcg(reinterpret_cast<float2*>(part + (row + 8) * c.ld_part + col), make_float2(acc[nt][2], acc[nt][3]));
        }
      }
    }
  }

  // ---- forward, first layer: the owner of columns 8r.. adds the feature groups' partials (in group
  // order), the bias and the activation, and writes them into every block's X[0].
  __device__ void first_reduce() {
    const int h0 = width(0);
    const bool mine = owns(pad16(h0));
    if (mine) {
      const int row = static_cast<int>(threadIdx.x) >> 1, col = rank * kCols + (static_cast<int>(threadIdx.x) & 1) * 4;
      float4 v[kClusterCtas];
      if (c.partials_shared) {
        const std::uint32_t bar = exchange_bar(kPartialsId);
        if (threadIdx.x == 0) {
          // Every group's partial of these columns comes from another block but this block's own (its
          // group's, where it computes this half).
          const bool own = has_first_part() && (!kWideFirst || (rank & 1) == rank * kCols / kClusterHalf);
          const int remote = c.slices - (own ? 1 : 0);
          ptx::mbarrier_expect_bytes(bar, static_cast<std::uint32_t>(remote * kSlotFloats * 4));
        }
        ptx::mbarrier_wait_cluster(bar, partials_phase);
        partials_phase ^= 1u;
        __syncthreads();  // the block's own slot, stored by its own threads
#pragma unroll
        for (int s = 0; s < kClusterCtas; ++s) {
          if (s < c.slices) v[s] = *reinterpret_cast<const float4*>(slot(s) + row * kCols + (col - rank * kCols));
        }
      } else {
#pragma unroll
        for (int s = 0; s < kClusterCtas; ++s) {
          if (s < c.slices) v[s] = __ldcg(reinterpret_cast<const float4*>(partial(s) + row * c.ld_part + col));
        }
      }
      float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int s = 0; s < kClusterCtas; ++s) {
        if (s < c.slices) {
          z[0] += v[s].x;
          z[1] += v[s].y;
          z[2] += v[s].z;
          z[3] += v[s].w;
        }
      }
      float y[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float value = activation<kAct>(z[q] + at<float>(c.b0)[col - rank * kCols + q]);
        y[q] = col + q < h0 && row < rows ? value : 0.0f;  // zeros past the batch, as X0
      }
      store_pair(element(x(0), row, col), y[0], y[1]);
      store_pair(element(x(0), row, col + 2), y[2], y[3]);
    }
    send(0, mine);
  }

  // ---- forward, hidden layer l >= 1: this block's 8 columns, into every block's X[l].
  __device__ void hidden_forward(int l) {
    receive(l - 1, width(l - 1));
    const int out = width(l);
    const bool mine = owns(pad16(out));
    if (mine) {
      const int k_steps = pad16(layer(l).in) / 16;
      float acc[2][4] = {};
      two_chain_product(acc, x(l - 1) + warp * 16 * kCols, kCols, kColumnBlock, at<bf16>(c.wr[l]), c.ld_wr[l],
                        k_steps);
      const float* bias = at<float>(c.br[l]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp * 16 + g + 8 * h, col = 2 * t;
        float y[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float z = acc[0][2 * h + e] + acc[1][2 * h + e] + bias[col + e];
          y[e] = rank * kCols + col + e < out && row < rows ? activation<kAct>(z) : 0.0f;
        }
        store_pair(element(x(l), row, rank * kCols + col), y[0], y[1]);
      }
    }
    send(l, mine);
  }

  // ---- the output layer, in every block: logits, loss, dlogits, the layer's update; then the
  // block's columns of the last hidden layer's gradient, into every block's D (one hidden layer: all
  // of it, in place of its output).
  __device__ void output_layer() {
    const int last = count() - 1;
    const FusedLayer& out = layer(last);
    const int classes = out.out, k_steps = pad16(out.in) / 16, tiles = c.classes_pad / 8;
    receive(last - 1, width(last - 1));
    // No block writes into X[last - 1] before this block's part of the next exchange (send): the
    // gradient of the layer below lands there (v5-v8's bulk copies read this block's own column
    // block from here, and a split cluster barrier kept it until they had). With one hidden layer
    // this stage overwrites it with its gradient itself.
    bf16* xl = x(last - 1);
    const bf16* wo = at<bf16>(c.wo) + parity * c.classes_pad * c.ld_wo;
    const float* bo = at<float>(c.bo) + parity * c.classes_pad;
    bf16* dl = at<bf16>(c.dl);
    {
      float acc[kLogitTiles][4] = {};
      row_tiles_product<kLogitTiles, false>(acc, xl + warp * 16 * kCols, kCols, kColumnBlock, wo, c.ld_wo, k_steps,
                                            tiles);
      const bool mse = a.loss == FusedLoss::kMse;
      const float grad_scale = mse ? 2.0f / static_cast<float>(rows * classes) : 1.0f / static_cast<float>(rows);
      const int* labels = at<int>(c.labels);
      // Only block 0 keeps the metrics: the loss and the first maximum's class are its alone (every
      // block computed them, ~10 % of the stage's instructions, ncu).
      const bool metrics = rank == 0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp * 16 + g + 8 * h;
        const bool valid = row < rows;
        const int label = labels[row];
        float v[2 * kLogitTiles];  // the quad's logits in the fragment's order (row_loss.cuh, FragmentRow)
#pragma unroll
        for (int nt = 0; nt < kLogitTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int cls = nt * 8 + 2 * t + e;
            v[2 * nt + e] = nt < tiles && cls < classes ? acc[nt][2 * h + e] + bo[cls] : -INFINITY;
          }
        }
        const auto r = fused::row_loss<fused::FragmentRow<kLogitTiles>>(v, classes, label, mse, a.smoothing,
                                                                         grad_scale, metrics);
#pragma unroll
        for (int nt = 0; nt < kLogitTiles; ++nt) {
          if (nt < tiles) {
            store_pair(dl + row * c.ld_dl + nt * 8 + 2 * t, valid ? r.grad[2 * nt] : 0.0f,
                       valid ? r.grad[2 * nt + 1] : 0.0f);
          }
        }
        if (metrics && t == 0) {
          at<double>(c.row_loss)[row] = valid ? r.loss : 0.0;
          at<int>(c.row_hit)[row] = valid && r.best_index == label ? 1 : 0;
        }
      }
    }
    __syncthreads();
    stamp();  // profile: a sub-stage
    // The output layer's weight-gradient tile first (it reads X[last - 1], which the layer below's
    // gradient overwrites once this block's D is out); its update after the send (v10e).
    float tile[4] = {};
    if (output_tile_warp()) output_weight_tile(tile);
    const int n_tiles = pad16(out.in) / 8, c_steps = c.classes_pad / 16;
    if (last >= 2) {
      // dZ = (dlogits · W) ⊙ f'(X), this block's 8 columns, into every block's D (v9b: every block
      // computed all of it before, 16 column tiles a warp, 3.1 us a step on 4x128x128).
      const bool mine = owns(pad16(out.in));
      if (mine) {
        float acc[1][4] = {};
        row_tiles_product<1, true>(acc, dl + warp * 16 * c.ld_dl, c.ld_dl, 8, wo + rank * kCols, c.ld_wo, c_steps, 1);
        bf16* d = exchanged(kDId);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = warp * 16 + g + 8 * h, col = rank * kCols + 2 * t;
          const __nv_bfloat162 y = *reinterpret_cast<const __nv_bfloat162*>(element(xl, row, col));
          const bool valid = row < rows;
          const float d0 = valid && col < out.in ? acc[0][2 * h] * slope_from_output<kAct>(__low2float(y)) : 0.0f;
          const float d1 =
              valid && col + 1 < out.in ? acc[0][2 * h + 1] * slope_from_output<kAct>(__high2float(y)) : 0.0f;
          store_pair(element(d, row, col), d0, d1);
        }
      }
      // Each warp's reads of X[last - 1] (the tile, the slopes) come before its own part of the send,
      // and a block that receives D has every warp's part.
      send(kDId, mine);
      stamp();  // profile: a sub-stage
      step_output_layer(tile);
      stamp();  // profile: a sub-stage
      return;
    }
    step_output_layer(tile);
    __syncthreads();  // every read of X[0] is done: its gradient overwrites it in place
    stamp();  // profile: a sub-stage
    // One hidden layer: dZ = (dlogits · W) ⊙ f'(X), all of it, over X (the first layer's backward
    // reads every column).
    // In two halves of 8 column tiles (16 tiles' accumulators beside the first layer's state would
    // spill).
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (half * 8 >= n_tiles) break;
      float acc[8][4] = {};
      row_tiles_product<8, true>(acc, dl + warp * 16 * c.ld_dl, c.ld_dl, 8, wo + half * 64, c.ld_wo, c_steps,
                                 n_tiles - half * 8);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        if (half * 8 + nt >= n_tiles) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = warp * 16 + g + 8 * h, col = (half * 8 + nt) * 8 + 2 * t;
          bf16* p = element(xl, row, col);
          const __nv_bfloat162 y = *reinterpret_cast<const __nv_bfloat162*>(p);
          const bool valid = row < rows;
          const float d0 =
              valid && col < out.in ? acc[nt][2 * h] * slope_from_output<kAct>(__low2float(y)) : 0.0f;
          const float d1 =
              valid && col + 1 < out.in ? acc[nt][2 * h + 1] * slope_from_output<kAct>(__high2float(y)) : 0.0f;
          store_pair(p, d0, d1);
        }
      }
    }
    stamp();  // profile: a sub-stage
    __syncthreads();  // the gradient's rows are read across warps next (one hidden layer: at once)
  }

  // So: the output layer's fp32 master weights (0) and optimizer state (1, 2), [classes][in] and
  // then the biases; every block holds the same values and updates them identically.
  __device__ float* out_state(int which) const { return at<float>(c.out_state) + which * c.out_state_stride; }
  // Parameter k of So stepped by its gradient; returns the new master value.
  __device__ float step_output(int k, float grad) const {
    float p = out_state(0)[k], m = out_state(1)[k], v = out_state(2)[k];
    step_value(grad, p, m, v);
    out_state(0)[k] = p;
    out_state(1)[k] = m;
    out_state(2)[k] = v;
    return p;
  }

  // The output layer's weight gradient and update, split by input feature (v10b): block r steps
  // W[:, 8r..8r+7] (its master weights and state in So), writes the new values into its own
  // Wo[parity ^ 1] and stores its new 8-column block into the other blocks' (plain DSMEM stores, read
  // a step later, after the cluster barrier that ends this step, which releases them). Every block
  // computed all 16 tiles before: 2.0 us a step. Warp nt < classes_pad / 8 holds classes 8nt..8nt+7.
  __device__ bool output_tile_warp() const { return owns(layer(count() - 1).in) && warp < c.classes_pad / 8; }
  // The 16-feature tile holding the block's 8 features (its half: rows g + 8 h of the fragment, h =
  // rank & 1) against the warp's 8 classes, summed over the batch.
  __device__ void output_weight_tile(float (&acc)[4]) const {
    batch_product(acc, x(count() - 2) + (rank >> 1) * 2 * kColumnBlock, kCols, kColumnBlock,
                  at<bf16>(c.dl) + warp * 8, c.ld_dl);
  }
  // So stepped with the tile and the biases (cheap column sums of dl, every block the same); block 0
  // also adds the metrics.
  __device__ void step_output_layer(const float (&acc)[4]) {
    const FusedLayer& out = layer(count() - 1);
    const int classes = out.out;
    const bf16* dl = at<bf16>(c.dl);
    bf16* next = at<bf16>(c.wo) + (parity ^ 1) * c.classes_pad * c.ld_wo;
    if (output_tile_warp()) {
      const int h = rank & 1, i = rank * kCols + g;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int cls = warp * 8 + 2 * t + e;
        if (i < out.in && cls < classes) {
          next[cls * c.ld_wo + i] = __float2bfloat16_rn(step_output(cls * out.in + i, acc[2 * h + e]));
        }
      }
      __syncwarp();  // the warp's classes, written by its lanes, go out whole: 16 bytes a class
      const int lane = static_cast<int>(threadIdx.x) & 31;
      for (int j = lane; j < kCols * kClusterCtas; j += 32) {
        const int cls = warp * 8 + j / kClusterCtas, dst = j % kClusterCtas;
        if (cls >= classes || dst == rank) continue;
        // Padding columns go too: zeros from load_weights in every block.
        uint4* columns = reinterpret_cast<uint4*>(next + cls * c.ld_wo + rank * kCols);
        *cluster.map_shared_rank(columns, dst) = *columns;
      }
    }
    // The biases from the last warp down (the first warps have the tiles).
    constexpr int kWarps = kThreads / 32;
    for (int cls = kWarps - 1 - warp; cls < classes && out.bias; cls += kWarps) {
      float sum = 0.0f;
      for (int r = static_cast<int>(threadIdx.x) & 31; r < kRows; r += 32) sum += __bfloat162float(dl[r * c.ld_dl + cls]);
      sum = warp_sum(sum);
      if ((threadIdx.x & 31) == 0) {
        const float p = step_output(classes * out.in + cls, sum);
        at<float>(c.bo)[(parity ^ 1) * c.classes_pad + cls] = __bfloat162float(__float2bfloat16_rn(p));
      }
    }
    if (count() == 2) add_metrics();  // otherwise in the shadow of the next stage's exchange
  }

  // ---- backward of hidden layer l: dz (this layer's full gradient) -> the block's columns of the
  // layer below's gradient, into every block's `below`; this block's rows of W[l] updated.
  __device__ void hidden_backward(int l, int dz_id, int below_id) {
    const bf16* dz = exchanged(dz_id);
    bf16* below = exchanged(below_id);
    const FusedLayer& L = layer(l);
    BiasUpdate bias = fetch_bias(L, rank * kCols + warp);
    const bool mine_below = owns(pad16(L.in));
    const bf16* xb = x(l - 1);
    if (mine_below) {
      const int k_steps = pad16(L.out) / 16;
      const bf16* wc = at<bf16>(c.wc[l]) + parity * kCols * c.ld_wc[l];
      float acc[2][4] = {};
      two_chain_product(acc, dz + warp * 16 * kCols, kCols, kColumnBlock, wc, c.ld_wc[l], k_steps);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp * 16 + g + 8 * h, col = rank * kCols + 2 * t;
        const __nv_bfloat162 y = *reinterpret_cast<const __nv_bfloat162*>(element(xb, row, col));
        const bool valid = row < rows;
        const float d0 = valid && col < L.in
                             ? (acc[0][2 * h] + acc[1][2 * h]) * slope_from_output<kAct>(__low2float(y))
                             : 0.0f;
        const float d1 = valid && col + 1 < L.in ? (acc[0][2 * h + 1] + acc[1][2 * h + 1]) *
                                                       slope_from_output<kAct>(__high2float(y))
                                                 : 0.0f;
        store_pair(element(below, row, col), d0, d1);
      }
    }
    send(below_id, mine_below);
    if (l == count() - 2) add_metrics();  // the step's loss and hits (block 0), while the copies fly

    if (!owns(pad16(L.out))) return;
    // dW[rows 8r..][i] = sum over the batch of dz[b][8r + j] * X[l - 1][b][i]: as dWᵀ, warp w takes
    // i in [16w, 16w + 16).
    const int m_tiles = pad16(L.in) / 16;
    if (warp < m_tiles) {
      float p[4], m[4], v[4];
      std::int64_t index[4];
      bool valid[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int i = warp * 16 + g + 8 * (q >> 1), o = rank * kCols + 2 * t + (q & 1);
        valid[q] = i < L.in && o < L.out;
        index[q] = L.weight_offset + static_cast<std::int64_t>(o) * L.in_pad + i;
        fetch_parameter(index[q], valid[q], p[q], m[q], v[q]);
      }
      float acc[4] = {};
      batch_product(acc, xb + warp * 2 * kColumnBlock, kCols, kColumnBlock, dz + rank * kColumnBlock, kCols);
      bf16* rows_w = at<bf16>(c.wr[l]);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        if (valid[q]) apply(index[q], acc[q], p[q], m[q], v[q]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = warp * 16 + g + 8 * h, j = 2 * t;
        if (i >= L.in) continue;
        const float w0 = valid[2 * h] ? p[2 * h] : 0.0f, w1 = valid[2 * h + 1] ? p[2 * h + 1] : 0.0f;
        rows_w[j * c.ld_wr[l] + i] = __float2bfloat16_rn(w0);
        rows_w[(j + 1) * c.ld_wr[l] + i] = __float2bfloat16_rn(w1);
        // The owner of column i of the layer below reads these in its input gradient next step.
        bf16* column = at<bf16>(c.wc[l]) + ((parity ^ 1) * kCols + i % kCols) * c.ld_wc[l] + rank * kCols + j;
        store_pair(cluster.map_shared_rank(column, i / kCols), w0, w1);
      }
    }
    if (bias.valid) {
      const float value = finish_bias(bias, dz, kCols, kColumnBlock, rank * kCols + warp);
      if ((threadIdx.x & 31) == 0) at<float>(c.br[l])[warp] = value;
    }
  }

  // The first layer's fp32 master weights and optimizer state of this thread's parameters, in
  // registers for the whole epoch: 32 a thread (tile k < 8: weight rows 16 m + g (+ 8), features
  // f0 + 8 n + 2t (+ 1) with m, n = first_m_tile(k), first_n_tile(k), the accumulator layout of the
  // weight gradient's mma), loaded when the epoch
  // starts and stored when it ends. They never go to L2 in between (v5 read and wrote 8 K parameters
  // a block a step there).
  struct FirstLayerState {
    float p[8][4], m[8][4], v[kAdam ? 8 : 1][4];
  };
  // Which 16 weight rows (m, of the whole layer) and 8 features of the block's group (n) tile k holds.
  // 16 x 1 (narrower first layers): a warp per 8 features, every row tile (all warps busy). 2 x 8
  // (kWideFirst): the block's 4 row tiles and group_width() / 8 feature tiles split 4 x 2 over the
  // warps: warp w takes row tile w & 3 of its half and feature tiles (w >> 2) first_tiles() + k, k <
  // first_tiles() (7 at 784 inputs), so its fragments read 16 KB of D and X0 a step, not the 36 KB of a
  // warp that takes 8 features and every row (~295 KB an SM: the shared-memory pipe's ~2300 cycles;
  // FUSED.md "The first layer's share", v10g).
  __device__ __forceinline__ int first_m_tile(int k) const {
    return kWideFirst ? first_row0() / 16 + (warp & 3) : k;
  }
  __device__ __forceinline__ int first_n_tile(int k) const {
    return kWideFirst ? (warp >> 2) * first_tiles() + k : warp;
  }
  // The tiles a warp steps: row tiles (16 x 1) or feature tiles (2 x 8) of its share, at most 8.
  __device__ __forceinline__ int first_tiles() const {
    return kWideFirst ? group_width() / 16 : pad16(width(0)) / 16;
  }
  // Flat index of the parameter in tile k, fragment slot q; `valid` false where it is padding.
  __device__ __forceinline__ std::int64_t first_parameter(int k, int q, bool& valid) const {
    const FusedLayer& L = layer(0);
    const int o = first_m_tile(k) * 16 + g + 8 * (q >> 1), f = f0() + first_n_tile(k) * 8 + 2 * t + (q & 1);
    // f < L.in also rules out the blocks past the last input group; k < first_tiles() the other warps'
    // feature tiles (2 x 8).
    valid = o < L.out && f < L.in && (!kWideFirst || k < first_tiles());
    return L.weight_offset + static_cast<std::int64_t>(o) * L.in_pad + f;
  }
  // f(flat index, k, q) for each of this thread's first-layer parameters that is not padding.
  template <typename F>
  __device__ __forceinline__ void for_each_first_parameter(F f) const {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        bool valid;
        const std::int64_t index = first_parameter(k, q, valid);
        if (valid) f(index, k, q);
      }
    }
  }
  __device__ __forceinline__ void load_first_state(FirstLayerState& s) const {
    const FlatOptimizerArgs& o = a.optimizer;
    s = FirstLayerState{};
    for_each_first_parameter([&](std::int64_t index, int k, int q) {
      s.p[k][q] = o.master[index];
      if (o.state1 != nullptr) s.m[k][q] = o.state1[index];
      if constexpr (kAdam) s.v[k][q] = o.state2[index];
    });
  }
  __device__ __forceinline__ void store_first_state(const FirstLayerState& s) const {
    const FlatOptimizerArgs& o = a.optimizer;
    for_each_first_parameter([&](std::int64_t index, int k, int q) {
      o.master[index] = s.p[k][q];
      if (o.state1 != nullptr) o.state1[index] = s.m[k][q];
      if constexpr (kAdam) o.state2[index] = s.v[k][q];
    });
  }

  // Tiles k = kBase..kBase+3 (those below `tiles` unless kAll) of the first layer's weight gradient
  // (tile k: weight rows 16 m..16 m+15 and features 8 n..8 n+7 of the group, first_m_tile /
  // first_n_tile), applied to the registers' master and state, the compute copy written. 2 x 8: a pass's
  // tiles share their row tile (one A fragment a k-step); 16 x 1: their feature tile (one B fragment).
  template <int kBase, bool kAll>
  __device__ __forceinline__ void first_weight_tiles(FirstLayerState& s, const bf16* dz, int ld, int cb, int tiles) {
    static_assert(kBase % 4 == 0, "a pass's four tiles share one row tile (kWideFirst)");
    float acc[4][4] = {};
    const bf16* x0 = at<bf16>(c.x0);
#pragma unroll
    for (int ks = 0; ks < kRows / 16; ++ks) {
      if constexpr (kWideFirst) {
        std::uint32_t fa[4];
        load_a_trans(fa, dz + ks * 16 * ld + first_m_tile(kBase) * 2 * cb, ld, cb);  // the same rows for every tile
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          if (kAll || kBase + k < tiles) {
            std::uint32_t fb[2];
            load_b_trans(fb, x0 + ks * 16 * c.ld_x0 + first_n_tile(kBase + k) * 8, c.ld_x0);
            mma_bf16(acc[k], fa, fb);
          }
        }
      } else {
        std::uint32_t fb[2];
        load_b_trans(fb, x0 + ks * 16 * c.ld_x0 + warp * 8, c.ld_x0);  // the same features for every tile
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          if (kAll || kBase + k < tiles) {
            std::uint32_t fa[4];
            load_a_trans(fa, dz + ks * 16 * ld + (kBase + k) * 2 * cb, ld, cb);
            mma_bf16(acc[k], fa, fb);
          }
        }
      }
    }
    bf16* w0 = at<bf16>(c.w0);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (!kAll && kBase + k >= tiles) continue;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        bool valid;
        first_parameter(kBase + k, q, valid);
        if (!valid) continue;
        if constexpr (kAdam) {
          step_value(acc[k][q], s.p[kBase + k][q], s.m[kBase + k][q], s.v[kBase + k][q]);
        } else {
          float unused = 0.0f;
          step_value(acc[k][q], s.p[kBase + k][q], s.m[kBase + k][q], unused);
        }
      }
      // Padding's master values stay 0, as the compute copy's padding.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = first_m_tile(kBase + k) * 16 - first_row0() + g + 8 * h;
        store_pair(w0 + row * c.ld_w0 + first_n_tile(kBase + k) * 8 + 2 * t, s.p[kBase + k][2 * h],
                   s.p[kBase + k][2 * h + 1]);
      }
    }
  }

  // ---- backward of the first layer: dW[this block's rows, its features] and (with a hidden layer) the
  // bias of its columns, applied; then the next batch's features (fetched first, so they arrive
  // meanwhile) staged. dz: the layer's full gradient, rows `ld` apart. Warp w takes up to eight
  // 16 x 8 tiles of the weight (first_m_tile, first_n_tile: 2 x 8, the block's 64 rows and its group's
  // features split 4 x 2 over the warps; 16 x 1, features 8w..8w+7 with every row).
  __device__ __forceinline__ void first_backward(FirstLayerState& first, const bf16* dz, int ld, int cb,
                                                 std::int64_t step) {
    const bool next = step + 1 < a.steps;
    Batch staged;
    if (next) fetch(staged, step + 1, true);
    stamp();  // profile: a sub-stage
    const FusedLayer& L = layer(0);
    const bool regression = count() == 1;
    BiasUpdate bias = fetch_bias(L, regression ? L.out : rank * kCols + warp);  // regression: below
    const int tiles = first_tiles();  // at most 8
    if (has_first_part()) {
      // Two passes of four tiles: eight tiles' accumulators beside the state would not fit in
      // registers. A pass of four whole tiles has no branch between its loads and mma's.
      if (tiles >= 4) {
        first_weight_tiles<0, true>(first, dz, ld, cb, tiles);
      } else {
        first_weight_tiles<0, false>(first, dz, ld, cb, tiles);
      }
      if (tiles >= 8) {
        first_weight_tiles<4, true>(first, dz, ld, cb, tiles);
      } else if (tiles > 4) {
        first_weight_tiles<4, false>(first, dz, ld, cb, tiles);
      }
    }
    stamp();  // profile: a sub-stage
    if (regression) {
      regression_biases(dz, ld);
    } else if (bias.valid) {
      const float value = finish_bias(bias, dz, ld, cb, rank * kCols + warp);
      if ((threadIdx.x & 31) == 0) at<float>(c.b0)[warp] = value;
    }
    __syncthreads();  // every read of X0 is done
    stamp();  // profile: a sub-stage
    if (next) stage(staged, step + 1);
    stamp();  // profile: a sub-stage
    __syncthreads();
  }

  // ---- softmax regression (no hidden layer): the first layer is the output layer.
  // Its biases live in every block (bo: compute value, master, m, v by class), updated identically
  // from the replicated gradient; block 0 writes them back at the end.
  __device__ float* regression_bias(int which) const { return at<float>(c.bo) + which * c.classes_pad; }

  // Block r: rows 8r..8r+7, one a warp: the blocks' partial logits added in block order, the bias,
  // the loss and its gradient (one class a lane, two with more than 32), the gradient's rows into
  // every block's dl, the row's loss and hit into block 0's.
  __device__ void regression_loss() {
    const FusedLayer& L = layer(0);
    const int classes = L.out, lane = static_cast<int>(threadIdx.x) & 31;
    const int row = rank * kCols + warp;
    const bool valid = row < rows;
    float v[2];
    for (int j = 0; j < 2; ++j) {
      const int cls = lane + 32 * j;
      float z = -INFINITY;
      if (cls < classes) {
        float parts[kClusterCtas];
#pragma unroll
        for (int s = 0; s < kClusterCtas; ++s) {
          if (s < c.slices) parts[s] = __ldcg(partial(s) + row * c.ld_part + cls);
        }
        z = 0.0f;
#pragma unroll
        for (int s = 0; s < kClusterCtas; ++s) {
          if (s < c.slices) z += parts[s];
        }
        z += regression_bias(0)[cls];
      }
      v[j] = z;
    }
    const int label = at<int>(c.labels)[row];
    const bool mse = a.loss == FusedLoss::kMse;
    const float grad_scale = mse ? 2.0f / static_cast<float>(rows * classes) : 1.0f / static_cast<float>(rows);
    const auto r_loss = fused::row_loss<fused::SpreadRow<kWarpSize>>(v, classes, label, mse, a.smoothing, grad_scale);
    const double loss = r_loss.loss;
    const float(&grad)[2] = r_loss.grad;
    const int best_index = r_loss.best_index;
    bf16* dl = at<bf16>(c.dl);
    for (int j = 0; j < 2; ++j) {
      const int cls = lane + 32 * j;
      if (cls < c.classes_pad) dl[row * c.ld_dl + cls] = __float2bfloat16_rn(valid && cls < classes ? grad[j] : 0.0f);
    }
    if (lane == 0) {
      *cluster.map_shared_rank(at<double>(c.row_loss) + row, 0) = valid ? loss : 0.0;
      *cluster.map_shared_rank(at<int>(c.row_hit) + row, 0) = valid && best_index == label ? 1 : 0;
    }
    __syncthreads();
    // This block's 8 rows of dl into every other block: 16-byte pieces.
    const int row_pieces = c.classes_pad / 8;
    for (int i = static_cast<int>(threadIdx.x); i < kCols * row_pieces * (kClusterCtas - 1); i += kThreads) {
      const int k = i / (kCols * row_pieces), piece = i % (kCols * row_pieces);
      const int dst = k >= rank ? k + 1 : k;
      bf16* p = dl + (rank * kCols + piece / row_pieces) * c.ld_dl + (piece % row_pieces) * 8;
      *reinterpret_cast<uint4*>(cluster.map_shared_rank(p, dst)) = *reinterpret_cast<const uint4*>(p);
    }
  }

  // Every block: each class's bias from the column sum of dl (one warp a class, a fixed order).
  __device__ void regression_biases(const bf16* dl, int ld) {
    const FusedLayer& L = layer(0);
    if (!L.bias) return;
    for (int cls = warp; cls < L.out; cls += kThreads / 32) {
      float sum = 0.0f;
      for (int r = static_cast<int>(threadIdx.x) & 31; r < kRows; r += 32) sum += __bfloat162float(dl[r * ld + cls]);
      sum = warp_sum(sum);
      if ((threadIdx.x & 31) == 0) {
        float p = regression_bias(1)[cls], m = regression_bias(2)[cls], v = regression_bias(3)[cls];
        step_value(sum, p, m, v);
        regression_bias(1)[cls] = p;
        regression_bias(2)[cls] = m;
        regression_bias(3)[cls] = v;
        regression_bias(0)[cls] = __bfloat162float(__float2bfloat16_rn(p));
      }
    }
  }

  // Block 0, the last warp: the step's mean loss and hits added to the epoch's sums (a fixed order)
  // and the progress record.
  __device__ void add_metrics() {
    if (rank != 0 || warp != kThreads / 32 - 1) return;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    double loss = 0.0, hits = 0.0;
    for (int r = lane; r < kRows; r += 32) {
      loss += at<double>(c.row_loss)[r];
      hits += at<int>(c.row_hit)[r];
    }
    loss = fused::group_sum<kWarpSize>(loss);
    hits = fused::group_sum<kWarpSize>(hits);
    if (lane == 0) {
      const int classes = layer(count() - 1).out;
      const double weight = 1.0 / static_cast<double>(a.loss == FusedLoss::kMse ? rows * classes : rows);
      loss_total += weight * loss;
      hits_total += static_cast<std::int64_t>(hits);
      fused::write_progress(a.progress, state.step - first_step + 1, loss_total);
    }
  }

  // ---- the epoch.
  __device__ void train() {
    state = *a.state;
    first_step = state.step;
    stamp();
    for (int i = static_cast<int>(threadIdx.x); i < c.bytes / 16; i += kThreads) {
      reinterpret_cast<uint4*>(smem)[i] = make_uint4(0, 0, 0, 0);
    }
    __syncthreads();
    init_exchange();
    load_weights(static_cast<const bf16*>(a.copies[state.step & 1]));
    FirstLayerState first;
    load_first_state(first);
    if (a.steps > 0) {
      Batch staged;
      fetch(staged, 0, false);
      stage(staged, 0);
    }
    // Every block's memory is ready for the others' writes (v9d: once the first step's wait passes).
    if (c.partials_shared) {
      __syncthreads();  // the weights and the first batch, read by every warp before that wait
      ptx::cluster_arrive();
    } else {
      cluster.sync();
    }
    stamp();
    const int last = count() - 1;
    for (std::int64_t s = 0; s < a.steps; ++s) {
      rows = rows_of(s);
      parity = static_cast<int>(s & 1);
      scalars = step_scalars(a.optimizer, state.step, state.opt_steps, 1.0f, false);
      prefetch_samples(s + 1);
      first_partial();
      wait_samples();  // landed meanwhile; a block barrier publishes them to the block before fetch reads them
      if (!c.partials_shared) cluster.sync();
      stamp();
      if (last == 0) {  // softmax regression: 2 barriers a step
        regression_loss();
        cluster.sync();
        stamp();
        add_metrics();
        first_backward(first, at<bf16>(c.dl), c.ld_dl, 8, s);
        stamp();
        advance_step_state(state, false, false, nullptr);
        continue;
      }
      // From here on the stages wait for the data they read (receive), not for a cluster barrier.
      first_reduce();
      stamp();
      for (int l = 1; l < last; ++l) {
        hidden_forward(l);
        stamp();
      }
      output_layer();  // sends the last hidden layer's gradient into D (one hidden layer: in X[0])
      stamp();
      // The gradients alternate between D and X[last - 1] going down.
      int here = last >= 2 ? kDId : last - 1, other = last - 1;
      for (int l = last - 1; l >= 1; --l) {
        receive(here, width(l));  // the previous stage's exchange
        hidden_backward(l, here, other);
        stamp();
        const int swap = here;
        here = other;
        other = swap;
      }
      if (last >= 2) receive(here, width(0));
      first_backward(first, exchanged(here), kCols, kColumnBlock, s);
      stamp();
      advance_step_state(state, false, false, nullptr);
      if (c.partials_shared) ptx::cluster_arrive();  // this block is done with the step
    }
    // No block leaves while others may still write into it.
    if (c.partials_shared) {
      ptx::cluster_wait();
    } else {
      cluster.sync();
    }
    store_weights(static_cast<bf16*>(a.copies[state.step & 1]), static_cast<int>(a.steps & 1));
    store_first_state(first);
    if (rank == 0 && threadIdx.x == 0) {
      state.found_inf = 0;
      state.blocks_done = 0;
      *a.state = state;
    }
    if (rank == 0 && threadIdx.x == kThreads - 32) {  // block 0's last warp holds the sums
      a.metrics->loss_sum += loss_total;
      a.metrics->correct += hits_total;
    }
  }
};

#endif  // SPRINTNET_HAS_CLUSTERS

template <UpdateForm kUpdate, ActivationKind kAct, int kLogitTiles, bool kWideFirst>
__global__ void __launch_bounds__(kThreads, 1) cluster_epoch_kernel(const __grid_constant__ ClusterArgs args) {
#ifdef SPRINTNET_HAS_CLUSTERS
  extern __shared__ __align__(128) unsigned char smem[];
  Cluster<kUpdate, kAct, kLogitTiles, kWideFirst> k(args.a, args.c, args.partials, smem);
  k.train();
#else
  __trap();
#endif
}

using ClusterKernel = void (*)(ClusterArgs);

// The instantiation for an optimizer, activation, logit width and first-layer split (nullptr: an
// activation the kernel does not take).
template <UpdateForm kUpdate, int kLogitTiles, bool kWideFirst>
ClusterKernel kernel_for(ActivationKind activation) {
  return for_cluster_activation(activation, [](auto act) -> ClusterKernel {
    return cluster_epoch_kernel<kUpdate, decltype(act)::value, kLogitTiles, kWideFirst>;
  });
}

// wide_first: the layout splits the first layer 2 x 8 (a 113-128-wide first layer, at most 16 classes).
template <UpdateForm kUpdate>
ClusterKernel kernel_for(ActivationKind activation, int classes_pad, bool wide_first) {
  if (classes_pad > 16) return kernel_for<kUpdate, 8, false>(activation);
  if (wide_first) return kernel_for<kUpdate, 2, true>(activation);
  return kernel_for<kUpdate, 2, false>(activation);
}

ClusterKernel kernel_for(const FusedEpochArgs& args, const ClusterLayout& layout) {
  return for_update_form(args.optimizer, [&](auto form) {
    return kernel_for<decltype(form)::value>(args.activation, layout.classes_pad, layout.first_split);
  });
}

ClusterShape shape_of(std::int64_t shared_bytes) { return {kClusterCtas, kThreads, shared_bytes}; }

const ClusterProbe& cluster_probe(int device, std::int64_t shared_bytes) {
  return probe_cluster_kernel(device, kernel_for<UpdateForm::kAdam>(ActivationKind::kReLU, 64, false),
                              shape_of(shared_bytes), "the cluster kernel");
}

}  // namespace

const char* cluster_epoch_unavailable(int device, std::int64_t shared_bytes) {
  return cluster_probe(device, shared_bytes).why_not;
}

int cluster_epoch_active_clusters(int device, std::int64_t shared_bytes) {
  return active_clusters(cluster_probe(device, shared_bytes));
}

cudaError_t launch_cluster_epoch(const FusedEpochArgs& args, const ClusterLayout& layout, float* partials,
                                 cudaStream_t stream) {
  const NvtxRange range("cluster_epoch");
  // A null kernel (GELU or SiLU: fused_cluster_unsupported says so first) is refused.
  return launch_cluster_kernel(kernel_for(args, layout), shape_of(layout.bytes), stream, ClusterArgs{args, layout, partials});
}

}  // namespace sprintnet::cuda
