// The compiled GPU step (train/train_plan.h) trains like the eager one: in each
// 16-bit and tf32 precision to the fp32 accuracy, and through a checkpoint and
// resume to the same weights as an uninterrupted run (fp16 with its loss scaling).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "sprintnet/io/safetensors.h"
#include "sprintnet/train/checkpoint.h"
#include "sprintnet/train/resume.h"
#include "sprintnet/train/trainer.h"
#include "support/gpu.h"
#include "support/test_util.h"

namespace sprintnet::train {
namespace {

struct SimulatedKill {};

// Seed 0, after the test seed in `extra`, where a test's bound is an accuracy measured on that draw alone.
const std::string kMeasuredDraw = "seed=0";

// The shipped default config; initial weights and batch order from the test seed (printed by the test main,
// replayed with SPRINTNET_TEST_SEED), the same for every run a test compares.
Config mnist_config(const std::string& precision, const std::string& name, std::vector<std::string> extra = {}) {
  std::vector<std::string> overrides = {
      fmt::format("seed={}", test::config_seed()),
      fmt::format("data.dir=\"{}\"", test::data_dir().string()),
      "device.name=\"cuda\"",
      "device.engine=\"compiled\"",
      fmt::format("device.precision=\"{}\"", precision),
      fmt::format("output.dir=\"{}\"", test::temp_dir("compiled-step").string()),
      fmt::format("output.name=\"{}\"", name),
      "output.progress=\"none\"",
  };
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return load_config(std::filesystem::path(SPRINTNET_SOURCE_DIR) / "configs" / "mnist_mlp.toml", overrides);
}

// The shipped default config (784-256-256-10, SGD momentum, cosine, 10 epochs) on all of MNIST:
// the requirement is the same accuracy within 0.3 % of fp32. Seed 0, the config's own: runs in
// other precisions part from the fp32 run, and a third of a point (and 98 %) is what this draw reached,
// not a bound on any draw's.
TEST(CompiledStep, EveryPrecisionReachesTheFp32AccuracyWithinAThirdOfAPercent) {
  SN_REQUIRE_GPU();
  const TrainSummary fp32 = Trainer(mnist_config("fp32", "fp32", {kMeasuredDraw})).fit();
  EXPECT_GT(fp32.final_test.accuracy, 0.98);
  for (const std::string precision : {"bf16", "tf32", "fp16"}) {
    const TrainSummary run = Trainer(mnist_config(precision, precision, {kMeasuredDraw})).fit();
    std::printf("%s: test accuracy %.2f %% (fp32 %.2f %%), train %.3f s\n", precision.c_str(),
                100.0 * run.final_test.accuracy, 100.0 * fp32.final_test.accuracy, run.train_time_s);
    EXPECT_NEAR(run.final_test.accuracy, fp32.final_test.accuracy, 0.003) << precision;
    for (const EpochRecord& e : run.epochs) EXPECT_TRUE(std::isfinite(e.train_loss)) << precision;
  }
}

// Softmax regression: the lone output layer reads its batch straight from the data set (no gather
// launch); in fp32 it must follow the CPU's eager run like the deeper models do.
TEST(CompiledStep, SoftmaxRegressionInFp32FollowsTheCpuRun) {
  SN_REQUIRE_GPU();
  const std::vector<std::string> slice = {"data.train_limit=10000", "data.test_limit=2000", "train.epochs=2",
                                          "model.hidden=[]"};
  std::vector<std::string> cpu_overrides = slice;
  cpu_overrides.push_back("device.engine=\"eager\"");  // the eager CPU ops: the reference
  cpu_overrides.push_back("device.name=\"cpu\"");
  const TrainSummary cpu = Trainer(mnist_config("fp32", "softmax-cpu", cpu_overrides)).fit();
  Trainer gpu_trainer(mnist_config("fp32", "softmax-gpu", slice));
  ASSERT_NE(gpu_trainer.plan(), nullptr);
  const TrainSummary gpu = gpu_trainer.fit();
  for (std::size_t e = 0; e < cpu.epochs.size(); ++e) {
    // As TrainerGpu.Fp32RunFollowsTheCpuRun: reordered fp32 sums, 156 steps; a wrong op is off by > 1e-2.
    EXPECT_NEAR(gpu.epochs[e].train_loss, cpu.epochs[e].train_loss, 1e-3 * cpu.epochs[e].train_loss) << e;
  }
  EXPECT_NEAR(gpu.final_test.accuracy, cpu.final_test.accuracy, 0.003);
}

// An accuracy floor on one run: seed 0, the draw it was set on.
TEST(CompiledStep, AdamWTrainsInBf16) {
  SN_REQUIRE_GPU();
  const TrainSummary run = Trainer(mnist_config("bf16", "adamw", {"optim.type=\"adamw\"", "optim.lr=0.001",
                                                                  "optim.weight_decay=0.01", "train.epochs=3",
                                                                  kMeasuredDraw}))
                               .fit();
  EXPECT_GT(run.final_test.accuracy, 0.97);
}

TEST(CompiledStep, ResumedRunEndsWithTheUninterruptedRunsWeights) {
  SN_REQUIRE_GPU();
  const std::vector<std::string> slice = {"data.train_limit=10000", "data.test_limit=2000", "train.epochs=3"};
  const TrainSummary whole = Trainer(mnist_config("bf16", "whole", slice)).fit();

  Trainer killed(mnist_config("bf16", "killed", slice));
  killed.on_epoch_end([](const EpochRecord& record) {
    if (record.epoch == 2) throw SimulatedKill{};
  });
  EXPECT_THROW(killed.fit(), SimulatedKill);
  const auto run_dir = killed.config().output.dir / std::filesystem::path("killed");
  const TrainSummary resumed = Trainer(plan_resume(run_dir, {}, {})).fit();
  ASSERT_EQ(resumed.epochs.size(), 1u);
  EXPECT_NEAR(resumed.epochs[0].train_loss, whole.epochs[2].train_loss, 1e-6 * whole.epochs[2].train_loss);
  EXPECT_NEAR(resumed.final_test.accuracy, whole.final_test.accuracy, 1e-9);

  const auto a = load_safetensors(whole.run_dir / "model.safetensors");
  const auto b = load_safetensors(run_dir / "model.safetensors");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    // The same graph replayed on the same data: equal up to cuBLASLt's reduction order (bit-equal here).
    EXPECT_LT(test::relative_error(a.tensors[i].second, b.tensors[i].second), 1e-6) << a.tensors[i].first;
  }
}

// fp16's dynamic loss scaling is part of the run's state (train/loss_scaling.h). Before checkpoints kept it, a
// resumed fp16 run started again from 2^16 with no finite steps counted: it skipped updates the uninterrupted run
// took (a scale that had come down from 2^16 overflows again) and grew its scale at other steps. Both engines that
// compute in fp16: the compiled step and the fused engine (its grid kernel). The runs' last checkpoints must hold the
// same scaling (the old resume's differs: its count of finite steps restarts at 0), the same weights. Batches of 16
// make 1250 steps an epoch: the scale doubles at step 2000 (if no update was skipped), in epoch 2, before the kill.
TEST(CompiledStep, AnFp16RunResumesBitForBitWithItsLossScaling) {
  SN_REQUIRE_GPU();
  for (const std::string engine : {"compiled", "fused"}) {
    SCOPED_TRACE(engine);
    const std::vector<std::string> slice = {"data.train_limit=20000", "data.test_limit=2000", "train.epochs=3",
                                            "train.batch_size=16", fmt::format("device.engine=\"{}\"", engine)};
    const TrainSummary whole = Trainer(mnist_config("fp16", engine + "-fp16-whole", slice)).fit();
    Trainer killed(mnist_config("fp16", engine + "-fp16-killed", slice));
    killed.on_epoch_end([](const EpochRecord& record) {
      if (record.epoch == 2) throw SimulatedKill{};
    });
    EXPECT_THROW(killed.fit(), SimulatedKill);
    const auto run_dir = killed.config().output.dir / std::filesystem::path(engine + "-fp16-killed");
    const std::optional<LossScaling> kept = read_checkpoint(latest_checkpoint(run_dir)).loss_scaling;
    ASSERT_TRUE(kept.has_value());
    std::printf("%s: loss scale %g, %lld finite steps since it changed, after epoch 2; updates skipped by epoch: %lld "
                "%lld %lld\n", engine.c_str(), kept->scale, static_cast<long long>(kept->good_steps),
                static_cast<long long>(whole.epochs[0].skipped_updates),
                static_cast<long long>(whole.epochs[1].skipped_updates),
                static_cast<long long>(whole.epochs[2].skipped_updates));
    EXPECT_NE(*kept, LossScaling{});  // what a resume without it started from: the test could not tell otherwise

    const TrainSummary resumed = Trainer(plan_resume(run_dir, {}, {})).fit();
    ASSERT_EQ(resumed.epochs.size(), 1u);
    EXPECT_EQ(resumed.epochs[0].train_loss, whole.epochs[2].train_loss);
    EXPECT_EQ(resumed.epochs[0].skipped_updates, whole.epochs[2].skipped_updates);
    EXPECT_EQ(resumed.final_test.accuracy, whole.final_test.accuracy);
    EXPECT_EQ(read_checkpoint(latest_checkpoint(run_dir)).loss_scaling,
              read_checkpoint(latest_checkpoint(whole.run_dir)).loss_scaling);
    const auto a = load_safetensors(whole.run_dir / "model.safetensors");
    const auto b = load_safetensors(run_dir / "model.safetensors");
    ASSERT_EQ(a.tensors.size(), b.tensors.size());
    for (std::size_t i = 0; i < a.tensors.size(); ++i) {
      const Tensor& x = a.tensors[i].second;
      const Tensor& y = b.tensors[i].second;
      ASSERT_EQ(x.nbytes(), y.nbytes());
      EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()), 0)
          << a.tensors[i].first << ": relative error " << test::relative_error(x, y);
    }
  }
}

}  // namespace
}  // namespace sprintnet::train
