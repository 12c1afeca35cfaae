// End-to-end training on a slice of the real MNIST (scripts/get-data puts it
// in data/; `make test` runs that first), and bit-for-bit determinism.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <utility>
#include <vector>

#include "sprintnet/data/dataset.h"
#include "sprintnet/io/read_file.h"
#include "sprintnet/io/safetensors.h"
#include "sprintnet/train/trainer.h"
#include "support/error_message.h"
#include "support/full_disk.h"
#include "support/test_util.h"

namespace sprintnet::train {
namespace {

Config small_mnist_config(const std::string& run_name, std::vector<std::string> extra = {}) {
  std::vector<std::string> overrides = {
      fmt::format("data.dir=\"{}\"", test::data_dir().string()),
      "data.train_limit=20000",
      "data.test_limit=2000",
      "model.hidden=[64]",
      "train.epochs=3",
      "device.name=\"cpu\"",
      fmt::format("output.dir=\"{}\"", test::temp_dir("trainer").string()),
      fmt::format("output.name=\"{}\"", run_name),
      "output.progress=\"none\"",
  };
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return config_from_overrides(overrides);
}

TEST(Trainer, LearnsMnistSlice) {
  Trainer trainer(small_mnist_config("learns"));
  const TrainSummary summary = trainer.fit();
  ASSERT_EQ(summary.epochs.size(), 3u);
  // 20k samples, 3 epochs (468 steps) of a 784-64-10 MLP: measured 93.8-95.2 % on the first
  // 2000 test images over seeds 0-2; 92 % leaves room for seed-to-seed variation while
  // catching any real learning failure (chance is 10 %).
  EXPECT_GT(summary.final_test.accuracy, 0.92);
  EXPECT_LT(summary.epochs[2].train_loss, summary.epochs[0].train_loss);
  EXPECT_TRUE(std::filesystem::exists(summary.run_dir / "metrics.jsonl"));
  EXPECT_TRUE(std::filesystem::exists(summary.run_dir / "metrics.csv"));
  EXPECT_TRUE(std::filesystem::exists(summary.run_dir / "config.toml"));
  const SafetensorsFile weights = load_safetensors(summary.run_dir / "model.safetensors");
  ASSERT_EQ(weights.tensors.size(), 4u);
  EXPECT_EQ(weights.tensors[0].first, "0.weight");
  EXPECT_EQ(weights.tensors[0].second.shape(), (Shape{64, 784}));
  EXPECT_EQ(weights.tensors[3].first, "2.bias");
  // Where the time went: recorded beside the metrics, every phase within the wall time.
  EXPECT_TRUE(std::filesystem::exists(summary.run_dir / "phases.json"));
  EXPECT_LE(summary.phases.serial_seconds(), summary.wall_time_s * 1.01 + 1e-3);
  EXPECT_NE(read_file(summary.run_dir / "phases.json").find("\"training\""), std::string::npos);
}

TEST(Trainer, ModelClassesSetsTheOutputWidth) {
  Trainer trainer(small_mnist_config("classes", {"train.epochs=1", "data.train_limit=2000", "model.classes=12"}));
  EXPECT_EQ(trainer.spec().outputs, 12);
  const TrainSummary summary = trainer.fit();
  const SafetensorsFile weights = load_safetensors(summary.run_dir / "model.safetensors");
  EXPECT_EQ(weights.tensors.back().second.shape(), (Shape{12}));
}

TEST(Trainer, SoftmaxRegressionWithoutHiddenLayers) {
  Trainer trainer(small_mnist_config("softmax", {"model.hidden=[]", "optim.lr=0.01"}));
  EXPECT_EQ(trainer.model().size(), 1u);
  const TrainSummary summary = trainer.fit();
  // Softmax regression on the same slice: measured 88.5-88.7 % over seeds 0-2.
  EXPECT_GT(summary.final_test.accuracy, 0.86);
}

TEST(Trainer, SameConfigAndSeedGiveIdenticalResults) {
  const TrainSummary a = Trainer(small_mnist_config("det-a", {"train.epochs=1"})).fit();
  const TrainSummary b = Trainer(small_mnist_config("det-b", {"train.epochs=1"})).fit();
  ASSERT_EQ(a.epochs.size(), b.epochs.size());
  EXPECT_EQ(a.epochs[0].train_loss, b.epochs[0].train_loss);
  EXPECT_EQ(a.final_test.loss, b.final_test.loss);
  EXPECT_EQ(read_file(a.run_dir / "model.safetensors"), read_file(b.run_dir / "model.safetensors"));
  const TrainSummary c = Trainer(small_mnist_config("det-c", {"train.epochs=1", "seed=1"})).fit();
  EXPECT_NE(a.epochs[0].train_loss, c.epochs[0].train_loss);
}

// The engine decides how the products are computed, not what a run trains on: an eager and a compiled run of one
// config and seed see the same batches in the same order every epoch (both take epoch e's order from
// epoch_permutation(the loader's seed, e - 1)), so their epochs agree to the products' rounding (oneDNN's sgemm
// against its matmul primitives). Over 60 seeds 2 epochs of 8 steps (tanh, whose slope follows the rounding
// smoothly; see tests/train/cpu_compiled_step_test.cpp) stayed within 1.5e-7 relative (measured when the eager step
// ran OpenBLAS); the eager loop drawing another epoch's order moved an epoch's train loss by 9e-4 to 4e-2 relative.
// 1e-5 lies between, ~60x from either.
TEST(Trainer, EagerAndCompiledStepsTrainOnTheSameBatches) {
  const auto run = [&](const std::string& engine) {
    return Trainer(small_mnist_config("engine-" + engine,
                                      {fmt::format("seed={}", test::config_seed()), "data.train_limit=1024",
                                       "data.test_limit=500", "train.epochs=2", "model.activation=\"tanh\"",
                                       "device.threads=1", fmt::format("device.engine=\"{}\"", engine)}))
        .fit();
  };
  const TrainSummary eager = run("eager"), compiled = run("compiled");
  ASSERT_EQ(eager.epochs.size(), 2u);
  ASSERT_EQ(compiled.epochs.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    const double expected = eager.epochs[e].train_loss;
    EXPECT_NEAR(compiled.epochs[e].train_loss, expected, 1e-5 * expected) << "epoch " << e + 1;
  }
  EXPECT_NEAR(compiled.final_test.loss, eager.final_test.loss, 1e-5 * eager.final_test.loss);
}

// An epoch's record (its metrics row and epoch line): train_loss is the mean of the epoch's step losses, and lr is
// the rate its last step ran at. The run evaluates its own training samples (data.test_* name the training files)
// at a rate of 1e-9, so the weights stay put: in 4 equal batches the mean of the step means is the evaluation's
// mean loss over the same 512 samples (measured 4e-10 relative apart; 1e-6 allows for other BLAS kernels, and a
// loss divided by the samples instead of the steps is off by 128x).
// A step schedule halving the rate each epoch makes each epoch's last rate differ from the next step's.
// (The golden trainer runs of tests/parity were the only test that caught a loss divided by the samples rather
// than the steps, or the rate of the step after the epoch.)
TEST(Trainer, AnEpochsRecordHasTheMeanStepLossAndTheRateOfItsLastStep) {
  DataConfig mnist;  // MNIST's training files as get-data left them (raw or gzipped)
  mnist.dir = test::data_dir().string();
  const DatasetFiles files = dataset_files(mnist);
  const std::string images = files.train_images.string(), labels = files.train_labels.string();
  const std::vector<std::string> overrides = {
      fmt::format("seed={}", test::config_seed()),
      "data.dataset=\"idx\"",
      fmt::format("data.train_images=\"{}\"", images),
      fmt::format("data.train_labels=\"{}\"", labels),
      fmt::format("data.test_images=\"{}\"", images),
      fmt::format("data.test_labels=\"{}\"", labels),
      "data.train_limit=512",
      "data.test_limit=512",
      "train.batch_size=128",
      "train.epochs=2",
      "optim.lr=1e-9",
      "schedule.type=\"step\"",
      "schedule.step_size=1",
      "schedule.gamma=0.5",
  };
  const TrainSummary summary = Trainer(small_mnist_config("epoch-record", overrides)).fit();
  ASSERT_EQ(summary.epochs.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    const EpochRecord& r = summary.epochs[e];
    EXPECT_DOUBLE_EQ(r.lr, 1e-9 * (e == 0 ? 1.0 : 0.5)) << "epoch " << e + 1;
    ASSERT_TRUE(r.test_loss.has_value()) << "epoch " << e + 1;
    EXPECT_NEAR(r.train_loss, *r.test_loss, 1e-6 * *r.test_loss) << "epoch " << e + 1;
  }
}

// train.eval_every = N evaluates after every N-th epoch and after the last; 0, after the last only.
TEST(Trainer, TestMetricsComeEveryEvalEveryEpochsAndAfterTheLast) {
  const auto evaluated = [](const std::string& name, const std::string& eval_every) {
    const TrainSummary summary = Trainer(small_mnist_config(name, {"data.train_limit=256", "data.test_limit=100",
                                                                   "train.epochs=3", "train.eval_every=" + eval_every}))
                                     .fit();
    std::vector<bool> out;
    for (const EpochRecord& r : summary.epochs) {
      EXPECT_EQ(r.test_loss.has_value(), r.test_accuracy.has_value()) << name << " epoch " << r.epoch;
      out.push_back(r.test_loss.has_value());
    }
    return out;
  };
  EXPECT_EQ(evaluated("eval-every-1", "1"), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(evaluated("eval-every-2", "2"), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(evaluated("eval-every-0", "0"), (std::vector<bool>{false, false, true}));
}

TEST(Trainer, RunDirectoriesAreNeverReused) {
  Config config = small_mnist_config("same-name", {"train.epochs=1", "data.train_limit=512", "data.test_limit=100"});
  const TrainSummary first = Trainer(config).fit();
  const TrainSummary second = Trainer(config).fit();
  EXPECT_NE(first.run_dir, second.run_dir);
}

// output.name is one folder inside output.dir: "../../escape" wrote the run two levels above it, an absolute
// name replaced output.dir, and "." or ".." named output.dir or its parent (the run went to ".-1", "..-1"). Each is
// refused naming the key, by loading (`sprintnet config` too) and by a Trainer given it in code, and nothing is
// written anywhere.
TEST(Trainer, ARunNameThatIsAPathIsRefused) {
  for (const std::string name : {"../../escape", "/tmp/sprintnet-absolute-run", "group/run", ".", ".."}) {
    const std::string expected = fmt::format("output.name = \"{}\": a run's name is one folder", name);
    EXPECT_THAT(test::error_message([&] { small_mnist_config(name); }), ::testing::HasSubstr(expected));
    Config config = small_mnist_config("path-name", {"train.epochs=1", "data.train_limit=512", "data.test_limit=100"});
    config.output.name = name;
    EXPECT_THAT(test::error_message([&] { Trainer(config).fit(); }), ::testing::HasSubstr(expected));
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(config.output.dir) / (name + "-1"))) << name;
    if (name.find('.') != 0) {
      EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(config.output.dir) / name));
    }
  }
}

// A new run that cannot write its first files (a full disk) fails naming the file and leaves no run
// directory behind, so the output folder does not fill with empty runs.
TEST(Trainer, ARunThatCannotStartOnAFullDiskLeavesNoRunDirectory) {
  Config config = small_mnist_config("full-disk", {"train.epochs=1", "data.train_limit=512", "data.test_limit=100"});
  config.output.dir = test::temp_dir("trainer-full-disk").string();
  Trainer trainer(config);
  std::string message;
  {
    const test::FullDisk full;
    try {
      trainer.fit();
    } catch (const Error& e) {
      message = e.what();
    }
  }
  EXPECT_NE(message.find("config.toml"), std::string::npos) << message;
  EXPECT_NE(message.find(test::FullDisk::reason()), std::string::npos) << message;
  ASSERT_TRUE(std::filesystem::exists(config.output.dir));
  EXPECT_TRUE(std::filesystem::is_empty(config.output.dir)) << "a run directory was left in " << config.output.dir;
  // A start that failed left no run: the same trainer may try again once there is room (fit() is refused only
  // once a run exists).
  EXPECT_EQ(trainer.fit().epochs.size(), 1u);
}

TEST(Trainer, DivergenceIsReportedWithTheKeyToChange) {
  Config config = small_mnist_config("diverge", {"train.epochs=1", "data.train_limit=1024", "optim.lr=1e30",
                                                 "optim.momentum=0.0"});
  Trainer trainer(config);
  try {
    trainer.fit();
    FAIL() << "training with lr 1e30 should diverge";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optim.lr"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at a learning rate of 1e+30"), std::string::npos) << e.what();
  }
  // A schedule that raises the rate (gamma > 1) is named too: the lr the run started with was not the culprit.
  Trainer raised(small_mnist_config("diverge-schedule", {"train.epochs=3", "data.train_limit=1024", "optim.lr=0.05",
                                                         "optim.momentum=0.0", "schedule.type=\"step\"",
                                                         "schedule.step_size=1", "schedule.gamma=1e30"}));
  try {
    raised.fit();
    FAIL() << "training with an lr raised 1e30-fold each epoch should diverge";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("schedule.type is \"step\""), std::string::npos) << e.what();
  }
}

// One step at lr 1e20: the train loss is the batch's before the step and the weights stay finite (~1e20 x a
// gradient), but the logits overflow fp32 on the test set. The run ended "successfully" with a NaN test loss and
// weights that eval refuses; it is a divergence now, with no final weights written.
TEST(Trainer, ATestLossThatIsNotFiniteIsADivergence) {
  Config config = small_mnist_config("diverge-test-loss", {"train.epochs=1", "data.train_limit=128", "optim.lr=1e20"});
  Trainer trainer(config);
  EXPECT_THAT([&] { trainer.fit(); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(
                  ::testing::HasSubstr("training diverged: the test loss after epoch 1 is nan"),
                  ::testing::HasSubstr("at a learning rate of 1e+20"), ::testing::HasSubstr("optim.lr"))));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(config.output.dir) / config.output.name / "model.safetensors"));
}

// Momentum above 1 diverges at any learning rate; the message named only optim.lr.
TEST(Trainer, ADivergenceFromMomentumNamesOptimMomentum) {
  Config config = small_mnist_config("diverge-momentum",
                                     {"train.epochs=1", "data.train_limit=8192", "optim.momentum=10.0", "optim.lr=0.1"});
  Trainer trainer(config);
  EXPECT_THAT([&] { trainer.fit(); }, ::testing::ThrowsMessage<Error>(::testing::AllOf(
                                          ::testing::HasSubstr("training diverged"),
                                          ::testing::HasSubstr("optim.momentum below 1 (it is 10"))));
}

// A run too long for the per-step learning-rate table names train.epochs (it was an uncaught std::bad_alloc,
// or a signed overflow); a batch far beyond the data set trains as one batch of it on the compiled CPU step
// (whose buffers were sized by the batch: 313 GB asked for).
TEST(Trainer, ExtremeLengthsAreNamedOrTakenAsTheDataAllows) {
  try {
    Trainer trainer(small_mnist_config("too-long", {"data.train_limit=128", "train.epochs=10000000000000"}));
    FAIL() << "a run of 10^13 epochs was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.epochs = 10000000000000"), std::string::npos) << e.what();
  }
  Trainer huge_batch(small_mnist_config("huge-batch", {"data.train_limit=256", "train.epochs=1",
                                                       "train.batch_size=100000000", "train.drop_last=false",
                                                       "device.engine=\"compiled\""}));
  const TrainSummary summary = huge_batch.fit();
  EXPECT_EQ(summary.epochs.size(), 1u);
  EXPECT_EQ(summary.epochs[0].step, 1);
}

// A Config built in code is held to what loading checks, first thing in the constructor: each value below loading
// refuses, and a hand-built config once ran with it (log_every = 0 divided by zero at the first progress line,
// epochs = 0 failed in the progress bar, every_epochs = -2 was taken as 0, MSE trained without the smoothing asked
// for, rmsprop ran as Adam). The errors name the key. The base config trains, so each case is refused for its one
// value; with data.dir missing too, the error is the key's, not the data's: nothing was loaded before the check.
TEST(Trainer, AConfigBuiltInCodeIsRefusedNamingTheKeyAsLoadingWouldBe) {
  const Config base = small_mnist_config("built-in-code", {"train.epochs=1", "data.train_limit=256",
                                                          "data.test_limit=100"});
  const std::vector<std::pair<std::string, std::function<void(Config&)>>> cases = {
      {"train.log_every: must be >= 1, got 0", [](Config& c) { c.train.log_every = 0; }},
      {"train.epochs: must be >= 1, got 0", [](Config& c) { c.train.epochs = 0; }},
      {"checkpoint.every_epochs: must be >= 0, got -2", [](Config& c) { c.checkpoint.every_epochs = -2; }},
      {"loss.label_smoothing = 0.3 applies to loss.type = \"cross_entropy\" only",
       [](Config& c) {
         c.loss.type = "mse";
         c.loss.label_smoothing = 0.3;
       }},
      {"optim.type: 'rmsprop' is not one of: sgd, adam, adamw", [](Config& c) { c.optim.type = "rmsprop"; }},
      {"train.log_every: must be >= 1, got 0",
       [](Config& c) {
         c.train.log_every = 0;
         c.data.dir = (test::temp_dir("trainer-no-data") / "missing").string();
       }},
  };
  for (const auto& [expected, change] : cases) {
    Config config = base;
    change(config);
    EXPECT_THAT(test::error_message([&] { Trainer trainer(config); }),
                ::testing::AllOf(::testing::StartsWith("train::Trainer's config: "), ::testing::HasSubstr(expected)));
  }
  EXPECT_NO_THROW(Trainer trainer(base));
}

TEST(Trainer, AskingForCudaWithoutAGpuNamesTheKey) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  try {
    Trainer trainer(small_mnist_config("nocuda", {"device.name=\"cuda\""}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device.name"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sprintnet::train
