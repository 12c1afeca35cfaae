#pragma once
// Where the rows kernel (rows_epoch.cu, docs/FUSED.md "v13") keeps a model in the shared memory of
// each of its 16 blocks. Plain arithmetic without CUDA headers: the host sizes the kernel's shared
// memory from it and CI tests it (tests/train/fused_fit_test.cpp).
//
// The kernel splits the batch's rows over the blocks (block r owns rows 8r..8r+7) for every hidden
// and output layer, and the first layer 2 x 8 as the cluster kernel's v11a (block r: feature group
// r / 2 against neuron half r % 2). Every block holds, in bf16 unless said otherwise:
//   W0        the first layer's weights of its half and group, [64][group]
//   X0        the batch's features of its group, every row, [128][group]
//             (W0, X0 and D1 in warpgroup_mma.cuh's canonical layout of 8 x 8 core matrices: the
//             kernel's wgmma products read them through descriptors)
//   P         the first layer's partials of its 8 rows from each group and half, [2 groups][8][64] fp32;
//             once summed, the own rows' activations and gradients (A1..AH, G1..GH, [8][136] each) and
//             the next batch's bytes ([128][group] uint8, landing by cp.async) alias it
//   W1..      every hidden-to-hidden layer's weights, replicated, in 32 x 32 tiles ([ti * 4 + tj][32][40]),
//             tile r stepped by block r; Wo, replicated, by 8-column blocks ([16][16 classes][8]), block r
//             steps block r; the biases, replicated (fp32), and the master and state of those a block steps
//   D1        the first layer's gradient of every row in the block's neuron half, [128][64]
//   operands  each hidden-to-hidden layer's tile operands (its output gradient's 32 columns of the
//             block's tile row, its input's 32 of the tile column, every row, [128][32] with the
//             16-byte pieces swizzled), dlogits of every row ([128][24]), the last hidden layer's 8
//             columns the block steps in Wo ([128][8])
//   and the step's labels of the own rows, the next step's sample indices, block 0's rows' losses and
//   hits (two steps, by parity), the biases' partial column sums, the mbarriers
#include <algorithm>
#include <cstdint>

namespace sprintnet::cuda {

inline constexpr int kRowsCtas = 16;
inline constexpr int kRowsBatch = 128;   // rows of a step at most: 8 a block
inline constexpr int kRowsOwn = kRowsBatch / kRowsCtas;
inline constexpr int kRowsWidth = 128;   // every hidden layer, padded with zeros
inline constexpr int kRowsHalf = 64;     // the first layer's neurons a block's partial covers
inline constexpr int kRowsMaxHidden = 3;
inline constexpr int kRowsMaxClasses = 16;
inline constexpr int kRowsMaxInputs = 1024;  // 8 groups of at most 128 features
inline constexpr int kRowsLocalLd = kRowsWidth + 8;  // the own rows' buffers, [8][136]
inline constexpr int kRowsTileLd = 40;               // a weight tile's rows (80 bytes)
inline constexpr std::int64_t kRowsTileBytes = 32 * kRowsTileLd * 2;
inline constexpr std::int64_t kRowsSharedLimit = 227 * 1024;

struct RowsLayout {
  int hidden = 0;          // hidden layers H (1-3); H - 1 hidden-to-hidden layers own tiles
  int group = 0, groups = 0;
  std::int64_t w0 = 0, x0 = 0, partials = 0, local = 0, stage = 0, tiles = 0, wo = 0, bias = 0, bias_state = 0,
               dl = 0, d1 = 0, operands = 0, out_cols = 0, row_loss = 0, row_hit = 0, labels = 0, next = 0, sums = 0,
               bars = 0;
  std::int64_t bytes = 0;
  // Global memory for what each block multicasts a step, [16][own_bytes]: its new values (from 0), its
  // rows of the tile operands (from own_operands: [layer][gradient, input][key][8 rows][64 bytes]), its
  // dlogits rows (from own_dl: 8 x 48 bytes, 512 reserved), its rows of the last hidden layer's columns
  // each block steps in Wo (from own_cols: [16 blocks][8 rows][8]) and its rows of G1 (from own_g1: [2 halves]
  // [8 rows][64] in D1's canonical layout, 1 KB a half) and its first-layer partials for each row owner (from
  // own_partials: [16 owners][8 rows][64] fp32, the owner's slot layout).
  std::int64_t own_bytes = 0, own_operands = 0, own_dl = 0, own_cols = 0, own_g1 = 0, own_partials = 0,
               scratch_bytes = 0;
};

inline int rows_pad16(int v) { return (v + 15) / 16 * 16; }

// The layout of a model with `inputs` features (a multiple of 16, at most 1024) and `hidden` hidden
// layers (1-3) of at most 128.
inline RowsLayout rows_layout(int inputs, int hidden) {
  RowsLayout c;
  c.hidden = hidden;
  c.group = std::max(16, rows_pad16((inputs + 7) / 8));
  c.groups = (inputs + c.group - 1) / c.group;
  std::int64_t at = 0;
  const auto take = [&](std::int64_t bytes) {
    const std::int64_t where = at;
    at = (at + bytes + 127) / 128 * 128;
    return where;
  };
  const int tiled = hidden - 1;
  c.w0 = take(std::int64_t{kRowsHalf} * c.group * 2);
  c.x0 = take(std::int64_t{kRowsBatch} * c.group * 2);
  const std::int64_t local_bytes = std::int64_t{2} * hidden * kRowsOwn * kRowsLocalLd * 2;
  const std::int64_t partial_bytes = std::int64_t{2} * c.groups * kRowsOwn * kRowsHalf * 4;
  c.partials = take(std::max(partial_bytes, local_bytes + std::int64_t{kRowsBatch} * c.group));
  c.local = c.partials;
  c.stage = c.partials + local_bytes;
  c.tiles = take(tiled * 16 * kRowsTileBytes);
  c.wo = take(std::int64_t{16} * kRowsMaxClasses * 8 * 2);
  c.bias = take((std::int64_t{kRowsWidth} * hidden + kRowsMaxClasses) * 4);  // b0, b1.., bo
  c.bias_state = take(std::int64_t{3} * (kRowsHalf + 32 * tiled + kRowsMaxClasses) * 4);
  c.dl = take(std::int64_t{kRowsBatch} * (kRowsMaxClasses + 8) * 2);
  c.d1 = take(std::int64_t{kRowsBatch} * kRowsHalf * 2);
  c.operands = take(std::int64_t{2} * tiled * kRowsBatch * 32 * 2);
  c.out_cols = take(std::int64_t{kRowsBatch} * 8 * 2);
  c.row_loss = take(std::int64_t{2} * kRowsBatch * 8);
  c.row_hit = take(std::int64_t{2} * kRowsBatch * 4);
  c.labels = take(kRowsOwn * 4);
  c.next = take(kRowsBatch * 4);
  c.sums = take(256 * 4);  // the biases' column sums, a part a thread
  c.bars = take(4 * 8);
  c.bytes = at;
  // A block's new values a step: its tiles, its 8 columns of Wo, the biases it steps (b0's half: 64,
  // a tile row's 32 of each hidden-to-hidden layer, Wo's 16).
  c.own_operands = tiled * kRowsTileBytes + kRowsMaxClasses * 8 * 2 + (kRowsHalf + 32 * tiled + kRowsMaxClasses) * 4;
  c.own_operands = (c.own_operands + 127) / 128 * 128;
  c.own_dl = c.own_operands + std::int64_t{tiled} * 2 * 4 * kRowsOwn * 64;
  c.own_cols = c.own_dl + 512;
  c.own_g1 = c.own_cols + kRowsCtas * kRowsOwn * 16;
  c.own_partials = c.own_g1 + 2 * kRowsOwn * kRowsHalf * 2;
  c.own_bytes = c.own_partials + kRowsCtas * kRowsOwn * kRowsHalf * 4;
  c.scratch_bytes = kRowsCtas * c.own_bytes;
  return c;
}

}  // namespace sprintnet::cuda
