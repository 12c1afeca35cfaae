#pragma once
// Trainer: turns a Config into a trained model. It loads the data, builds the
// MLP, optimizer, schedule and loss, runs the epochs, evaluates, and records
// everything in a run directory:
//   <output.dir>/<output.name>/config.toml      the resolved config (every key)
//                              metrics.jsonl    one row per epoch (and metrics.csv)
//                              model.safetensors final weights, PyTorch nn.Sequential names
//                              checkpoints/     every checkpoint.every_epochs epochs and after the
//                                               last (train/checkpoint.h, docs/CHECKPOINTS.md)
// Same config and seed give bit-identical numbers on the CPU, and so does a run
// resumed from a checkpoint (train/resume.h) on the same device and threads.
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sprintnet/data/dataset.h"
#include "sprintnet/data/dataset_cache.h"
#include "sprintnet/dist/communicator.h"
#include "sprintnet/dist/rank_info.h"
#include "sprintnet/io/config.h"
#include "sprintnet/train/fused_fit.h"
#include "sprintnet/io/progress_bar.h"
#include "sprintnet/nn/loss.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/optim/lr_schedule.h"
#include "sprintnet/optim/optimizer.h"
#include "sprintnet/train/background_writer.h"
#include "sprintnet/train/batch_loader.h"
#include "sprintnet/train/evaluate.h"
#include "sprintnet/train/resume.h"
#include "sprintnet/train/run_phases.h"
#include "sprintnet/train/sm_turns.h"
#include "sprintnet/train/train_plan.h"

namespace sprintnet::train {

struct EpochRecord {
  std::int64_t epoch = 0;  // 1-based
  std::int64_t step = 0;   // optimizer steps so far
  double train_loss = 0.0;
  std::optional<double> test_loss, test_accuracy;
  double epoch_time_s = 0.0;  // training only, evaluation excluded
  double samples_per_s = 0.0;
  double lr = 0.0;
  std::int64_t skipped_updates = 0;  // fp16: steps whose gradient overflowed, their update skipped (the scale halved)
};

struct TrainSummary {
  std::vector<EpochRecord> epochs;
  EvalResult final_test;
  double train_time_s = 0.0;  // sum of epoch times
  double wall_time_s = 0.0;   // from construction (or count_time_before()'s start) to the end of fit()
  std::filesystem::path run_dir;
  RunPhases phases;  // where wall_time_s went; also in <run>/phases.json
  // Set when a stop request (core/stop_request.h) ended the run after its last epoch here, short of
  // train.epochs: the signal, or 0 from the program. That epoch's checkpoint is written.
  std::optional<int> stop_signal;
};

// The engine a run trains on (resolve_engine()) and why.
enum class Engine { kEager, kCompiled, kFused };
struct EngineChoice {
  Engine engine = Engine::kEager;
  std::string reason;
};

class Trainer {
 public:
  // A config built in code is first held to what loading checks (validate_config, io/config.h): an Error
  // names every key at fault before anything is loaded or started.
  explicit Trainer(Config config);
  // Continues plan.run_dir from plan.checkpoint with plan.config: weights, optimizer state and
  // step counter are restored, and fit() runs the remaining epochs, appending to the run's
  // metrics. Throws naming the checkpoint file when it does not fit the model or optimizer.
  explicit Trainer(const ResumePlan& plan);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains the epochs after start_epoch(). The summary lists only the epochs this call trained. A stop request
  // (core/stop_request.h) ends it early after an epoch and that epoch's checkpoint (one rank only). Once a
  // trainer: a run goes on from its checkpoint through plan_resume and a new Trainer.
  TrainSummary fit();
  // Called after each epoch's metrics row, final weights and checkpoint are written. A callback
  // may throw to end the run there (the tests use this to stand in for a kill), or call request_stop()
  // to end it after this epoch, resumably (its checkpoint is then written, due or not).
  void on_epoch_end(std::function<void(const EpochRecord&)> callback) { epoch_callback_ = std::move(callback); }
  // No per-epoch lines on stderr (a sweep prints one line per run instead).
  void set_quiet(bool quiet) { quiet_ = quiet; }
  // Runs sharing this GPU (a sweep's): where an epoch is one persistent kernel, fit() waits for a
  // turn for its SMs before the first epoch and gives it back after the last evaluation.
  void take_turns(SmTurns* turns) { turns_ = turns; }
  // The process's time before this trainer (process_age_s() taken before constructing it): a phase
  // of its own, counted in the summary's wall time. The CLI's one-run commands call it.
  void count_time_before(double seconds);

  const Config& config() const { return config_; }
  nn::Sequential& model() { return *model_; }
  Device device() const { return device_; }
  const nn::MlpSpec& spec() const { return spec_; }
  std::int64_t steps_per_epoch() const { return train_loader_->batches_per_epoch(); }
  // Epochs completed before fit(): 0, or the epoch of the checkpoint a resumed run continues from.
  std::int64_t start_epoch() const { return start_epoch_; }
  // A human-readable description of the model, optimizer, data and device.
  std::string describe() const;
  // The compiled GPU step the epochs run on, or null when they run eager (train/train_plan.h).
  TrainPlan* plan() const { return plan_.get(); }
  // The run directory fit() trains in, also after it threw (a diverged run's metrics are there); empty until fit()
  // has its directory locked and its metrics files open, and on ranks other than 0.
  std::filesystem::path run_dir() const { return fit_called_ ? last_run_dir_ : std::filesystem::path(); }
  // This process's rank in a data-parallel job (rank 0 of 1 otherwise).
  const dist::RankInfo& rank() const { return rank_; }
  // The engine the epochs run on.
  Engine engine() const { return engine_.engine; }
  // The precision the step computes in ("fp32", "bf16", ...).
  const std::string& precision() const { return precision_; }

 private:
  Trainer(Config config, const ResumePlan* plan);
  EpochRecord train_epoch(std::int64_t epoch, ProgressBar& progress);
  EpochRecord train_epoch_compiled(std::int64_t epoch, ProgressBar& progress);
  // Data parallel: waits for the plan's stream, watching NCCL's errors; the communicator's watchdog
  // ends the rank when a peer stopped (no progress for 30 s). Nothing to wait for with one rank.
  void wait_for_ranks();
  EvalResult evaluate_test();
  // Shared by both epoch loops: whether progress is shown, one progress line, the epoch's record.
  bool progress_shown() const;
  void show_progress_at(ProgressBar& progress, std::int64_t epoch, std::int64_t steps_done, double loss_sum,
                        std::chrono::steady_clock::time_point start) const;
  EpochRecord epoch_record(std::int64_t epoch, std::chrono::steady_clock::time_point start, double loss_sum) const;
  void compile_plan();
  // Rows per evaluation batch: train.eval_batch_size, at most the test set.
  std::int64_t eval_batch_size() const { return std::min(config_.train.eval_batch_size, loaded_.data.test.size()); }
  void restore(const Checkpoint& checkpoint);
  // Metadata of the weights files (<run>/model.safetensors and each checkpoint's).
  Metadata weights_metadata() const;
  // Hands this epoch's final weights and/or checkpoint, from a host snapshot, to the background writer.
  void write_in_background(const std::filesystem::path& run_dir, std::int64_t epoch, bool weights, bool checkpoint);

  Config config_;
  std::chrono::steady_clock::time_point start_;
  Device device_;
  LoadedData loaded_;  // the data set (shared with other runs of the process) and its normalization
  std::string train_data_;  // training_data_fingerprint() of loaded_, which checkpoints keep and a resume compares
  // fp16: the plan's loss scaling as of the last store (what a checkpoint keeps), or a resumed run's from its
  // checkpoint, which the plan starts from.
  std::optional<LossScaling> loss_scaling_;
  nn::MlpSpec spec_;
  std::unique_ptr<nn::Sequential> model_;
  std::unique_ptr<nn::Loss> loss_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<BatchLoader> train_loader_, test_loader_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  std::string precision_;
  EngineChoice engine_;
  dist::RankInfo rank_;                       // this process's place in a data-parallel job
  std::unique_ptr<dist::Communicator> comm_;  // null unless rank_.distributed(); outlives plan_ (its graphs)
  std::unique_ptr<TrainPlan> plan_;
  std::int64_t step_ = 0;
  std::int64_t start_epoch_ = 0;
  std::filesystem::path resume_run_dir_;  // empty unless resuming
  bool fit_called_ = false;
  std::filesystem::path last_run_dir_;    // fit()'s run, for the message of a second call
  std::function<void(const EpochRecord&)> epoch_callback_;
  bool quiet_ = false;
  SmTurns* turns_ = nullptr;
  RunPhases phases_;
  double before_trainer_s_ = 0.0;
  BackgroundWriter writer_;  // last member: destroyed first, waiting for its job while the rest still lives
};

// The device a config asks for, resolved ("auto" → first GPU, else CPU), with
// a clear error when CUDA is asked for but unavailable.
Device resolve_device(const DeviceConfig& config);
// Whether `config` trains with a compiled step (device.engine, resolved: "auto" compiles on the
// CPU always, on a GPU when train_plan_unsupported() has no objection). Errors name the key and the reason.
bool resolve_compiled(const Config& config, Device device);
// The engine a GPU run trains on, and why (for the banner): device.engine = "fused" runs the fused
// engine (one kernel per epoch) or fails naming the limit; "auto" takes the fused engine's split
// kernel (fused_split_unsupported) or cluster kernel (fused_cluster_unsupported) for every model
// one takes where `fused_kernel_runs(kernel)` (the GPU runs it, and the run is on one GPU: the
// fastest engine there, docs/PERFORMANCE.md; asked only for such models, as the answer loads the
// kernel), else the compiled step where it runs, else the fused engine where the model fits
// (fused_unsupported() with `on_chip_bytes`), else eager.
const char* engine_name(Engine engine);
EngineChoice resolve_engine(const Config& config, Device device, const nn::MlpSpec& mlp,
                            std::int64_t eval_batch, std::int64_t on_chip_bytes,
                            const std::function<bool(FusedKernel)>& fused_kernel_runs = {});
// The precision a config asks for ("fp32", "tf32", "bf16", "fp16"): "auto" is bf16 for the
// compiled GPU step and fp32 otherwise; only a compiled step computes in anything but fp32, the
// CPU's in fp32 or bf16.
std::string resolve_precision(const DeviceConfig& config, Device device, bool compiled);

}  // namespace sprintnet::train
