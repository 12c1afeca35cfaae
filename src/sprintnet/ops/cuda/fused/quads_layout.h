#pragma once
// Where the quads kernel (quads_epoch.cu, docs/FUSED.md "v18: the quads kernel") keeps a model with two
// hidden layers of at most 256 in the shared memory of each of its 16 blocks. Plain arithmetic without
// CUDA headers: the host sizes the kernel's shared memory from it and CI tests it
// (tests/train/fused_fit_test.cpp).
//
// Block b = 4q + j of the cluster belongs to quad q, which owns the batch's rows 32q..32q+31 for every
// hidden and output layer, and holds neuron quarter j (64 of 256) of each hidden layer. It keeps, bf16
// unless said otherwise, rows `ld` elements apart:
//   w1        the first layer's part: quarter j's neurons x feature group q, [64][group + 8]
//   x         the batch's features of group q, every row, as the data set's bytes, [128][group] uint8
//   slots     the first layer's partial sums of the quad's rows from each feature group, [4][32][64] fp32;
//             then the second layer's input-gradient partial sums from each quarter (same shape); then half of
//             X's rows normalised to bf16 for the first layer's weight gradient, [64][group + 8] (aliased: each is
//             read before the next arrives; the next batch's bytes land in x once that gradient is done)
//   w2        the second layer's quarter j rows, every column, [64][264]
//   wo        the output layer's columns of quarter j, [16 classes][72]
//   a1        the quad's rows of A1, all 256 columns (gathered from the quad), [32][264]
//   a2, g2    the quad's rows of A2 and of G2, quarter j, [32][72]
//   logits    the quad's rows' partial logits from each quarter, [4][32][16] fp32
//   d1        G1 of every row, quarter j (gathered from the blocks of quarter j), [128][72]
//   g2_op     the tile's operands: G2 of every row, quarter j, [128][72]; A1 of every row, quarter q
//   a1_op       (the block steps the second layer's 64 x 64 tile (rows of quarter j, columns of quarter q))
//   a2_cols   A2 of every row, the 16 output-layer columns the block steps (64j + 16q..), [128][24]
//   dl        dlogits of every row, [128][24]
//   biases    b1's and b2's quarter j and the output layer's, fp32 (their bf16 values), and their fp32
//             master and state (every block of quarter j steps them alike from the same sums)
//   and the quad's labels, the next step's sample indices, block 0's rows' losses and hits (two steps, by
//   parity), the mbarriers.
#include <algorithm>
#include <cstdint>

namespace sprintnet::cuda {

inline constexpr int kQuadsCtas = 16;
inline constexpr int kQuadsBatch = 128;   // rows of a step at most: 32 a quad
inline constexpr int kQuadsOwn = 32;
inline constexpr int kQuadsWidth = 256;   // each hidden layer, padded with zeros
inline constexpr int kQuadsQuarter = 64;
inline constexpr int kQuadsHidden = 2;    // exactly two hidden layers
inline constexpr int kQuadsMaxClasses = 16;
inline constexpr int kQuadsMaxInputs = 896;  // 4 groups of at most 224 features (7 feature tiles a warp pair)
inline constexpr int kQuadsLdWide = kQuadsWidth + 8;     // 264
inline constexpr int kQuadsLdQuarter = kQuadsQuarter + 8;  // 72
inline constexpr int kQuadsLdClasses = kQuadsMaxClasses + 8;  // 24
inline constexpr int kQuadsBiases = 2 * kQuadsQuarter + kQuadsMaxClasses;  // b1's and b2's quarter, bo
inline constexpr std::int64_t kQuadsSharedLimit = 227 * 1024;

struct QuadsLayout {
  int group = 0;  // features a block's part covers (a multiple of 16)
  std::int64_t w1 = 0, x = 0, slots = 0, w2 = 0, wo = 0, a1 = 0, a2 = 0, g2 = 0, logits = 0, d1 = 0, g2_op = 0,
               a1_op = 0, a2_cols = 0, dl = 0, bias = 0, bias_state = 0, labels = 0, next = 0, row_loss = 0,
               row_hit = 0, bars = 0;
  std::int64_t bytes = 0;
};

inline int quads_pad16(int v) { return (v + 15) / 16 * 16; }

// The layout of a model with `inputs` features (a multiple of 16, at most kQuadsMaxInputs).
inline QuadsLayout quads_layout(int inputs) {
  QuadsLayout c;
  c.group = std::max(16, quads_pad16((inputs + 3) / 4));
  std::int64_t at = 0;
  const auto take = [&](std::int64_t bytes) {
    const std::int64_t where = at;
    at = (at + bytes + 127) / 128 * 128;
    return where;
  };
  const std::int64_t rows = kQuadsBatch, own = kQuadsOwn, quarter = kQuadsQuarter;
  c.w1 = take(quarter * (c.group + 8) * 2);
  c.x = take(rows * c.group);
  c.slots = take(std::max(std::int64_t{4} * own * quarter * 4, std::int64_t{64} * (c.group + 8) * 2));
  c.w2 = take(quarter * kQuadsLdWide * 2);
  c.wo = take(std::int64_t{kQuadsMaxClasses} * kQuadsLdQuarter * 2);
  c.a1 = take(own * kQuadsLdWide * 2);
  c.a2 = take(own * kQuadsLdQuarter * 2);
  c.g2 = take(own * kQuadsLdQuarter * 2);
  c.logits = take(std::int64_t{4} * own * kQuadsMaxClasses * 4);
  c.d1 = take(rows * kQuadsLdQuarter * 2);
  c.g2_op = take(rows * kQuadsLdQuarter * 2);
  c.a1_op = take(rows * kQuadsLdQuarter * 2);
  c.a2_cols = take(rows * kQuadsLdClasses * 2);
  c.dl = take(rows * kQuadsLdClasses * 2);
  c.bias = take(kQuadsBiases * 4);
  c.bias_state = take(2 * kQuadsBiases * 4);  // master and momentum (SGD only)
  c.labels = take(own * 4);
  c.next = take(rows * 4);
  c.row_loss = take(2 * rows * 8);
  c.row_hit = take(2 * rows * 4);
  c.bars = take(8 * 8);
  c.bytes = at;
  return c;
}

}  // namespace sprintnet::cuda
