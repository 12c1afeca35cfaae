#pragma once
// What a block of the one-cluster kernels that split the batch's rows over their 16 blocks (the rows
// kernel, rows_epoch.cu; the quads kernel, quads_epoch.cu) knows and does alike: its place in the cluster
// and its lanes, the epoch's step bookkeeping, the profile's stamps, the phases of its mbarriers, the flat
// parameter state loaded when the epoch starts and stored when it ends, block 0's metrics warp, and the
// epoch's end. Each kernel's block derives from it and adds its stages.
//
// Layout is the kernel's shared-memory layout (byte offsets, in the kernel's parameters); this base reads
// its bars, row_loss and row_hit where it uses them, as the kernels did before: an offset copied into a
// register made the compiler rebuild the mbarriers' cluster addresses (~60 more PTX instructions a kernel).
#include <cuda_bf16.h>

#include <cstdint>

#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/fused/fragment_loads.cuh"
#include "sprintnet/ops/cuda/fused/fused_epoch.h"
#include "sprintnet/ops/cuda/fused/progress_record.cuh"
#include "sprintnet/ops/cuda/fused/ptx.cuh"
#include "sprintnet/ops/cuda/fused/row_loss.cuh"  // group_sum
#include "sprintnet/ops/cuda/fused/stage_stamps.cuh"

namespace sprintnet::cuda {

template <class Layout>
class OneClusterBlock {
 public:
  static constexpr int kBlocks = 16;
  static constexpr int kThreads = 256;
  // Block 0's last warp sums the metrics (add_metrics); its lane 0 holds the epoch's sums.
  static constexpr int kMetricsWarp = kThreads / 32 - 1;

 protected:
  __device__ OneClusterBlock(const FusedEpochArgs& args, const Layout& layout, unsigned char* shared, int r)
      : a(args),
        c(layout),
        smem(shared),
        rank(r),
        warp(static_cast<int>(threadIdx.x) >> 5),
        lane(fused::fragment_lane()),
        g(lane >> 2),
        t(lane & 3),
        stamps(stamp_region(args, r), stamp_capacity(args), stamps_here(args, r)) {}

  const FusedEpochArgs& a;
  const Layout& c;
  unsigned char* smem;
  int rank, warp, lane, g, t;  // g, t: the lane's row and column pair in an mma fragment
  StepState state;
  BlockScalars scalars;
  int rows = 0, last_rows = 0;  // this step's rows and the last step's
  std::int64_t first_step = 0;
  std::uint32_t phases = 0;  // bit id: the parity mbarrier id waits for next

  template <class T>
  __device__ T* at(std::int64_t offset) const {
    return reinterpret_cast<T*>(smem + offset);
  }
  __device__ const FusedLayer& layer(int l) const { return a.layers[l]; }
  __device__ std::uint32_t bar(int id) const { return ptx::shared_address(at<std::uint64_t>(c.bars) + id); }

  __device__ void stamp() { stamps.stamp(); }
  // Waits for mbarrier `id`'s next phase, `bytes` of transfers expected on it.
  __device__ void wait(int id, std::uint32_t bytes) {
    if (threadIdx.x == 0) ptx::mbarrier_expect_bytes(bar(id), bytes);
    ptx::mbarrier_wait_cluster(bar(id), (phases >> id) & 1u);
    phases ^= 1u << id;
  }

  __device__ std::int64_t rows_of(std::int64_t s) const {
    const std::int64_t left = a.samples - s * a.batch;
    return left < a.batch ? left : a.batch;
  }
  __device__ std::int64_t sample(std::int64_t i) const { return a.order != nullptr ? a.order[i] : i; }

  // ---- parameters: their flat index, loaded when the epoch starts and stored when it ends (v: Adam's
  // second moment; the SGD forms' overloads leave it out).
  __device__ std::int64_t index(const FusedLayer& L, int o, int i) const {
    return L.weight_offset + static_cast<std::int64_t>(o) * L.in_pad + i;
  }
  __device__ void load_state(std::int64_t k, bool valid, float& p, float& m) const {
    const FlatOptimizerArgs& o = a.optimizer;
    p = valid ? o.master[k] : 0.0f;
    m = valid && o.state1 != nullptr ? o.state1[k] : 0.0f;
  }
  __device__ void load_state(std::int64_t k, bool valid, float& p, float& m, float& v) const {
    load_state(k, valid, p, m);
    v = valid && a.optimizer.state2 != nullptr ? a.optimizer.state2[k] : 0.0f;
  }
  __device__ void store_state(std::int64_t k, float p, float m) const {
    const FlatOptimizerArgs& o = a.optimizer;
    o.master[k] = p;
    if (o.state1 != nullptr) o.state1[k] = m;
  }
  __device__ void store_state(std::int64_t k, float p, float m, float v) const {
    store_state(k, p, m);
    if (a.optimizer.state2 != nullptr) a.optimizer.state2[k] = v;
  }

  // Block 0's metrics warp: the last step's losses and hits (stored into block 0 at c.row_loss and
  // c.row_hit, [2 parities][batch rows], before the cluster barrier just passed) added to the epoch's sums
  // in row order, and the progress record.
  __device__ void add_metrics(int batch_rows, int classes) {
    if (rank != 0 || warp != kMetricsWarp || state.step == first_step) return;
    const int parity = static_cast<int>((state.step - 1 - first_step) & 1);
    double loss = 0.0, hits = 0.0;
    for (int r = lane; r < last_rows; r += 32) {
      loss += at<double>(c.row_loss)[parity * batch_rows + r];
      hits += at<int>(c.row_hit)[parity * batch_rows + r];
    }
    loss = fused::group_sum<32>(loss);
    hits = fused::group_sum<32>(hits);
    if (lane != 0) return;
    const double weight = 1.0 / static_cast<double>(a.loss == FusedLoss::kMse ? last_rows * classes : last_rows);
    loss_total += weight * loss;
    hits_total += static_cast<std::int64_t>(hits);
    fused::write_progress(a.progress, state.step - first_step, loss_total);
  }
  // The epoch's end, after the last step's cluster arrival: the last metrics, the last new values (on
  // mbarrier `tiles_bar`, block.tile_bytes() of them) and a cluster barrier before any block leaves (the
  // others may still send to it), then the parameters stored (block.store) and the epoch published. `block`
  // is the derived kernel's block, this one.
  template <class Block>
  __device__ void end_epoch(Block& block, int tiles_bar) {
    ptx::cluster_wait();
    block.add_metrics();
    if (a.steps > 0) wait(tiles_bar, block.tile_bytes());
    __syncthreads();
    ptx::cluster_arrive();
    ptx::cluster_wait();
    block.store(static_cast<__nv_bfloat16*>(a.copies[state.step & 1]));
    publish_epoch();
  }
  // After the epoch's last step: the step state and the metrics' sums back to the host's records.
  __device__ void publish_epoch() {
    if (rank == 0 && threadIdx.x == 0) {
      state.found_inf = 0;
      state.blocks_done = 0;
      *a.state = state;
    }
    if (rank == 0 && threadIdx.x == kMetricsWarp * 32) {
      a.metrics->loss_sum += loss_total;
      a.metrics->correct += hits_total;
    }
  }

 private:
  // The profile's stamps: one block's (stage_clock_block), or every block's into its own region (-1: the
  // timeline, train/stage_timeline.h).
  __device__ static int stamp_capacity(const FusedEpochArgs& args) {
    return args.stage_clock_block < 0 ? args.stage_clock_capacity / kBlocks : args.stage_clock_capacity;
  }
  __device__ static std::uint64_t* stamp_region(const FusedEpochArgs& args, int r) {
    return args.stage_clock_block < 0 && args.stage_clock != nullptr ? args.stage_clock + r * stamp_capacity(args)
                                                                    : args.stage_clock;
  }
  __device__ static bool stamps_here(const FusedEpochArgs& args, int r) {
    return (args.stage_clock_block < 0 || r == args.stage_clock_block) && threadIdx.x == 0;
  }

  StageStamps stamps;
  double loss_total = 0.0;  // the metrics warp's lane 0 of block 0: the epoch's sums
  std::int64_t hits_total = 0;
};

}  // namespace sprintnet::cuda
