// Training on the GPU follows training on the CPU, and the eager training loop
// stops asking the device for memory after its first step.
#include <gtest/gtest.h>

#include <cmath>

#include "sprintnet/memory/cuda_allocator.h"
#include "sprintnet/nn/loss.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/optim/optimizer.h"
#include "sprintnet/train/trainer.h"
#include "support/gpu.h"
#include "support/test_util.h"

namespace sprintnet::train {
namespace {

Config slice_config(const std::string& device, const std::string& engine = "auto") {
  return config_from_overrides({
      fmt::format("data.dir=\"{}\"", test::data_dir().string()),
      "data.train_limit=10000",
      "data.test_limit=2000",
      "model.hidden=[128, 64]",
      "train.epochs=2",
      fmt::format("device.name=\"{}\"", device),
      "device.precision=\"fp32\"",
      fmt::format("device.engine=\"{}\"", engine),
      fmt::format("output.dir=\"{}\"", test::temp_dir("gpu-trainer").string()),
      "output.progress=\"none\"",
  });
}

class TrainerGpuEngine : public ::testing::TestWithParam<std::string> {};

// Both GPU steps, the eager one (module by module) and the compiled one (a CUDA graph with fused kernels).
TEST_P(TrainerGpuEngine, Fp32RunFollowsTheCpuRun) {
  SN_REQUIRE_GPU();
  const TrainSummary cpu = Trainer(slice_config("cpu", "eager")).fit();  // the eager CPU ops: the reference
  Trainer trainer(slice_config("cuda", GetParam()));
  EXPECT_EQ(trainer.plan() != nullptr, GetParam() == "compiled");
  const TrainSummary gpu = trainer.fit();
  ASSERT_EQ(cpu.epochs.size(), gpu.epochs.size());
  for (std::size_t e = 0; e < cpu.epochs.size(); ++e) {
    // Same weights, same batches, same fp32 maths in another summation order: per-op differences of
    // ~1e-7 relative grow through 156 SGD-momentum steps to ~1e-5..1e-4 in the epoch-mean loss. 1e-3
    // catches any op that is wrong rather than reordered (a wrong op moves the loss by > 1e-2).
    const double rel = std::abs(gpu.epochs[e].train_loss - cpu.epochs[e].train_loss) / cpu.epochs[e].train_loss;
    EXPECT_LT(rel, 1e-3) << "epoch " << e + 1 << ": cpu " << cpu.epochs[e].train_loss << ", gpu "
                         << gpu.epochs[e].train_loss;
  }
  // 2000 test images: one image is 0.05 %; reordering may flip a few borderline ones.
  EXPECT_NEAR(gpu.final_test.accuracy, cpu.final_test.accuracy, 0.003);
  EXPECT_GT(gpu.final_test.accuracy, 0.9);
}

INSTANTIATE_TEST_SUITE_P(Engines, TrainerGpuEngine, ::testing::Values("eager", "compiled"));

TEST(TrainerGpu, EagerStepsStopAllocatingDeviceMemoryAfterTheFirst) {
  SN_REQUIRE_GPU();
  const Device device = Device::cuda(0);
  Generator gen(test::test_seed());
  nn::MlpSpec spec{784, {256, 256}, 10};
  auto model = nn::make_mlp(spec, gen, device);
  nn::CrossEntropyLoss criterion;
  optim::SGD optimizer(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  const Tensor x = test::random_uniform({128, 784}, DType::kF32, gen, -1.0, 1.0, device);
  const Tensor y = test::random_labels(128, 10, gen, device);
  auto step = [&] {
    optimizer.zero_grad();
    criterion.forward(model->forward(x), y);
    model->backward(criterion.backward());
    optimizer.step();
  };
  step();
  backend_for(device).synchronize();
  const AllocatorStats after_first = cuda_allocator_stats(0);
  for (int i = 0; i < 50; ++i) step();
  backend_for(device).synchronize();
  const AllocatorStats after_many = cuda_allocator_stats(0);
  EXPECT_GT(after_first.num_allocations, 0u);
  EXPECT_GT(after_many.num_allocations, after_first.num_allocations);  // the loop does allocate...
  EXPECT_EQ(after_many.num_device_mallocs, after_first.num_device_mallocs)  // ...but only from the cache
      << "allocator " << cuda_allocator_name(0);
}

}  // namespace
}  // namespace sprintnet::train
