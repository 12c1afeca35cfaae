// batch_gather.cu as the data-parallel step and the evaluation call it, against the CPU's gather
// (ops::gather_rows_u8 and gather_labels on the CPU) of the samples the batch should hold:
// - each rank of a data-parallel run gathers its share of the step's global batch, first = rank *
//   rows and stride = world * rows (cuda_train_plan.cpp, enqueue_step), and the shares side by
//   side are the batch one GPU gathers;
// - with no order (the evaluation's batches, in the data set's order), row r is sample first + r.
// The scales are k/256: a pixel times one is exact in fp32, so the GPU's fused multiply-add and the
// CPU's multiply then add round the same sum once, and every element compares exactly, in every type
// (the CPU's fp32 value rounded to the type on the host). Rows of whole 16-byte pieces, 1024 or more,
// take the vector kernel (784 and 48 features); the others the element kernel (37 features, 40 rows).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sprintnet/core/random.h"
#include "sprintnet/ops/ops.h"
#include "step_kernel_util.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using test::DeviceValue;
using test::gpu;

struct GatherCase {
  std::int64_t features, rows;
  DType type;
};
const std::vector<GatherCase> kCases = {
    {784, 1024, DType::kBF16}, {48, 1024, DType::kF32}, {37, 1024, DType::kF16}, {784, 40, DType::kF32},
    {37, 40, DType::kBF16}};

std::string describe(const GatherCase& c) {
  return fmt::format("{} features, {} rows, {}", c.features, c.rows, dtype_name(c.type));
}

// The data set on both sides and the normalisation, drawn afresh.
struct Data {
  Dataset host;
  Tensor images, labels;  // on the GPU
  float scale, shift;
};
Data random_data(std::int64_t n, std::int64_t features, Generator& gen) {
  Data d{test::random_dataset("gather", n, features, 10, gen), {}, {}, 0.0f, 0.0f};
  d.images = d.host.images.to(gpu());
  d.labels = d.host.labels.to(gpu());
  d.scale = static_cast<float>(1 + gen.below(255)) / 256.0f;  // k/256: products exact (see the top)
  d.shift = -static_cast<float>(gen.uniform(0.0, 1.0));
  return d;
}

// The GPU batch's destination with one more row and label after it, poisoned: a row not written, or
// one written past the batch, shows.
struct Destination {
  Tensor rows, labels;
  explicit Destination(const GatherCase& c)
      : rows(test::poisoned({c.rows + 1, c.features}, c.type).to(gpu())),
        labels(test::poisoned({c.rows + 1}, DType::kI32).to(gpu())) {}
};

cuda::GatherArgs gather_args(const Data& d, const GatherCase& c, const Destination& dst) {
  return {.images = d.images.data<std::uint8_t>(), .labels = d.labels.data<std::int32_t>(), .features = c.features,
          .order = nullptr, .state = nullptr, .steps_per_epoch = 1, .first = 0, .rows = c.rows, .scale = d.scale,
          .shift = d.shift, .dst = dst.rows.raw_data(), .dst_type = test::element_type(c.type),
          .dst_labels = dst.labels.data<std::int32_t>()};
}

// Expects the GPU's batch to be the CPU's gather of `samples`, element for element, and the guard row
// and label after it untouched.
void expect_cpu_gather(const Destination& dst, const Data& d, const std::vector<std::int32_t>& samples,
                       const GatherCase& c, const std::string& what) {
  const auto n = static_cast<std::int64_t>(samples.size());
  const Tensor indices = Tensor::from_vector(samples, {n});
  const Tensor rows = Tensor::empty({n, c.features}, DType::kF32);
  ops::gather_rows_u8(d.host.images, indices, rows, d.scale, d.shift);
  const Tensor labels = Tensor::empty({n}, DType::kI32);
  ops::gather_labels(d.host.labels, indices, labels);

  const std::vector<float> want = rows.to(c.type).to_vector<float>();  // exact: rounded once, on the host
  const std::vector<float> got = dst.rows.to(Device::cpu()).to_vector<float>();
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto r = static_cast<std::int64_t>(i) / c.features, f = static_cast<std::int64_t>(i) % c.features;
    ASSERT_EQ(got[i], want[i]) << what << ": row " << r << " (sample " << samples[static_cast<std::size_t>(r)]
                               << "), feature " << f;
  }
  for (std::size_t i = want.size(); i < got.size(); ++i) {
    ASSERT_TRUE(std::isnan(got[i])) << what << ": the row after the batch was written";
  }
  const auto got_labels = dst.labels.to(Device::cpu()).to_vector<std::int32_t>();
  const auto want_labels = labels.to_vector<std::int32_t>();
  for (std::size_t r = 0; r < want_labels.size(); ++r) {
    ASSERT_EQ(got_labels[r], want_labels[r]) << what << ": label of row " << r;
  }
  EXPECT_EQ(got_labels.back(), std::numeric_limits<std::int32_t>::min()) << what << ": the label after the batch";
}

TEST(BatchGatherSlice, EachRankGathersItsShareOfTheGlobalBatch) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 201);
  const std::int64_t world = 4, steps_per_epoch = 3;
  for (const GatherCase& c : kCases) {
    const std::int64_t global = world * c.rows;
    // A partial batch left over at the end of the epoch, as drop_last leaves it.
    const std::int64_t n = steps_per_epoch * global + 1 + static_cast<std::int64_t>(gen.below(global - 1));
    const Data d = random_data(n, c.features, gen);
    const std::vector<std::int32_t> order = epoch_permutation(test::test_seed(), gen.below(100), n);
    const Tensor d_order = Tensor::from_vector(order, {n}, gpu());
    // A later epoch, not its first batch: the step's place in the epoch is step % steps_per_epoch.
    const auto step = static_cast<std::int64_t>(steps_per_epoch * (1 + gen.below(3)) + 1 + gen.below(2));
    DeviceValue<cuda::StepState> state({.step = step});
    const std::int64_t batch_start = (step % steps_per_epoch) * global;
    const std::string what = describe(c) + fmt::format(", step {}", step);

    // One GPU's batch (no stride: consecutive steps' batches are `rows` apart, here the global batch's).
    const GatherCase whole_case{c.features, global, c.type};
    const Destination whole(whole_case);
    cuda::GatherArgs one = gather_args(d, whole_case, whole);
    one.order = d_order.data<std::int32_t>();
    one.state = state.get();
    one.steps_per_epoch = steps_per_epoch;
    SN_CUDA_CHECK(cuda::launch_gather_batch(one, test::gpu_stream()));
    const std::vector<float> whole_rows = whole.rows.to(Device::cpu()).to_vector<float>();

    for (std::int64_t rank = 0; rank < world; ++rank) {
      const std::string where = what + fmt::format(", rank {} of {}", rank, world);
      const Destination dst(c);
      cuda::GatherArgs args = gather_args(d, c, dst);
      args.order = d_order.data<std::int32_t>();
      args.state = state.get();
      args.steps_per_epoch = steps_per_epoch;
      args.first = rank * c.rows;
      args.stride = global;
      SN_CUDA_CHECK(cuda::launch_gather_batch(args, test::gpu_stream()));
      std::vector<std::int32_t> samples;
      for (std::int64_t r = 0; r < c.rows; ++r) samples.push_back(order[static_cast<std::size_t>(batch_start + rank * c.rows + r)]);
      expect_cpu_gather(dst, d, samples, c, where);
      // The shares side by side are the one-GPU batch.
      const std::vector<float> share = dst.rows.to(Device::cpu()).to_vector<float>();
      for (std::int64_t i = 0; i < c.rows * c.features; ++i) {
        ASSERT_EQ(share[static_cast<std::size_t>(i)], whole_rows[static_cast<std::size_t>(rank * c.rows * c.features + i)])
            << where << ": element " << i << " is not the one-GPU batch's";
      }
    }
  }
}

TEST(BatchGatherSlice, WithoutAnOrderTheRowsAreTheDataSetsInTurn) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 202);
  for (const GatherCase& c : kCases) {
    const std::int64_t world = 2, steps_per_epoch = 2;
    const std::int64_t n = steps_per_epoch * world * c.rows + 1 + static_cast<std::int64_t>(gen.below(c.rows));
    const Data d = random_data(n, c.features, gen);

    // The evaluation: batches in the data set's order from `first`, no step state.
    const std::int64_t first = 1 + static_cast<std::int64_t>(gen.below(static_cast<std::uint64_t>(n - c.rows)));
    const Destination eval(c);
    cuda::GatherArgs args = gather_args(d, c, eval);
    args.first = first;
    SN_CUDA_CHECK(cuda::launch_gather_batch(args, test::gpu_stream()));
    std::vector<std::int32_t> samples;
    for (std::int64_t r = 0; r < c.rows; ++r) samples.push_back(static_cast<std::int32_t>(first + r));
    expect_cpu_gather(eval, d, samples, c, describe(c) + fmt::format(", evaluation batch from sample {}", first));

    // No order with the step state: rank 1's share of the second batch of an epoch, in the data set's order.
    DeviceValue<cuda::StepState> state({.step = steps_per_epoch + 1});
    const Destination share(c);
    args = gather_args(d, c, share);
    args.state = state.get();
    args.steps_per_epoch = steps_per_epoch;
    args.first = c.rows;
    args.stride = world * c.rows;
    SN_CUDA_CHECK(cuda::launch_gather_batch(args, test::gpu_stream()));
    samples.clear();
    for (std::int64_t r = 0; r < c.rows; ++r) samples.push_back(static_cast<std::int32_t>(world * c.rows + c.rows + r));
    expect_cpu_gather(share, d, samples, c, describe(c) + ", rank 1's share of batch 1, no order");
  }
}

}  // namespace
}  // namespace sprintnet
