#pragma once
// Trainer: turns a Config into a trained model. It loads the data, builds the
// MLP, optimizer, schedule and loss, runs the epochs, evaluates, and records
// everything in a run directory:
//   <output.dir>/<output.name>/config.toml      the resolved config (every key)
//                              metrics.jsonl    one row per epoch (and metrics.csv)
//                              model.safetensors final weights, PyTorch nn.Sequential names
// Same config and seed give bit-identical numbers on the CPU.
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "sprintnet/data/dataset.h"
#include "sprintnet/io/config.h"
#include "sprintnet/io/progress_bar.h"
#include "sprintnet/nn/loss.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/optim/lr_schedule.h"
#include "sprintnet/optim/optimizer.h"
#include "sprintnet/train/batch_loader.h"
#include "sprintnet/train/evaluate.h"

namespace sprintnet::train {

struct EpochRecord {
  std::int64_t epoch = 0;  // 1-based
  std::int64_t step = 0;   // optimizer steps so far
  double train_loss = 0.0;
  std::optional<double> test_loss, test_accuracy;
  double epoch_time_s = 0.0;  // training only, evaluation excluded
  double samples_per_s = 0.0;
  double lr = 0.0;
};

struct TrainSummary {
  std::vector<EpochRecord> epochs;
  EvalResult final_test;
  double train_time_s = 0.0;  // sum of epoch times
  double wall_time_s = 0.0;   // from construction to the end of fit()
  std::filesystem::path run_dir;
};

class Trainer {
 public:
  explicit Trainer(Config config);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  TrainSummary fit();

  const Config& config() const { return config_; }
  nn::Sequential& model() { return *model_; }
  Device device() const { return device_; }
  const nn::MlpSpec& spec() const { return spec_; }
  std::int64_t steps_per_epoch() const { return train_loader_->batches_per_epoch(); }
  // A human-readable description of the model, optimizer, data and device.
  std::string describe() const;

 private:
  EpochRecord train_epoch(std::int64_t epoch, ProgressBar& progress);

  Config config_;
  std::chrono::steady_clock::time_point start_;
  Device device_;
  TrainTestData data_;
  Normalization norm_;
  nn::MlpSpec spec_;
  std::unique_ptr<nn::Sequential> model_;
  std::unique_ptr<nn::Loss> loss_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<BatchLoader> train_loader_, test_loader_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  std::int64_t step_ = 0;
};

// The device a config asks for, resolved ("auto" → first GPU, else CPU), with
// a clear error when CUDA is asked for but unavailable.
Device resolve_device(const DeviceConfig& config);
// The compute dtype a config asks for on `device` (the CPU computes in fp32).
DType resolve_precision(const DeviceConfig& config, Device device);

}  // namespace sprintnet::train
