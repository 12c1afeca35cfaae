#pragma once
// Where the cluster kernel (cluster_epoch.cu, docs/FUSED.md "v4") keeps a small
// model in the shared memory of each of its 16 blocks, and whether a model fits.
// Plain arithmetic without CUDA headers: the host sizes the kernel's shared
// memory from it and CI tests it (tests/train/fused_fit_test.cpp).
//
// Every block holds, in bf16 unless said otherwise:
//   X[l]     every hidden layer's output, all 128 rows x all columns (each block computes its
//            8 columns and stores them into every block): the next layer's operand, stored by
//            blocks of 8 columns ([pad16(width) / 8][128][8], no padding), so a block's columns
//            are 2 contiguous KB
//   D        the backward's exchange buffer, alternating with X[L-2] (3+ layers), the same layout
//   X0       this block's input features of the batch (`group` of them)
//   W0       the first layer's weights on those features: every row, or (`first_split`) the
//            block's half of them
//   Wr[l]    hidden layer l's own 8 rows; Wc[l] the columns of W[l] the block's 8 columns of layer
//            l-1 meet in the input gradient, two copies by step parity
//   Wo       the output layer, replicated (two copies by step parity), with its fp32 master
//            weights and optimizer state (So: master, state 1, state 2), updated identically by
//            every block; without a hidden layer the first layer is the output layer and its
//            biases are replicated instead
//   dl       the logits' gradient
//   stage    (first_split) the next batch's bytes of the block's features, [128][group] uint8, landing
//            by cp.async during the first layer's backward: the exchange buffer that backward does not
//            read (free from the last hidden backward to the next step; X[H-1] or D by the parity of
//            the H hidden layers), or a region of its own with one hidden layer
//   and the exchange's mbarriers (one for each X[l] and D) and tokens, the step's labels, the next step's
//   sample indices, each row's loss and hit
//
// The first layer's product is split over the blocks by input features: block r takes features
// 64r..64r+63 against every neuron (16 x 1), or, where the first layer is 113-128 wide with at most
// 16 classes and the inputs a multiple of 16 (`first_split`, docs/FUSED.md v11a), feature group r / 2
// (`group` features, a multiple of 16: 112 of 784) against neuron half r % 2 (64 neurons), so a block's
// partial is 128 x 64 for 8 owners instead of 128 x 128 for 16, and each owner adds 7 partials instead
// of 13. Slot s (below) holds feature group s's partial (group s = block s in the 16 x 1 split).
// The fp32 partial products of the first layer go to the owners of their columns. With two or more
// hidden layers whose activation buffers X[1..] and D (free when a step starts) hold 16 x 4 KB, each
// block stores its partials straight into the owners' shared memory there (`partials_shared`: slot s,
// group s's partial of the owner's 8 columns, [128][8] fp32, at x[1] + 4 KB s; v9d). Otherwise they go through P in global memory
// ([16][128][ld_part], `partials_bytes`), read by the owners through L2, which measured faster than
// pulling them over DSMEM (bench/lab/cluster_probe.cu).
#include <algorithm>
#include <cstdint>

namespace sprintnet::cuda {

inline constexpr int kClusterCtas = 16;       // blocks in the cluster (non-portable size on Hopper)
inline constexpr int kClusterCols = 8;        // columns of each hidden layer a block owns
inline constexpr int kClusterRows = 128;      // batch rows (8 warps x 16)
inline constexpr int kClusterSlice = 64;      // input features of the first layer a block owns (16 x 1)
inline constexpr int kClusterHalf = 64;       // neurons of the first layer a block's partial covers (2 x 8)
inline constexpr int kClusterMaxLayers = 8;
inline constexpr int kClusterMaxWidth = kClusterCtas * kClusterCols;  // 128
inline constexpr int kClusterMaxClasses = 64;
inline constexpr int kClusterMaxInputs = kClusterCtas * kClusterSlice;  // 1024
inline constexpr std::int64_t kClusterSharedLimit = 227 * 1024;  // Hopper's per-block opt-in maximum

struct ClusterLayout {
  int layers = 0;             // Linear layers (hidden + output)
  int ld_x0 = 0, ld_w0 = 0;   // X0 [128][ld_x0], W0 [pad16(H0) or 64][ld_w0]
  int ld_part = 0;            // P [16][128][ld_part] fp32, in global memory
  int ld_wr[kClusterMaxLayers] = {};  // Wr[l] [8][ld_wr]
  int ld_wc[kClusterMaxLayers] = {};  // Wc[l] [2][8][ld_wc]
  int ld_wo = 0, classes_pad = 0;     // Wo [2][classes_pad][ld_wo]
  int ld_dl = 0;                      // dl [128][ld_dl]
  int out_state_stride = 0;           // So: 3 arrays of classes x hidden weights, then classes_pad biases
  bool first_split = false;           // the first layer split 2 x 8 (feature groups x neuron halves)
  int group = 0;                      // input features a block takes (64; 2 x 8: a multiple of 16)
  int slices = 0;                     // feature groups that are not empty (blocks with a first-layer part)
  bool partials_shared = false;       // the first layer's partials in the owners' X[1..] and D
  std::int64_t x[kClusterMaxLayers] = {}, d = 0, x0 = 0, w0 = 0, b0 = 0;
  std::int64_t wr[kClusterMaxLayers] = {}, br[kClusterMaxLayers] = {}, wc[kClusterMaxLayers] = {};
  std::int64_t stage = 0;  // first_split: the next batch's pixels (see above)
  std::int64_t wo = 0, bo = 0, out_state = 0, dl = 0, bars = 0, tokens = 0, labels = 0, next_samples = 0, row_loss = 0, row_hit = 0;
  std::int64_t bytes = 0;           // shared memory a block needs
  std::int64_t partials_bytes = 0;  // global memory for P
};

inline int cluster_pad16(int v) { return (v + 15) / 16 * 16; }

// The layout of a model with `inputs` features, hidden widths `hidden[0..count)` and `classes`
// outputs (count 0: softmax regression), its first layer split 16 x 1 or (`split_first`) 2 x 8.
// Only meaningful where the model's widths are at most 128.
inline ClusterLayout cluster_layout_of(int inputs, const int* hidden, int count, int classes, bool split_first) {
  ClusterLayout c;
  c.first_split = split_first;
  // 2 x 8: eight groups at most, each a whole number of 16-feature k-steps.
  c.group = split_first ? std::max(16, cluster_pad16((inputs + 7) / 8)) : kClusterSlice;
  c.layers = count + 1;
  std::int64_t at = 0;
  const auto take = [&](std::int64_t bytes) {
    const std::int64_t where = at;
    at = (at + bytes + 127) / 128 * 128;
    return where;
  };
  int widest = 0;
  for (int l = 0; l < count; ++l) widest = std::max(widest, hidden[l]);
  const std::int64_t x_bytes = std::int64_t{kClusterRows} * cluster_pad16(widest) * 2;
  const int first_out = count > 0 ? hidden[0] : classes;  // no hidden layer: the first is the output layer
  c.ld_part = cluster_pad16(first_out);
  c.partials_bytes = std::int64_t{kClusterCtas} * kClusterRows * c.ld_part * 4;
  for (int l = 0; l < count; ++l) c.x[l] = take(x_bytes);
  if (count >= 2) c.d = take(x_bytes);
  c.ld_x0 = c.group + 8;
  c.x0 = take(std::int64_t{kClusterRows} * c.ld_x0 * 2);
  c.ld_w0 = c.group + 8;
  c.w0 = take(std::int64_t{split_first ? kClusterHalf : cluster_pad16(first_out)} * c.ld_w0 * 2);
  c.b0 = take(kClusterCols * 4);
  for (int l = 1; l < count; ++l) {
    c.ld_wr[l] = cluster_pad16(hidden[l - 1]) + 8;
    c.wr[l] = take(std::int64_t{kClusterCols} * c.ld_wr[l] * 2);
    c.br[l] = take(kClusterCols * 4);
    c.ld_wc[l] = cluster_pad16(hidden[l]) + 8;
    c.wc[l] = take(std::int64_t{2} * kClusterCols * c.ld_wc[l] * 2);
  }
  c.classes_pad = cluster_pad16(classes);
  if (count > 0) {
    c.ld_wo = cluster_pad16(hidden[count - 1]) + 8;
    c.wo = take(std::int64_t{2} * c.classes_pad * c.ld_wo * 2);
    c.bo = take(std::int64_t{2} * c.classes_pad * 4);
    c.out_state_stride = classes * hidden[count - 1] + c.classes_pad;
    c.out_state = take(std::int64_t{3} * c.out_state_stride * 4);
  } else {
    // Softmax regression: every block keeps the classes' biases, with their master and state,
    // and updates them identically (4 arrays of classes_pad floats).
    c.bo = take(std::int64_t{4} * c.classes_pad * 4);
  }
  c.ld_dl = c.classes_pad + 8;
  c.dl = take(std::int64_t{kClusterRows} * c.ld_dl * 2);
  if (split_first) {
    // The gradients alternate between D and X[H-1] going down from D (cluster_epoch.cu's train): after the
    // H - 1 hidden backwards the first layer's reads D (H - 1 even) or X[H-1], and the other is free.
    c.stage = count >= 2 ? ((count - 1) % 2 == 0 ? c.x[count - 1] : c.d) : take(std::int64_t{kClusterRows} * c.group);
  }
  c.bars = take((kClusterMaxLayers + 1) * 8);  // one an exchanged buffer, then the partials'
  c.tokens = take(kClusterCtas * 16);  // the exchange's tokens from blocks that own no columns (never read)
  c.labels = take(kClusterRows * 4);
  c.next_samples = take(kClusterRows * 4);  // the next step's rows of the permutation, prefetched
  c.row_loss = take(kClusterRows * 8);
  c.row_hit = take(kClusterRows * 4);
  c.slices = (inputs + c.group - 1) / c.group;
  c.partials_shared = count >= 2 && count * x_bytes >= std::int64_t{kClusterCtas} * kClusterRows * kClusterCols * 4;
  c.bytes = at;
  return c;
}

// The layout the kernel runs: the first layer split 2 x 8 where it is 113-128 wide with at most 16
// classes (the instantiations the kernel has for it, kWideFirst), the inputs come in whole 16-byte
// pieces (its batch's copies) and that layout fits a block.
inline ClusterLayout cluster_layout(int inputs, const int* hidden, int count, int classes) {
  if (count >= 1 && cluster_pad16(hidden[0]) == kClusterMaxWidth && cluster_pad16(classes) <= 16 && inputs % 16 == 0) {
    const ClusterLayout split = cluster_layout_of(inputs, hidden, count, classes, true);
    if (split.bytes <= kClusterSharedLimit) return split;
  }
  return cluster_layout_of(inputs, hidden, count, classes, false);
}

}  // namespace sprintnet::cuda
