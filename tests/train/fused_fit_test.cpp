// Which models the fused engine takes, and the engine a GPU run resolves to:
// pure arithmetic on the config and the GPU's L2 size, tested without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sprintnet/ops/cuda/fused/cluster_layout.h"
#include "sprintnet/train/fused_fit.h"
#include "sprintnet/train/trainer.h"
#include "support/error_message.h"

namespace sprintnet::train {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kH100L2 = 50 << 20;

nn::MlpSpec mlp(std::vector<std::int64_t> hidden, std::int64_t outputs = 10) {
  nn::MlpSpec spec;
  spec.hidden = std::move(hidden);
  spec.outputs = outputs;
  return spec;
}

TEST(FusedFit, TheFootprintCountsPaddedParametersStateCopiesAndBatchBuffers) {
  OptimConfig sgd;  // momentum 0.9: one state buffer
  // 784-10 softmax regression: 10 rows of 784 weights and the bias, padded to 800, end at 8000,
  // rounded to 128 elements: 8064; 4 + 4 + 2 * 2 bytes each (bf16 keeps two copies).
  const FusedFootprint f = fused_footprint(mlp({}), "bf16", sgd, 128, 1000);
  EXPECT_EQ(f.params, 8064);
  // Batch buffers: 1024 rows (1000 rounded to 32) x (2 gathered inputs x 800 + dlogits x 16), 2 bytes.
  EXPECT_EQ(f.bytes, 8064 * 12 + 1024 * (2 * 800 + 16) * 2);
  OptimConfig adam;
  adam.type = "adam";
  EXPECT_EQ(fused_footprint(mlp({}), "bf16", adam, 128, 1000).bytes - f.bytes, 8064 * 4);
  // fp16 keeps one copy and fp32 gradients: 2 bytes more a parameter than bf16.
  EXPECT_EQ(fused_footprint(mlp({}), "fp16", sgd, 128, 1000).bytes - f.bytes, 8064 * 2);
}

TEST(FusedFit, ModelsThatFitAreTakenAndTheRestNamedWithLimitAndNeed) {
  OptimConfig sgd;
  EXPECT_EQ(fused_unsupported(mlp({784, 784, 784}), "bf16", sgd, 128, 1000, kH100L2), std::nullopt);
  EXPECT_EQ(fused_unsupported(mlp({1024, 1024, 1024}), "bf16", sgd, 128, 1000, kH100L2), std::nullopt);
  const auto too_big = fused_unsupported(mlp({4096, 4096, 4096}), "bf16", sgd, 128, 1000, kH100L2);
  ASSERT_TRUE(too_big.has_value());
  EXPECT_THAT(*too_big, HasSubstr("MiB resident"));
  EXPECT_THAT(*too_big, HasSubstr("50.0 MiB of L2"));
  EXPECT_THAT(fused_unsupported(mlp({256}, 100), "bf16", sgd, 128, 1000, kH100L2).value_or(""),
              HasSubstr("100 classes"));
  EXPECT_THAT(fused_unsupported(mlp({8, 8, 8, 8, 8, 8, 8, 8}), "bf16", sgd, 128, 1000, kH100L2).value_or(""),
              HasSubstr("9 layers"));
  EXPECT_THAT(fused_unsupported(mlp({256}), "fp32", sgd, 128, 1000, kH100L2).value_or(""),
              HasSubstr("device.precision = \"fp32\""));
}

nn::MlpSpec with_activation(nn::MlpSpec spec, Activation activation) {
  spec.activation = activation;
  return spec;
}

TEST(FusedFit, TheClusterKernelTakesSmallBf16ModelsAndNamesWhyNotForTheRest) {
  EXPECT_EQ(fused_cluster_unsupported(mlp({128, 128, 128}), "bf16", 128), std::nullopt);
  EXPECT_EQ(fused_cluster_unsupported(mlp({64, 48}), "bf16", 100), std::nullopt);
  EXPECT_EQ(fused_cluster_unsupported(with_activation(mlp({100}), Activation::kTanh), "bf16", 128), std::nullopt);
  EXPECT_THAT(fused_cluster_unsupported(mlp({256, 256}), "bf16", 128).value_or(""), HasSubstr("a hidden layer of 256"));
  EXPECT_THAT(fused_cluster_unsupported(mlp({128}), "fp16", 128).value_or(""), HasSubstr("\"fp16\""));
  EXPECT_THAT(fused_cluster_unsupported(mlp({128}), "bf16", 256).value_or(""), HasSubstr("a batch of 256"));
  EXPECT_EQ(fused_cluster_unsupported(mlp({}), "bf16", 128), std::nullopt);  // softmax regression
  EXPECT_THAT(fused_cluster_unsupported(with_activation(mlp({128}), Activation::kGELU), "bf16", 128).value_or(""),
              HasSubstr("GELU or SiLU"));
  EXPECT_THAT(fused_cluster_unsupported(mlp({128}, 65), "bf16", 128).value_or(""), HasSubstr("65 classes"));
  // Every activation buffer is as wide as the widest layer: six 128-wide ones do not fit a block.
  EXPECT_THAT(fused_cluster_unsupported(mlp({128, 96, 64, 40, 24, 16}), "bf16", 128).value_or(""),
              HasSubstr("KiB of shared memory a block"));
  EXPECT_EQ(fused_cluster_unsupported(mlp({96, 64, 40, 24, 16}), "bf16", 128), std::nullopt);
  nn::MlpSpec odd = mlp({128});
  odd.inputs = 785;
  EXPECT_THAT(fused_cluster_unsupported(odd, "bf16", 128).value_or(""), HasSubstr("785 input features"));
}

TEST(FusedFit, TheRowsKernelTakesOneToThreeNarrowHiddenLayersAndNamesWhyNotForTheRest) {
  EXPECT_EQ(fused_rows_unsupported(mlp({128, 128, 128}), "bf16", 128), std::nullopt);
  EXPECT_EQ(fused_rows_unsupported(mlp({64, 48}), "bf16", 100), std::nullopt);
  EXPECT_EQ(fused_rows_unsupported(mlp({128}), "bf16", 128), std::nullopt);
  EXPECT_EQ(fused_rows_unsupported(with_activation(mlp({100}), Activation::kSigmoid), "bf16", 128), std::nullopt);
  EXPECT_THAT(fused_rows_unsupported(mlp({}), "bf16", 128).value_or(""), HasSubstr("0 hidden layers"));
  EXPECT_THAT(fused_rows_unsupported(mlp({128, 128, 128, 128}), "bf16", 128).value_or(""), HasSubstr("4 hidden layers"));
  EXPECT_THAT(fused_rows_unsupported(mlp({129}), "bf16", 128).value_or(""), HasSubstr("a hidden layer of 129"));
  EXPECT_THAT(fused_rows_unsupported(mlp({128}), "fp16", 128).value_or(""), HasSubstr("\"fp16\""));
  EXPECT_THAT(fused_rows_unsupported(mlp({128}), "bf16", 256).value_or(""), HasSubstr("a batch of 256"));
  EXPECT_THAT(fused_rows_unsupported(mlp({128}, 17), "bf16", 128).value_or(""), HasSubstr("17 classes"));
  EXPECT_THAT(fused_rows_unsupported(with_activation(mlp({128}), Activation::kSiLU), "bf16", 128).value_or(""),
              HasSubstr("GELU or SiLU"));
  nn::MlpSpec odd = mlp({128});
  odd.inputs = 792;  // a multiple of 8, not of 16: the batch comes in 16-byte pieces
  EXPECT_THAT(fused_rows_unsupported(odd, "bf16", 128).value_or(""), HasSubstr("792 input features"));
  odd.inputs = 1040;
  EXPECT_THAT(fused_rows_unsupported(odd, "bf16", 128).value_or(""), HasSubstr("1040 input features"));
}

// The quads kernel's limits (fused_quads_unsupported), each named.
TEST(FusedFit, TheQuadsKernelNamesWhatItDoesNotTake) {
  const OptimConfig sgd;
  EXPECT_FALSE(fused_quads_unsupported(mlp({256, 256}), "bf16", sgd, 128).has_value());
  EXPECT_FALSE(fused_quads_unsupported(mlp({64, 48}), "bf16", sgd, 100).has_value());
  EXPECT_THAT(fused_quads_unsupported(mlp({256, 256}), "fp16", sgd, 128).value_or(""), HasSubstr("bf16"));
  EXPECT_THAT(fused_quads_unsupported(mlp({256}), "bf16", sgd, 128).value_or(""), HasSubstr("1 hidden layers"));
  EXPECT_THAT(fused_quads_unsupported(mlp({256, 256, 256}), "bf16", sgd, 128).value_or(""), HasSubstr("3 hidden layers"));
  EXPECT_THAT(fused_quads_unsupported(mlp({256, 384}), "bf16", sgd, 128).value_or(""), HasSubstr("a hidden layer of 384"));
  EXPECT_THAT(fused_quads_unsupported(mlp({256, 256}), "bf16", sgd, 256).value_or(""), HasSubstr("a batch of 256"));
  EXPECT_THAT(fused_quads_unsupported(mlp({256, 256}, 30), "bf16", sgd, 128).value_or(""), HasSubstr("30 classes"));
  EXPECT_THAT(fused_quads_unsupported(with_activation(mlp({256, 256}), Activation::kSiLU), "bf16", sgd, 128).value_or(""),
              HasSubstr("GELU or SiLU"));
  OptimConfig adam;
  adam.type = "adamw";
  EXPECT_THAT(fused_quads_unsupported(mlp({256, 256}), "bf16", adam, 128).value_or(""), HasSubstr("optim.type = \"adamw\""));
  nn::MlpSpec odd = mlp({256, 256});
  odd.inputs = 792;
  EXPECT_THAT(fused_quads_unsupported(odd, "bf16", sgd, 128).value_or(""), HasSubstr("792 input features"));
  odd.inputs = 912;
  EXPECT_THAT(fused_quads_unsupported(odd, "bf16", sgd, 128).value_or(""), HasSubstr("912 input features"));
  odd.inputs = 896;  // within the limit on features, over the shared memory: named too
  EXPECT_THAT(fused_quads_unsupported(odd, "bf16", sgd, 128).value_or(""), HasSubstr("KiB of shared memory a block"));
}

// The quads kernel's layout (quads_layout.h): the default model's fits a block, its regions do not
// overlap, and the slots hold half of X's rows in bf16 as well as the partial sums.
TEST(FusedFit, TheQuadsLayoutFitsABlockAndKeepsItsBuffersApart) {
  using namespace cuda;
  for (const int inputs : {16, 256, 784}) {
    SCOPED_TRACE(testing::Message() << inputs << " inputs");
    const QuadsLayout c = quads_layout(inputs);
    EXPECT_LE(c.bytes, kQuadsSharedLimit);
    EXPECT_EQ(c.group % 16, 0);
    EXPECT_GE(4 * c.group, inputs);
    EXPECT_LE(c.group, 8 * 4 * 7);  // the first layer's gradient: 7 feature tiles a warp pair
    EXPECT_GE(c.w2 - c.slots, std::int64_t{64} * (c.group + 8) * 2);  // half of X's rows in bf16
    EXPECT_GE(c.w2 - c.slots, std::int64_t{4} * kQuadsOwn * kQuadsQuarter * 4);
    const std::vector<std::int64_t> starts = {c.w1,   c.x,       c.slots,  c.w2,   c.wo,         c.a1,   c.a2,
                                              c.g2,   c.logits,  c.d1,     c.g2_op, c.a1_op,     c.a2_cols, c.dl,
                                              c.bias, c.bias_state, c.labels, c.next, c.row_loss, c.row_hit, c.bars,
                                              c.bytes};
    for (std::size_t i = 0; i + 1 < starts.size(); ++i) EXPECT_LT(starts[i], starts[i + 1]) << "region " << i;
    for (const std::int64_t start : starts) EXPECT_EQ(start % 128, 0);
  }
  EXPECT_EQ(quads_layout(784).group, 208);
  EXPECT_EQ(quads_layout(784).bytes / 1024, 225);
}

// The rows kernel's layout (rows_layout.h): it fits a block for every depth it takes at the widest
// inputs, its aliases stay inside the partials' region, and its regions do not overlap.
TEST(FusedFit, TheRowsLayoutFitsABlockAndKeepsItsBuffersApart) {
  using namespace cuda;
  for (const int inputs : {16, 784, 1024}) {
    for (int hidden = 1; hidden <= kRowsMaxHidden; ++hidden) {
      const RowsLayout c = rows_layout(inputs, hidden);
      SCOPED_TRACE(testing::Message() << inputs << " inputs, " << hidden << " hidden layers");
      // 1024 inputs (8 groups of 128) with three hidden layers take 232 KiB: refused, naming it.
      if (inputs == 1024 && hidden == 3) {
        nn::MlpSpec wide = mlp({128, 128, 128});
        wide.inputs = inputs;
        EXPECT_GT(c.bytes, kRowsSharedLimit);
        EXPECT_THAT(fused_rows_unsupported(wide, "bf16", 128).value_or(""), HasSubstr("KiB of shared memory a block"));
      } else {
        EXPECT_LE(c.bytes, kRowsSharedLimit);
      }
      EXPECT_EQ(c.group % 16, 0);
      EXPECT_LE(c.group, 128);
      EXPECT_LE(c.groups, 8);  // two blocks a group: at most the 16 of the cluster
      EXPECT_GE(c.groups * c.group, inputs);
      // The own rows' 2H buffers, then the next batch's bytes, inside the partials' region.
      const std::int64_t partials_end = c.tiles;
      EXPECT_EQ(c.stage, c.local + 2 * hidden * kRowsOwn * kRowsLocalLd * 2);
      EXPECT_LE(c.stage + std::int64_t{kRowsBatch} * c.group, partials_end);
      EXPECT_LE(c.partials + 2 * c.groups * kRowsOwn * kRowsHalf * 4, partials_end);
      const std::vector<std::int64_t> starts = {c.w0, c.x0, c.partials, c.tiles, c.wo, c.bias, c.bias_state, c.dl,
                                                c.d1, c.operands, c.out_cols, c.row_loss, c.row_hit, c.labels, c.next,
                                                c.sums, c.bars, c.bytes};
      for (std::size_t i = 0; i + 1 < starts.size(); ++i) EXPECT_LE(starts[i], starts[i + 1]) << "region " << i;
      EXPECT_EQ(c.tiles + (hidden - 1) * 16 * kRowsTileBytes, c.wo);  // tiles only where there are tiled layers
      // A block's multicast region: new values, then the tile operands' slices, dlogits' rows (8 x 48
      // bytes), the last hidden layer's columns for each block, the own rows of G1 (both halves), the
      // partials for each row owner.
      EXPECT_LE(c.own_operands, c.own_dl);
      EXPECT_EQ(c.own_dl - c.own_operands, (hidden - 1) * 2 * 4 * kRowsOwn * 64);
      EXPECT_GE(c.own_cols - c.own_dl, kRowsOwn * (kRowsMaxClasses + 8) * 2);
      EXPECT_EQ(c.own_g1, c.own_cols + kRowsCtas * kRowsOwn * 16);
      EXPECT_EQ(c.own_g1 % 16, 0);  // a bulk copy's source
      EXPECT_EQ(c.own_partials, c.own_g1 + 2 * kRowsOwn * kRowsHalf * 2);
      EXPECT_EQ(c.own_bytes, c.own_partials + kRowsCtas * kRowsOwn * kRowsHalf * 4);
      EXPECT_EQ(c.own_bytes % 128, 0);
      EXPECT_EQ(c.scratch_bytes, kRowsCtas * c.own_bytes);
    }
  }
  // 784-128-128-128-10, the model it was built for: 218 KiB a block.
  EXPECT_EQ(rows_layout(784, 3).group, 112);
  EXPECT_EQ(rows_layout(784, 3).groups, 7);
  EXPECT_EQ(rows_layout(784, 3).bytes / 1024, 218);
}

TEST(FusedFit, TheSplitKernelTakesItsTwoShapesAndNamesWhyNotForTheRest) {
  const nn::MlpSpec wide = mlp({784, 784, 784});
  EXPECT_EQ(fused_split_unsupported(wide, "bf16", 128), std::nullopt);
  EXPECT_EQ(fused_split_unsupported(with_activation(wide, Activation::kTanh), "bf16", 128), std::nullopt);
  nn::MlpSpec no_bias = wide;
  no_bias.bias = false;
  EXPECT_EQ(fused_split_unsupported(no_bias, "bf16", 128), std::nullopt);
  EXPECT_EQ(fused_split_unsupported(mlp({784, 784}), "bf16", 128), std::nullopt);
  EXPECT_EQ(fused_split_unsupported(mlp({784}), "bf16", 128), std::nullopt);
  EXPECT_THAT(fused_split_unsupported(mlp({784, 784, 784, 784}), "bf16", 128).value_or(""),
              HasSubstr("a 784-784-784-784-784-10 model"));
  EXPECT_THAT(fused_split_unsupported(mlp({784, 512}), "bf16", 128).value_or(""), HasSubstr("784-784-512-10"));
  EXPECT_THAT(fused_split_unsupported(mlp({}), "bf16", 128).value_or(""), HasSubstr("1 to 3 hidden layers"));
  EXPECT_THAT(fused_split_unsupported(mlp({784, 784, 784}, 100), "bf16", 128).value_or(""),
              HasSubstr("784-784-784-784-100"));
  EXPECT_THAT(fused_split_unsupported(wide, "fp16", 128).value_or(""), HasSubstr("\"fp16\""));
  EXPECT_THAT(fused_split_unsupported(wide, "bf16", 256).value_or(""), HasSubstr("a batch of 256"));
  EXPECT_EQ(fused_split_unsupported(wide, "bf16", 32), std::nullopt);  // 128 rows, the rest masked
  EXPECT_EQ(fused_split_unsupported(with_activation(wide, Activation::kGELU), "bf16", 128), std::nullopt);
  // 256-wide hidden layers (the default model among them), all of one width.
  EXPECT_EQ(fused_split_unsupported(mlp({256, 256, 256}), "bf16", 128), std::nullopt);
  EXPECT_EQ(fused_split_unsupported(mlp({256, 256}), "bf16", 128), std::nullopt);
  EXPECT_EQ(fused_split_unsupported(mlp({256}), "bf16", 32), std::nullopt);
  EXPECT_THAT(fused_split_unsupported(mlp({256, 784}), "bf16", 128).value_or(""), HasSubstr("784-256-784-10"));
  EXPECT_THAT(fused_split_unsupported(mlp({512, 512}), "bf16", 128).value_or(""), HasSubstr("all of 784 or all of 256"));
  // Runs of the 256-wide shape may share a GPU (32 SMs each); of the 784-wide one (98), not.
  EXPECT_TRUE(fused_split_shares_a_gpu(mlp({256, 256})));
  EXPECT_FALSE(fused_split_shares_a_gpu(mlp({784, 784, 784})));
}

// The regression kernel: models without a hidden layer, bf16, a batch of at most 128, inputs a
// multiple of 16 up to 1024 (whole k-tiles of pixels), at most 16 classes (one tile of logits).
TEST(FusedFit, TheRegressionKernelTakesModelsWithoutAHiddenLayerAndNamesWhyNotForTheRest) {
  EXPECT_EQ(fused_regression_unsupported(mlp({}), "bf16", 128), std::nullopt);
  EXPECT_EQ(fused_regression_unsupported(mlp({}), "bf16", 32), std::nullopt);
  EXPECT_EQ(fused_regression_unsupported(mlp({}, 16), "bf16", 128), std::nullopt);
  nn::MlpSpec wide = mlp({});
  wide.inputs = 1024;
  EXPECT_EQ(fused_regression_unsupported(wide, "bf16", 128), std::nullopt);
  EXPECT_THAT(fused_regression_unsupported(mlp({64}), "bf16", 128).value_or(""), HasSubstr("1 hidden layers"));
  EXPECT_THAT(fused_regression_unsupported(mlp({}), "fp16", 128).value_or(""), HasSubstr("device.precision = \"fp16\""));
  EXPECT_THAT(fused_regression_unsupported(mlp({}), "bf16", 256).value_or(""), HasSubstr("a batch of 256"));
  EXPECT_THAT(fused_regression_unsupported(mlp({}, 17), "bf16", 128).value_or(""), HasSubstr("17 classes"));
  nn::MlpSpec odd = mlp({});
  odd.inputs = 792;  // a multiple of 8, not of 16: the cluster kernel's
  EXPECT_THAT(fused_regression_unsupported(odd, "bf16", 128).value_or(""), HasSubstr("792 input features"));
  wide.inputs = 1040;
  EXPECT_THAT(fused_regression_unsupported(wide, "bf16", 128).value_or(""), HasSubstr("at most 1024"));
}

TEST(FusedFit, TheClusterLayoutFitsABlockAndKeepsItsBuffersApart) {
  // 784-128-128-128-10: three 128 x 128 activation buffers and D (32 KiB each, by column blocks,
  // unpadded), the first layer's group of features of the batch and of W, and the output layer with its
  // master weights and state.
  const int hidden[] = {128, 128, 128};
  const cuda::ClusterLayout c = cuda::cluster_layout(784, hidden, 3, 10);
  // A 128-wide first layer splits 2 x 8: 7 groups of 112 features against 2 halves of 64 neurons.
  EXPECT_TRUE(c.first_split);
  EXPECT_EQ(c.group, 112);
  EXPECT_EQ(c.slices, 7);
  EXPECT_EQ(c.w0 + 64 * c.ld_w0 * 2, c.b0);  // W0 holds the block's 64 rows
  EXPECT_EQ(c.x[1], c.x[0] + 128 * 128 * 2);
  EXPECT_EQ(c.d, c.x[2] + 128 * 128 * 2);
  EXPECT_EQ(c.bars % 8, 0);  // mbarriers are 8-byte aligned
  EXPECT_LE(c.bytes, cuda::kClusterSharedLimit);
  // So: 10 x 128 weights and 16 biases, three arrays, none overlapping what follows.
  EXPECT_EQ(c.out_state_stride, 10 * 128 + 16);
  EXPECT_LE(c.out_state + 3 * c.out_state_stride * 4, c.dl);
  EXPECT_LE(c.bo + 2 * 16 * 4, c.out_state);
  // P lives in global memory: 16 blocks x 128 rows x 128 fp32 columns.
  EXPECT_EQ(c.ld_part, 128);
  EXPECT_EQ(c.partials_bytes, 16 * 128 * 128 * 4);
  // Softmax regression: P holds the partial logits, the biases live in every block (4 arrays).
  const cuda::ClusterLayout regression = cuda::cluster_layout(784, nullptr, 0, 10);
  EXPECT_EQ(regression.ld_part, 16);
  EXPECT_EQ(regression.classes_pad, 16);
  EXPECT_LE(regression.bytes, 64 * 1024);
  // Narrower first layers, and more than 16 classes, keep 16 x 1: 13 blocks of 64 features, every row.
  const int narrow_hidden[] = {64, 48};
  const cuda::ClusterLayout narrow = cuda::cluster_layout(784, narrow_hidden, 2, 10);
  EXPECT_FALSE(narrow.first_split);
  EXPECT_EQ(narrow.group, 64);
  EXPECT_EQ(narrow.slices, 13);
  EXPECT_FALSE(cuda::cluster_layout(784, hidden, 3, 30).first_split);
  EXPECT_FALSE(cuda::cluster_layout(792, hidden, 3, 10).first_split);  // its batch comes in 16-byte pieces
  // 1024 inputs: 8 groups of 128 (every block has a part); 64 inputs: 4 groups of 16.
  const cuda::ClusterLayout widest = cuda::cluster_layout(1024, hidden, 3, 10);
  EXPECT_TRUE(widest.first_split);
  EXPECT_EQ(widest.group, 128);
  EXPECT_EQ(widest.slices, 8);
  EXPECT_LE(widest.bytes, cuda::kClusterSharedLimit);
  const cuda::ClusterLayout few = cuda::cluster_layout(64, hidden, 3, 10);
  EXPECT_EQ(few.group, 16);
  EXPECT_EQ(few.slices, 4);
  // The owners' slots (a group's 128 x 8 fp32 partial each) fit X[1..] and D where they go there.
  EXPECT_TRUE(c.partials_shared);
  EXPECT_LE(c.x[1] + std::int64_t{c.slices} * 128 * 8 * 4, c.d + 128 * 128 * 2);
  // The next batch's bytes (128 x group) land in the exchange buffer the first layer's backward does not
  // read: X[2] after two hidden backwards (it reads D), D after one (it reads X[1]); with one hidden layer
  // a region of their own. Never where the next step's partial slots go.
  const auto slots_end = [](const cuda::ClusterLayout& l) { return l.x[1] + std::int64_t{l.slices} * 128 * 8 * 4; };
  EXPECT_EQ(c.stage, c.x[2]);
  EXPECT_GE(c.stage, slots_end(c));
  const int two_hidden[] = {128, 128};
  const cuda::ClusterLayout two = cuda::cluster_layout(784, two_hidden, 2, 10);
  ASSERT_TRUE(two.first_split);
  EXPECT_EQ(two.stage, two.d);
  EXPECT_GE(two.stage, slots_end(two));
  const int one_hidden[] = {128};
  const cuda::ClusterLayout one = cuda::cluster_layout(784, one_hidden, 1, 10);
  ASSERT_TRUE(one.first_split);
  EXPECT_FALSE(one.partials_shared);
  EXPECT_GE(one.stage, one.dl + 128 * one.ld_dl * 2);  // after every buffer before it
  EXPECT_LE(one.stage + 128 * one.group, one.bars);
  // Every row stride keeps the tensor-core fragments' rows 16 bytes apart modulo the banks' period.
  // (X and D are read by 16-byte column pieces of consecutive rows: conflict-free without padding.)
  for (const int ld : {c.ld_x0, c.ld_w0, c.ld_wo, c.ld_dl, c.ld_wr[1], c.ld_wc[1], narrow.ld_x0, narrow.ld_w0}) {
    EXPECT_EQ(ld % 16, 8) << ld;
  }
}

Config with(const std::vector<std::string>& overrides) { return config_from_overrides(overrides); }

TEST(FusedFit, AutoTakesTheCompiledStepAndEagerOnlyWhereNeitherRuns) {
  const Device gpu = Device::cuda(0);  // resolve_engine reads only the device's kind
  const auto engine = [&](const Config& c, const nn::MlpSpec& m) {
    return resolve_engine(c, gpu, m, 1000, kH100L2);
  };
  // The compiled step is the faster engine where it runs (docs/PERFORMANCE.md).
  EXPECT_EQ(engine(with({}), mlp({256, 256})).engine, Engine::kCompiled);
  EXPECT_EQ(engine(with({}), mlp({4096, 4096, 4096})).engine, Engine::kCompiled);
  // The compiled step runs every activation, loss and last batch the fused engine runs.
  EXPECT_EQ(engine(with({"model.activation=\"gelu\"", "loss.type=\"mse\"", "train.drop_last=false"}), mlp({256}))
                .engine,
            Engine::kCompiled);
  // Neither runs a batch of more than 65535: eager, with both reasons.
  const EngineChoice huge = resolve_engine(with({"train.batch_size=70000"}), gpu, mlp({256}), 1000, kH100L2);
  EXPECT_EQ(huge.engine, Engine::kEager);
  EXPECT_THAT(huge.reason, HasSubstr("not compiled, a batch of more than 65535"));
  // Every model the cluster kernel takes goes to it where the GPU runs it (bf16, a batch of at most
  // 128, hidden layers at most 128 wide that fit its shared memory); everything else keeps the
  // compiled step.
  const auto with_clusters = [&](const Config& c, const nn::MlpSpec& m) {
    return resolve_engine(c, gpu, m, 1000, kH100L2, [](FusedKernel) { return true; });
  };
  EXPECT_EQ(with_clusters(with({}), mlp({})).engine, Engine::kFused);
  EXPECT_THAT(with_clusters(with({}), mlp({})).reason, HasSubstr("softmax regression"));
  EXPECT_THAT(with_clusters(with({}), mlp({})).reason, HasSubstr("regression kernel"));
  // Softmax regression the regression kernel does not take (30 classes), or on a GPU that does not run
  // it: the cluster kernel.
  EXPECT_THAT(with_clusters(with({}), mlp({}, 30)).reason, HasSubstr("cluster kernel"));
  const auto no_regression = [](FusedKernel kernel) { return kernel != FusedKernel::kRegression; };
  EXPECT_THAT(resolve_engine(with({}), gpu, mlp({}), 1000, kH100L2, no_regression).reason, HasSubstr("cluster kernel"));
  EXPECT_EQ(engine(with({}), mlp({})).engine, Engine::kCompiled);
  EXPECT_EQ(with_clusters(with({}), mlp({128})).engine, Engine::kFused);
  EXPECT_EQ(with_clusters(with({}), mlp({64, 64})).engine, Engine::kFused);
  // 1 to 3 hidden layers (bf16, at most 16 classes, inputs a multiple of 16): the rows kernel; deeper
  // ones, or on a GPU that does not run it, the cluster kernel.
  EXPECT_THAT(with_clusters(with({}), mlp({64, 32, 16})).reason, HasSubstr("rows kernel"));
  EXPECT_THAT(with_clusters(with({}), mlp({96, 64, 40, 24, 16})).reason, HasSubstr("fit one 16-block cluster"));
  const auto no_rows = [](FusedKernel kernel) { return kernel != FusedKernel::kRows; };
  EXPECT_THAT(resolve_engine(with({}), gpu, mlp({64, 32, 16}), 1000, kH100L2, no_rows).reason,
              HasSubstr("fit one 16-block cluster"));
  EXPECT_THAT(with_clusters(with({}), mlp({128}, 30)).reason, HasSubstr("fit one 16-block cluster"));
  EXPECT_EQ(with_clusters(with({}), mlp({128, 128, 128})).engine, Engine::kFused);
  EXPECT_EQ(with_clusters(with({}), mlp({64, 128})).engine, Engine::kFused);
  // Too wide, too deep for its shared memory, or an activation it does not take: the compiled step.
  EXPECT_EQ(with_clusters(with({}), mlp({512})).engine, Engine::kCompiled);
  EXPECT_EQ(with_clusters(with({}), mlp({128, 128, 128, 128})).engine, Engine::kCompiled);
  EXPECT_EQ(with_clusters(with({}), with_activation(mlp({64, 64}), Activation::kGELU)).engine, Engine::kCompiled);
  // Whether the GPU runs the cluster kernel is asked only for the models auto would give it (the
  // answer loads the kernel's module: no start-up cost for the rest).
  bool asked = false;
  resolve_engine(with({}), gpu, mlp({512, 512}), 1000, kH100L2, [&](FusedKernel) { return asked = true; });
  EXPECT_FALSE(asked);
  resolve_engine(with({}), gpu, mlp({}), 1000, kH100L2, [&](FusedKernel) { return asked = true; });
  EXPECT_TRUE(asked);
  EXPECT_EQ(with_clusters(with({"device.precision=\"fp16\""}), mlp({})).engine, Engine::kCompiled);
  EXPECT_EQ(with_clusters(with({"train.batch_size=256"}), mlp({})).engine, Engine::kCompiled);
  EXPECT_EQ(with_clusters(with({"device.engine=\"compiled\""}), mlp({})).engine, Engine::kCompiled);
  // 784-784-784-784-10 at batch 128 goes to the split kernel where the GPU runs it, and only then.
  EXPECT_EQ(with_clusters(with({}), mlp({784, 784, 784})).engine, Engine::kFused);
  EXPECT_THAT(with_clusters(with({}), mlp({784, 784, 784})).reason, HasSubstr("split kernel"));
  EXPECT_EQ(engine(with({}), mlp({784, 784, 784})).engine, Engine::kCompiled);
  const auto only_clusters = [](FusedKernel kernel) { return kernel == FusedKernel::kCluster; };
  EXPECT_EQ(resolve_engine(with({}), gpu, mlp({784, 784, 784}), 1000, kH100L2, only_clusters).engine,
            Engine::kCompiled);
  EXPECT_EQ(with_clusters(with({"optim.type=\"adam\""}), mlp({784, 784, 784})).engine, Engine::kFused);
  EXPECT_EQ(with_clusters(with({"optim.type=\"adamw\""}), mlp({784, 784, 784})).engine, Engine::kFused);
  EXPECT_EQ(with_clusters(with({"train.batch_size=32"}), mlp({784, 784, 784})).engine, Engine::kFused);
  EXPECT_EQ(with_clusters(with({"train.batch_size=256"}), mlp({784, 784, 784})).engine, Engine::kCompiled);
  // So do 256-wide models (the default 784-256-256-10 among them), any optimizer, at a batch of at most 128.
  EXPECT_EQ(with_clusters(with({}), mlp({256, 256})).engine, Engine::kFused);
  EXPECT_THAT(with_clusters(with({}), mlp({256})).reason, HasSubstr("split kernel"));
  // Two hidden layers of at most 256 (one over 128) trained by SGD: the quads kernel; with Adam, or on a GPU
  // that does not run it, the split kernel where it takes the shape.
  EXPECT_THAT(with_clusters(with({}), mlp({256, 256})).reason, HasSubstr("quads kernel"));
  EXPECT_THAT(with_clusters(with({"optim.type=\"adam\""}), mlp({256, 256})).reason, HasSubstr("split kernel"));
  const auto no_quads = [](FusedKernel kernel) { return kernel != FusedKernel::kQuads; };
  EXPECT_THAT(resolve_engine(with({}), gpu, mlp({256, 256}), 1000, kH100L2, no_quads).reason, HasSubstr("split kernel"));
  EXPECT_THAT(with_clusters(with({}), mlp({200, 176})).reason, HasSubstr("quads kernel"));
  EXPECT_THAT(with_clusters(with({}), mlp({128, 64})).reason, HasSubstr("rows kernel"));
  EXPECT_EQ(with_clusters(with({}), mlp({256, 256, 256})).engine, Engine::kFused);
  EXPECT_EQ(engine(with({}), mlp({256, 256})).engine, Engine::kCompiled);  // where the GPU does not run it
  EXPECT_EQ(with_clusters(with({"optim.type=\"adam\""}), mlp({256, 256})).engine, Engine::kFused);
  EXPECT_EQ(with_clusters(with({}), mlp({256, 128})).engine, Engine::kFused);  // the quads kernel
  EXPECT_EQ(with_clusters(with({"optim.type=\"adam\""}), mlp({256, 128})).engine, Engine::kCompiled);
  // Asked for, the fused engine runs whatever fits.
  EXPECT_EQ(engine(with({"device.engine=\"fused\""}), mlp({256})).engine, Engine::kFused);
  EXPECT_EQ(engine(with({"device.engine=\"eager\""}), mlp({256})).engine, Engine::kEager);
  EXPECT_EQ(resolve_engine(with({}), Device::cpu(), mlp({256}), 1000, 0).engine, Engine::kCompiled);
}

TEST(FusedFit, AskingForTheFusedEngineWhereItCannotRunNamesTheLimit) {
  const std::string message = test::error_message([] {
    resolve_engine(with({"device.engine=\"fused\""}), Device::cuda(0), mlp({4096, 4096, 4096}), 1000, kH100L2);
  });
  EXPECT_THAT(message, HasSubstr("device.engine = \"fused\" cannot run this model"));
  EXPECT_THAT(message, HasSubstr("MiB resident"));
  EXPECT_THAT(test::error_message([] {
                resolve_engine(with({"device.engine=\"fused\""}), Device::cpu(), mlp({256}), 1000, 0);
              }),
              HasSubstr("needs a GPU"));
}

}  // namespace
}  // namespace sprintnet::train
