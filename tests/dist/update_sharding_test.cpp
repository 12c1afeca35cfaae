// The sharded update's arithmetic (ZeRO-1, docs/DISTRIBUTED.md): which elements each rank updates,
// that the shards tile every range, and the errors naming what cannot be sharded. No GPU needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sprintnet/dist/update_sharding.h"
#include "support/error_message.h"

namespace sprintnet::dist {
namespace {

using ::testing::HasSubstr;

TEST(UpdateSharding, ShardsAreEqualAlignedAndTileTheRange) {
  // A layer of the flat buffers: 784-4096's 4096 x 800 padded weights, 128-element aligned.
  const FlatRange layer{1280, 1280 + 4096 * 800};
  for (const int world : {1, 2, 4, 8}) {
    std::int64_t next = layer.begin;
    for (int rank = 0; rank < world; ++rank) {
      const FlatRange shard = shard_of(layer, rank, world);
      EXPECT_EQ(shard.begin, next) << "rank " << rank << " of " << world;
      EXPECT_EQ(shard.size(), layer.size() / world);
      EXPECT_EQ(shard.begin % kShardAlignment, 0);
      next = shard.end;
    }
    EXPECT_EQ(next, layer.end) << world << " shards";
  }
  EXPECT_EQ(shard_of({0, 16}, 1, 2), (FlatRange{8, 16}));
}

TEST(UpdateSharding, WhatCannotBeShardedIsNamed) {
  const std::vector<FlatRange> layers = {{0, 128}, {128, 256}};
  EXPECT_EQ(sharding_unsupported(layers, 4, "bf16"), std::nullopt);
  EXPECT_EQ(sharding_unsupported(layers, 32, "fp32"), std::nullopt);
  // 3 ranks: 128 elements are not 3 shards of a multiple of 4.
  EXPECT_THAT(sharding_unsupported(layers, 3, "bf16").value_or(""), HasSubstr("parameters [0, 128) (128 elements)"));
  EXPECT_THAT(sharding_unsupported(layers, 2, "fp16").value_or(""), HasSubstr("fp16"));
  EXPECT_THAT(test::error_message([] { shard_of({0, 100}, 0, 2); }), HasSubstr("do not split into 2 shards"));
  EXPECT_THAT(test::error_message([] { shard_of({0, 128}, 2, 2); }), HasSubstr("rank 2 of 2"));
}

TEST(UpdateSharding, AutoShardsWhereItCanAndShardedIsCheckedWhenAskedFor) {
  const std::vector<FlatRange> layers = {{0, 128}};
  EXPECT_EQ(resolve_update("auto", layers, 4, "bf16"), "sharded");
  EXPECT_EQ(resolve_update("auto", layers, 1, "bf16"), "replicated");
  EXPECT_EQ(resolve_update("auto", layers, 2, "fp16"), "replicated");  // fp16 is not sharded
  EXPECT_EQ(resolve_update("auto", layers, 3, "fp32"), "replicated");  // 128 does not split in 3
  EXPECT_EQ(resolve_update("auto", {{0, 96}, {96, 224}}, 2, "fp32"), "sharded");
  EXPECT_EQ(resolve_update("replicated", layers, 4, "bf16"), "replicated");
  EXPECT_EQ(resolve_update("sharded", layers, 4, "bf16"), "sharded");
  EXPECT_EQ(resolve_update("sharded", layers, 1, "fp16"), "replicated");  // one rank: nothing to shard
  EXPECT_THAT(test::error_message([&] { resolve_update("sharded", layers, 2, "fp16"); }),
              HasSubstr("device.update = \"sharded\" cannot shard the update over 2 GPUs"));
}

}  // namespace
}  // namespace sprintnet::dist
