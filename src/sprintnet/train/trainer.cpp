#include "sprintnet/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <new>
#include <optional>
#include <utility>

#include "sprintnet/core/stop_request.h"
#include "sprintnet/data/dataset_cache.h"
#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/metrics_writer.h"
#include "sprintnet/io/progress_format.h"
#include "sprintnet/io/safetensors.h"
#include "sprintnet/memory/cuda_allocator.h"
#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/optim/make_optimizer.h"
#include "sprintnet/train/checkpoint.h"
#include "sprintnet/train/divergence_advice.h"
#include "sprintnet/train/fused_fit.h"
#include "sprintnet/train/inference.h"
#include "sprintnet/train/model_io.h"
#include "sprintnet/train/run_directory.h"

namespace sprintnet::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Separate Philox streams for the weights and the data order, so changing the
// model does not change the batch order and vice versa.
constexpr std::uint64_t kInitStream = 1;
constexpr std::uint64_t kShuffleSeedSalt = 0x9E3779B97F4A7C15ULL;

// A config built in code is held to what loading checks before anything runs on it (train.log_every = 0 divided
// by zero at the first progress line; checkpoint.every_epochs = -2 was taken as 0).
Config validated(Config config) {
  validate_config(config, "train::Trainer's config");
  return config;
}

}  // namespace

Device resolve_device(const DeviceConfig& config) {
  const Device device = parse_device(config.name);
  if (device.is_cuda()) {
    const int count = cuda_device_count();
    SN_CHECK(count > 0, "device.name = \"{}\": {}", config.name, cuda_unavailable_reason());
    SN_CHECK(device.index < count, "device.name = \"{}\": only {} CUDA device(s)", config.name, count);
  }
  return device;
}

bool resolve_compiled(const Config& config, Device device) {
  const std::string& engine = config.device.engine;
  if (engine == "eager") return false;
  if (device.is_cpu()) return true;  // the compiled CPU step runs every model, loss and batch
  const std::optional<std::string> why_not = train_plan_unsupported(config);
  SN_CHECK(engine != "compiled" || !why_not,
           "device.engine = \"compiled\" cannot compile this run: {}; use \"auto\" or \"eager\"",
           why_not.value_or(""));
  return !why_not;
}

const char* engine_name(Engine engine) {
  switch (engine) {
    case Engine::kEager: return "eager";
    case Engine::kCompiled: return "compiled";
    case Engine::kFused: return "fused";
  }
  return "eager";
}

EngineChoice resolve_engine(const Config& config, Device device, const nn::MlpSpec& mlp,
                            std::int64_t eval_batch, std::int64_t on_chip_bytes,
                            const std::function<bool(FusedKernel)>& fused_kernel_runs) {
  const std::string& engine = config.device.engine;
  if (device.is_cpu()) {
    SN_CHECK(engine != "fused", "device.engine = \"fused\" needs a GPU; the CPU runs the compiled or the eager step "
             "(use \"auto\")");
    if (resolve_compiled(config, device)) {
      return {Engine::kCompiled, engine == "compiled" ? "device.engine = \"compiled\"" : "auto: the compiled CPU step"};
    }
    return {Engine::kEager, "device.engine = \"eager\""};
  }
  if (engine == "eager") return {Engine::kEager, "device.engine = \"eager\""};
  // The precision a GPU engine computes in ("auto": bf16).
  const std::string precision = config.device.precision == "auto" ? "bf16" : config.device.precision;
  const std::optional<std::string> not_fused = fused_unsupported(mlp, precision, config.optim, config.train.batch_size,
                                                                 eval_batch, on_chip_bytes);
  SN_CHECK(engine != "fused" || !not_fused, "device.engine = \"fused\" cannot run this model: {}; use \"auto\" or "
           "\"compiled\"", not_fused.value_or(""));
  if (engine == "fused") return {Engine::kFused, "device.engine = \"fused\""};
  // auto: the split or the cluster kernel wherever it runs, as each measured faster than the compiled
  // step on every model it takes (docs/PERFORMANCE.md, H100: v6 1.02-2.3x, v7 1.41x at 784 wide and
  // 1.27-1.41x at 256 wide); else the
  // compiled step, which runs every model the fused engine runs; eager only where neither runs (a
  // batch over 65535 samples).
  if (engine == "auto" && !not_fused && fused_kernel_runs) {
    // Every optimizer: with adam_update_fast, Adam and AdamW measured 1.3-1.5x the compiled step there
    // too (docs/FUSED.md, "Adam without slow paths").
    // (Two hidden layers of at most 128: the rows kernel's, below.)
    if (!fused_quads_unsupported(mlp, precision, config.optim, config.train.batch_size) &&
        fused_rows_unsupported(mlp, precision, config.train.batch_size) && fused_kernel_runs(FusedKernel::kQuads)) {
      return {Engine::kFused, "auto: models of two hidden layers at most 256 wide trained by SGD take the fused engine's "
                              "quads kernel (one 16-block cluster as four quads of 32 rows: the split kernel's speed on "
                              "half its SMs, so twice the runs share a GPU)"};
    }
    if (!fused_split_unsupported(mlp, precision, config.train.batch_size) &&
        fused_kernel_runs(FusedKernel::kSplit)) {
      return {Engine::kFused, "auto: models of 1 to 3 hidden layers all 784 or all 256 wide at a batch of at most 128 "
                              "train fastest on the fused engine's split kernel"};
    }
    if (!fused_regression_unsupported(mlp, precision, config.train.batch_size) &&
        fused_kernel_runs(FusedKernel::kRegression)) {
      return {Engine::kFused, "auto: models without a hidden layer (softmax regression) train fastest on the fused "
                              "engine's regression kernel"};
    }
    if (!fused_rows_unsupported(mlp, precision, config.train.batch_size) && fused_kernel_runs(FusedKernel::kRows)) {
      return {Engine::kFused, "auto: models of 1 to 3 hidden layers at most 128 wide train fastest on the fused engine's "
                              "rows kernel (one 16-block cluster, the batch's rows split over its blocks)"};
    }
    if (!fused_cluster_unsupported(mlp, precision, config.train.batch_size) &&
        fused_kernel_runs(FusedKernel::kCluster)) {
      return {Engine::kFused, mlp.hidden.empty()
                                  ? "auto: softmax regression trains fastest on the fused engine's cluster kernel"
                                  : "auto: models that fit one 16-block cluster (hidden layers at most 128 wide) "
                                    "train fastest on the fused engine's cluster kernel"};
    }
  }
  if (resolve_compiled(config, device)) {
    return {Engine::kCompiled, engine == "compiled" ? "device.engine = \"compiled\""
                                                    : "auto: the compiled step runs this model, the fastest engine"};
  }
  return {Engine::kEager, fmt::format("auto: not compiled, {}; not fused, {}",
                                      train_plan_unsupported(config).value_or(""),
                                      not_fused.value_or("the compiled step is faster"))};
}

std::string resolve_precision(const DeviceConfig& config, Device device, bool compiled) {
  if (config.precision == "auto") return compiled && !device.is_cpu() ? "bf16" : "fp32";
  if (config.precision == "fp32") return "fp32";
  SN_CHECK(!device.is_cpu() || config.precision == "bf16",
           "device.precision = \"{}\" needs a GPU; the CPU computes in fp32 or bf16 (use \"auto\")", config.precision);
  SN_CHECK(compiled,
           "device.precision = \"{}\" needs the compiled step, and this run is eager (device.engine = \"{}\"): "
           "use \"fp32\" or \"auto\"", config.precision, config.engine);
  return config.precision;
}

Trainer::Trainer(Config config) : Trainer(std::move(config), nullptr) {}

Trainer::Trainer(const ResumePlan& plan) : Trainer(plan.config, &plan) {}

Trainer::Trainer(Config config, const ResumePlan* plan)
    : config_(validated(std::move(config))), start_(Clock::now()) {
  rank_ = dist::rank_info_from(dist::process_environment());
  // The data loads, and its normalization is computed, on a helper thread while the device starts
  // (CUDA context, library handles).
  double data_start_s = 0.0, data_end_s = 0.0;  // on the process clock
  std::future<LoadedData> data = std::async(std::launch::async, [this, &data_start_s, &data_end_s] {
    data_start_s = process_clock_s();
    LoadedData loaded = load_train_test_cached(config_.data, config_.model.classes);  // once per process (sweeps)
    data_end_s = process_clock_s();
    return loaded;
  });
  {
    const ScopedPhase phase(phases_, "device start-up");
    device_ = resolve_device(config_.device);
    if (rank_.distributed()) {
      // One GPU per rank: LOCAL_RANK picks it (docs/DISTRIBUTED.md).
      SN_CHECK(!device_.is_cpu(), "rank {} of {}: data-parallel training runs on GPUs; device.name = \"{}\"",
               rank_.rank, rank_.world, config_.device.name);
      const int gpus = cuda_device_count();
      SN_CHECK(rank_.local_rank < gpus, "rank {} of {}: LOCAL_RANK = {}, but this machine has {} GPU(s)", rank_.rank,
               rank_.world, rank_.local_rank, gpus);
      device_ = Device::cuda(rank_.local_rank);
    }
    if (device_.is_cuda() && config_.device.allocator != "auto") {
      set_cuda_allocator_kind(parse_cuda_allocator_kind(config_.device.allocator));
    }
    set_cpu_threads(static_cast<int>(config_.device.threads));
    backend_for(device_).synchronize();  // creates the device's context and library handles now
  }
  {
    const ScopedPhase phase(phases_, "waiting for the data");
    loaded_ = data.get();
  }
  train_data_ = training_data_fingerprint(loaded_.data.train, loaded_.norm);
  phases_.add_span("data read, conversion and normalization", data_start_s, data_end_s, true);
  std::optional<ScopedPhase> phase(std::in_place, phases_, "model and optimizer");
  spec_.inputs = loaded_.data.train.images.size(1);
  spec_.hidden = config_.model.hidden;
  spec_.outputs = loaded_.data.train.num_classes;
  spec_.activation = ops::parse_activation(config_.model.activation);
  spec_.bias = config_.model.bias;
  spec_.init = nn::parse_init(config_.model.init);
  engine_ = resolve_engine(config_, device_, spec_, eval_batch_size(),
                           device_.is_cuda() ? gpu_on_chip_bytes(device_.index) : 0,
                           [&](FusedKernel kernel) {
                             if (!device_.is_cuda() || rank_.distributed()) return false;
                             if (kernel == FusedKernel::kSplit) {
                               // Beside other runs only where its shape shares a GPU (a sweep of 16 default
                               // runs, 8 at a time: 1.39 s against 1.83 s on the compiled step, docs/SWEEP.md).
                               return (fused_split_shares_a_gpu(spec_) || !gpu_shared_with_other_runs(device_.index)) &&
                                      gpu_runs_split_kernel(device_.index, spec_.hidden.empty() ? 0 : spec_.hidden.front(),
                                                            static_cast<std::int64_t>(spec_.hidden.size()));
                             }
                             if (kernel == FusedKernel::kRegression) return gpu_runs_regression_kernel(device_.index);
                             if (kernel == FusedKernel::kRows) return gpu_runs_rows_kernel(device_.index, spec_);
                             if (kernel == FusedKernel::kQuads) return gpu_runs_quads_kernel(device_.index, spec_);
                             return gpu_runs_cluster_kernel(device_.index, spec_);
                           });
  if (rank_.distributed()) {
    SN_CHECK(engine_.engine == Engine::kCompiled,
             "rank {} of {}: data parallelism runs the compiled step, and this run would take the {} engine ({}); "
             "use device.engine = \"auto\" or \"compiled\" with a config the compiled step runs",
             rank_.rank, rank_.world, engine_name(engine_.engine), engine_.reason);
    comm_ = dist::Communicator::join(rank_, device_.index);
  }
  const bool compiled = engine_.engine != Engine::kEager;
  precision_ = resolve_precision(config_.device, device_, compiled);
  const DType dtype = DType::kF32;  // the eager model: fp32 (the compiled step's master weights)
  Generator init_gen(config_.seed, kInitStream);
  model_ = nn::make_mlp(spec_, init_gen, device_, dtype);

  loss_ = nn::make_loss(config_.loss.type, config_.loss.label_smoothing);
  optimizer_ = optim::make_optimizer(config_.optim, model_->parameters());

  phase.emplace(phases_, "loaders (the data set to the device)");
  const LoaderOptions train_options{config_.train.batch_size, config_.train.shuffle, config_.train.drop_last,
                                    config_.seed ^ kShuffleSeedSalt};
  const TrainTestData on_device_data = on_device(loaded_, device_);  // one copy a device per process (sweeps)
  train_loader_ = std::make_unique<BatchLoader>(on_device_data.train, loaded_.norm, train_options, device_, dtype);
  const LoaderOptions test_options{eval_batch_size(), false, false, 0};
  test_loader_ = std::make_unique<BatchLoader>(on_device_data.test, loaded_.norm, test_options, device_, dtype);

  const std::int64_t steps = train_loader_->batches_per_epoch();
  // The compiled engines keep a learning rate a step (8 bytes each): a bound on the run, checked before the
  // product can overflow.
  constexpr std::int64_t kMaxRunSteps = 100'000'000;
  SN_CHECK(config_.train.epochs <= kMaxRunSteps / std::max<std::int64_t>(steps, 1),
           "train.epochs = {} at {} steps an epoch is more than the {} steps a run may take; lower train.epochs "
           "(or raise train.batch_size)",
           config_.train.epochs, steps, kMaxRunSteps);
  schedule_ = std::make_unique<optim::LrSchedule>(config_.schedule, config_.optim.lr, steps,
                                                  steps * config_.train.epochs, /*resumed=*/plan != nullptr);
  if (plan != nullptr) {
    phase.emplace(phases_, "checkpoint restore");
    restore(plan->checkpoint);
    resume_run_dir_ = plan->run_dir;
  }
  if (compiled) {
    phase.emplace(phases_, "plan (buffers, GEMM library set-up)");
    compile_plan();
  }
}

void Trainer::compile_plan() {
  TrainPlanSpec spec;
  spec.mlp = spec_;
  spec.optim = config_.optim;
  spec.label_smoothing = config_.loss.label_smoothing;
  spec.loss = config_.loss.type;
  spec.precision = precision_;
  spec.train = train_loader_.get();
  spec.eval_batch_size = eval_batch_size();
  spec.rank = rank_.rank;
  spec.world = rank_.world;
  spec.nccl_comm = comm_ ? comm_->nccl_handle() : nullptr;
  spec.update = config_.device.update;
  const std::int64_t total = steps_per_epoch() * config_.train.epochs;
  spec.lr_per_step.reserve(static_cast<std::size_t>(total));
  for (std::int64_t s = 0; s < total; ++s) spec.lr_per_step.push_back(schedule_->lr_at(s));
  plan_ = engine_.engine == Engine::kFused ? make_fused_train_plan(spec, device_)
          : device_.is_cpu()                 ? make_cpu_train_plan(spec)
                                             : make_cuda_train_plan(spec, device_);
  plan_->load(*model_, *optimizer_);
  if (loss_scaling_) plan_->set_loss_scaling(*loss_scaling_);
}

namespace {

// Optimizer state no training writes: a NaN or infinite value (or a negative second moment, whose square root the
// update takes) would turn every weight it touches into NaN, which the loader of weights then refuses.
// (The checkpoint's fp32 host tensors, read in place; another dtype is load_state's to refuse, right after.)
void check_optimizer_state_values(const optim::NamedTensors& state, const std::string& origin) {
  const std::optional<std::string> bad = first_non_finite(state);  // the weights' check
  SN_CHECK(!bad, "{}: optimizer state: {}, which no training writes", origin, bad.value_or(""));
  for (const auto& [name, tensor] : state) {
    if (!name.ends_with("exp_avg_sq") || tensor.dtype() != DType::kF32) continue;
    const auto values = tensor.span<float>();
    const auto negative = std::find_if(values.begin(), values.end(), [](float v) { return v < 0.0f; });
    SN_CHECK(negative == values.end(), "{}: optimizer state '{}' holds {} at element {}, which no training writes",
             origin, name, negative == values.end() ? 0.0f : *negative, negative - values.begin());
  }
}

}  // namespace

void Trainer::restore(const Checkpoint& checkpoint) {
  const std::string weights_file = (checkpoint.dir / kCheckpointModelFileName).string();
  const std::string state_file = (checkpoint.dir / kCheckpointStateFileName).string();
  SN_CHECK(checkpoint.epoch < config_.train.epochs, "{}: the run has already trained {} of train.epochs = {} epochs",
           state_file, checkpoint.epoch, config_.train.epochs);
  // The step count is a pure function of the data size and batch size, which must not have changed.
  const std::int64_t steps = steps_per_epoch();
  SN_CHECK(checkpoint.step == checkpoint.epoch * steps,
           "{}: step {} is not {} epochs of {} steps: the training data or batch size differs from the run's",
           state_file, checkpoint.step, checkpoint.epoch, steps);
  SN_CHECK(checkpoint.optimizer_type == config_.optim.type, "{}: optimizer state of '{}', the config asks for '{}'",
           state_file, checkpoint.optimizer_type, config_.optim.type);
  const auto optimizer_steps = checkpoint.optimizer_counters.find("steps");
  SN_CHECK(optimizer_steps == checkpoint.optimizer_counters.end() || optimizer_steps->second == checkpoint.step,
           "{}: the optimizer took {} steps, the run {}", state_file, optimizer_steps->second, checkpoint.step);
  // The data paths may change on resume (the data moved, another working directory), the data may not.
  SN_CHECK(checkpoint.train_data.empty() || checkpoint.train_data == train_data_,
           "{}: the run trained on other data ({}) than data.* gives now ({}): the data paths may change on resume "
           "to find the same files, not other ones", state_file, checkpoint.train_data, train_data_);
  load_model_weights(*model_, checkpoint.weights, weights_file);
  check_optimizer_state_values(checkpoint.optimizer_state, state_file);
  // Every parameter has a gradient at every step of a run: its counters follow the step count, except that fp16's
  // dynamic loss scaling skips whole updates (docs/CHECKPOINTS.md).
  optimizer_->load_state(checkpoint.optimizer_state, checkpoint.optimizer_counters, state_file,
                         precision_ == "fp16" ? optim::UpdateCounts::kEveryStepUnlessSkipped
                                              : optim::UpdateCounts::kEveryStep);
  // (Another precision on resume has no use for fp16's scaling; an fp16 checkpoint without it starts from the
  // initial scale, as before it was kept.)
  if (precision_ == "fp16") loss_scaling_ = checkpoint.loss_scaling;
  step_ = checkpoint.step;
  start_epoch_ = checkpoint.epoch;
}

// What safetensors.torch expects of a state dict, and the normalization, sample shape and activation eval and
// predict need: with them the weights are self-contained, inference never re-reads (or depends on) the training
// data, and a config of another activation is refused rather than evaluated.
Metadata Trainer::weights_metadata() const {
  Metadata metadata = inference_metadata(loaded_.norm, loaded_.data.train.sample_shape, spec_.activation);
  metadata.emplace("format", "pt");
  metadata.emplace("producer", "sprintnet");
  return metadata;
}

void Trainer::write_in_background(const std::filesystem::path& run_dir, std::int64_t epoch, bool weights,
                                  bool checkpoint) {
  // The snapshot is taken now, on this thread; the writer owns it while training goes on.
  TensorList snapshot = host_copy(model_weights(*model_));
  // A NaN weight whose loss stayed finite (ReLU maps a NaN pre-activation to 0) is a divergence too: written,
  // it would make a final model and a checkpoint that eval, predict and resume refuse.
  const std::optional<std::string> bad = first_non_finite(snapshot);
  const double lr = schedule_->lr_at(step_ - 1);
  SN_CHECK(!bad, "training diverged: after epoch {} at a learning rate of {:g}, {} ({}); metrics so far are in {}", epoch,
           lr, bad.value_or(""), train::divergence_advice(config_, lr), run_dir.string());
  std::optional<Checkpoint> state;
  if (checkpoint) {
    state.emplace();
    state->epoch = epoch;
    state->step = step_;
    state->config = config_;
    state->weights = snapshot;
    state->weights_metadata = weights_metadata();
    state->optimizer_type = config_.optim.type;
    state->optimizer_state = host_copy(optimizer_->state());
    state->optimizer_counters = optimizer_->counters();
    state->train_data = train_data_;
    state->loss_scaling = loss_scaling_;
  }
  // What a failed write leaves to resume from, named in its error. (The writer's previous job, if it still runs,
  // names a newer one only once it is whole.)
  const std::string previous = latest_checkpoint_name(run_dir);
  writer_.submit([run_dir, weights, snapshot = std::move(snapshot), state = std::move(state),
                  metadata = weights_metadata(), keep_last = config_.checkpoint.keep_last] {
    // The final weights go first: a run killed before its last checkpoint redoes the last epoch
    // on resume and rewrites them identically.
    if (weights) save_safetensors(run_dir / "model.safetensors", snapshot, metadata);
    if (state) write_checkpoint(run_dir, *state, keep_last);
  }, fmt::format("epoch {}'s {} in {} ({})", epoch, checkpoint ? "checkpoint" : "weights", run_dir.string(),
                 previous.empty() ? "no checkpoint was written before it: free memory and train the run again"
                                  : fmt::format("its last complete checkpoint, {}, stays: free memory and resume "
                                                "the run", previous)));
}

Trainer::~Trainer() = default;

void Trainer::count_time_before(double seconds) {
  before_trainer_s_ = seconds;
  phases_.add_first("process start to trainer (exec, libraries, config)", seconds, process_clock_at(start_));
}

std::string Trainer::describe() const {
  std::string resuming;
  if (!resume_run_dir_.empty()) {
    resuming = fmt::format("\nresuming {} after epoch {} of {} (step {})", resume_run_dir_.string(), start_epoch_,
                           config_.train.epochs, step_);
  }
  const std::string eager = fmt::format("eager step, {}{}", precision_,
                                        device_.is_cpu() ? ", products by " + eager_gemm_description() : "");
  const std::string engine = fmt::format("{} ({})", plan_ ? plan_->describe() : eager, engine_.reason);
  return fmt::format("{} train / {} test samples of {} ({}), {}\n{}\n{}, {}, batch {}, {}, lr schedule {}\n{}",
                     loaded_.data.train.size(), loaded_.data.test.size(), config_.data.dataset,
                     counted(loaded_.data.train.num_classes, "class", "classes"),
                     device_.is_cpu() ? fmt::format("cpu ({})", counted(cpu_threads(), "thread")) : device_.str(),
                     model_->describe(), optimizer_->describe(), loss_->describe(), config_.train.batch_size,
                     counted(config_.train.epochs, "epoch"), schedule_->describe(), engine) +
         resuming;
}

EpochRecord Trainer::train_epoch(std::int64_t epoch, ProgressBar& progress) {
  model_->train();
  train_loader_->start_epoch(epoch - 1);
  const std::int64_t steps = train_loader_->batches_per_epoch();
  // Per-step mean losses summed on the device; read only when progress is shown.
  const Tensor loss_sum = Tensor::zeros({1}, DType::kF32, device_);
  const bool show_progress = progress_shown();
  const auto start = Clock::now();
  for (std::int64_t b = 0; b < steps; ++b) {
    optimizer_->set_lr(schedule_->lr_at(step_));
    const Batch batch = train_loader_->batch(b);
    optimizer_->zero_grad();
    const Tensor logits = model_->forward(batch.inputs);
    const Tensor loss = loss_->forward(logits, batch.labels);
    model_->backward(loss_->backward());
    optimizer_->step();
    ops::axpy(loss_sum, loss);
    ++step_;
    if (show_progress && ((b + 1) % config_.train.log_every == 0 || b + 1 == steps)) {
      show_progress_at(progress, epoch, b + 1, loss_sum.item(), start);
    }
  }
  backend_for(device_).synchronize();
  return epoch_record(epoch, start, loss_sum.item());
}

bool Trainer::progress_shown() const {
  return resolve_progress_mode(config_.output.progress, stderr_is_terminal()) != ProgressMode::kNone;
}

void Trainer::show_progress_at(ProgressBar& progress, std::int64_t epoch, std::int64_t steps_done, double loss_sum,
                               Clock::time_point start) const {
  const double elapsed = seconds_since(start);
  // The samples seen: a partial last batch (train.drop_last = false) holds fewer than a batch.
  const std::int64_t samples = std::min(steps_done * config_.train.batch_size, train_loader_->samples_per_epoch());
  progress.update(epoch, steps_done, loss_sum / static_cast<double>(steps_done),
                  static_cast<double>(samples) / std::max(elapsed, 1e-9));
}

EpochRecord Trainer::epoch_record(std::int64_t epoch, Clock::time_point start, double loss_sum) const {
  EpochRecord record;
  record.epoch = epoch;
  record.step = step_;
  record.epoch_time_s = seconds_since(start);
  record.train_loss = loss_sum / static_cast<double>(steps_per_epoch());
  record.samples_per_s = static_cast<double>(train_loader_->samples_per_epoch()) / record.epoch_time_s;
  record.lr = schedule_->lr_at(step_ - 1);  // the last step's: what the optimizer was set to
  return record;
}

EpochRecord Trainer::train_epoch_compiled(std::int64_t epoch, ProgressBar& progress) {
  const std::int64_t steps = steps_per_epoch();
  const bool show_progress = progress_shown();
  const auto start = Clock::now();
  // Nothing in this loop waits for the device: steps are graph launches, progress reads are
  // asynchronous copies shown when they have arrived (tests/train/host_sync_gpu_test.cpp counts).
  plan_->start_epoch(epoch - 1);
  // Data parallel: ~32 progress marks an epoch, which the communicator's watchdog watches to end
  // the job when a peer dies or hangs (dist/stall_detector.h); one one-element kernel each, no wait.
  const std::int64_t mark_every = std::max<std::int64_t>(1, steps / 32);
  for (std::int64_t b = 0; b < steps; ++b) {
    plan_->step();
    if (comm_ && (b + 1) % mark_every == 0) comm_->mark(plan_->stream_handle());
    if (show_progress && (b + 1) % config_.train.log_every == 0) {
      if (const auto seen = plan_->progress(b + 1)) {
        show_progress_at(progress, epoch, seen->steps, seen->loss_sum, start);
      }
    }
  }
  wait_for_ranks();
  const EpochTotals totals = plan_->finish_epoch();
  step_ += steps;
  EpochRecord record = epoch_record(epoch, start, totals.loss_sum);
  record.skipped_updates = totals.skipped;
  if (show_progress) progress.update(epoch, steps, record.train_loss, record.samples_per_s);
  return record;
}

void Trainer::wait_for_ranks() {
  if (comm_) comm_->wait(plan_->stream_handle());
}

EvalResult Trainer::evaluate_test() {
  if (plan_) return plan_->evaluate(*test_loader_);
  return evaluate(*model_, *test_loader_, config_.loss.type);
}

TrainSummary Trainer::fit() {
  // A second fit() trained the same epochs again from the trained weights, into a new run whose checkpoints
  // resume refused (their step count went on from the first run's).
  SN_CHECK(!fit_called_, "Trainer::fit() was already called on this trainer{}: to train more epochs, resume the "
           "run with a higher train.epochs (train::plan_resume, or `sprintnet train --resume RUN_DIR --set "
           "train.epochs=N`); for a new run, make a new Trainer",
           last_run_dir_.empty() ? "" : fmt::format(" (its run is {})", last_run_dir_.string()));
  TrainSummary summary;
  const bool resumed = !resume_run_dir_.empty();
  // Data parallel: rank 0 alone writes the run (directory, metrics, checkpoints, weights) and
  // evaluates; the other ranks train in step with it.
  const bool primary = rank_.primary();
  // The run directory's lock, held while fit() runs; on any way out, `writes_finished` (destroyed first) waits for
  // the writes in flight before the lock goes. (A Trainer whose fit threw must not keep the directory locked: a
  // program may resume the run in the same process.)
  std::optional<RunDirectoryLock> lock;
  struct WritesFinished {
    BackgroundWriter& writer;
    ~WritesFinished() {
      try {
        writer.wait();
      } catch (...) {  // an error of a write is the run's: fit rethrows it on the way out it takes otherwise
      }
    }
  } writes_finished{writer_};
  std::optional<MetricsWriter> metrics;
  std::optional<ScopedPhase> phase(std::in_place, phases_, "run directory, config.toml, metrics files");
  if (primary) {
    summary.run_dir = resumed ? resume_run_dir_ : create_run_directory(config_);
    last_run_dir_ = summary.run_dir;
    try {
      lock.emplace(summary.run_dir);  // before anything in it is rewritten
      // A resume reads the metrics first: one whose metrics files it refuses (a damaged row) leaves the run as it was.
      if (resumed) {
        metrics = MetricsWriter::resume(summary.run_dir, config_.output.csv, start_epoch_, step_ + 1);
        if (metrics->resume_gap()) std::fprintf(stderr, "sprintnet: warning: %s\n", metrics->resume_gap()->c_str());
      }
      // A resumed run may have a new train.epochs: the run's config.toml says what it now is.
      write_text_file_atomically(summary.run_dir / "config.toml", config_to_toml(config_));
      if (!resumed) metrics.emplace(summary.run_dir, config_.output.csv);
      // A finished run resumed for more epochs: its final weights are the earlier end's, which `eval RUN` would
      // take for this run's while it trains (or after it was killed). The checkpoint it resumes from holds them
      // (the last epoch always writes one), so nothing is lost; until the new end, eval names that checkpoint.
      if (resumed && start_epoch_ < config_.train.epochs) {
        std::error_code ec;
        std::filesystem::remove(summary.run_dir / "model.safetensors", ec);
        SN_CHECK(!ec, "cannot remove the earlier end's weights {}: {}", (summary.run_dir / "model.safetensors").string(),
                 ec.message());
      }
    } catch (const Error&) {
      // A new run that cannot start (a full disk, a directory that is not writable) leaves no run
      // directory behind: it was created just now (never reused, run_directory.h) and holds only
      // what this start wrote. A resumed run's directory is the user's and stays.
      if (!resumed) {
        std::error_code ignored;
        std::filesystem::remove_all(summary.run_dir, ignored);
      }
      throw;
    }
  }
  fit_called_ = true;  // from here the run exists: a second fit() would train its epochs again (a start that
                       // failed left nothing, and fit() may be tried again)
  phase.reset();
  const ProgressMode mode =
      primary ? resolve_progress_mode(config_.output.progress, stderr_is_terminal()) : ProgressMode::kNone;
  ProgressBar progress(std::cerr, mode, train_loader_->batches_per_epoch(), config_.train.epochs);
  SmTurns::Turn turn;
  if (const TrainPlan::SmFootprint sms = plan_ ? plan_->sm_footprint() : TrainPlan::SmFootprint{};
      turns_ != nullptr && sms.held > 0 && start_epoch_ < config_.train.epochs) {
    const ScopedPhase waiting(phases_, "waiting for a turn on the GPU");
    turn = turns_->take(device_.index, sms.held, sms.total);
  }

  for (std::int64_t epoch = start_epoch_ + 1; epoch <= config_.train.epochs; ++epoch) {
    phase.emplace(phases_, "training");
    EpochRecord record = plan_ ? train_epoch_compiled(epoch, progress) : train_epoch(epoch, progress);
    phase.emplace(phases_, "evaluation");
    const bool last = epoch == config_.train.epochs;
    if (primary && (last || (config_.train.eval_every > 0 && epoch % config_.train.eval_every == 0))) {
      summary.final_test = evaluate_test();
      record.test_loss = summary.final_test.loss;
      record.test_accuracy = summary.final_test.accuracy;
    }
    if (last) turn.release();  // what is left (weights back to the host, files) needs no SMs
    summary.train_time_s += record.epoch_time_s;
    SN_CHECK(!lock || lock->still_at_its_path(),
             "run directory {} was deleted or moved while the run trained (found after epoch {}): its metrics and "
             "checkpoints would be written nowhere, or into a new empty folder of that name", summary.run_dir.string(),
             epoch);
    phase.emplace(phases_, "metrics rows and epoch lines");
    if (metrics) metrics->write({record.step, record.epoch, record.train_loss, record.test_loss, record.test_accuracy,
                   record.epoch_time_s, record.samples_per_s, record.lr});
    std::string line =
        fmt::format("epoch {}/{}: train loss {}", epoch, config_.train.epochs, format_loss(record.train_loss));
    if (record.test_accuracy) {
      line += fmt::format(", test loss {}, test accuracy {:.2f} %", format_loss(*record.test_loss),
                          100.0 * *record.test_accuracy);
    }
    line += fmt::format(", {:.2f} s, {:.0f} samples/s", record.epoch_time_s, record.samples_per_s);
    if (record.skipped_updates > 0) {
      line += fmt::format(", {} skipped (an fp16 gradient overflowed; the loss scale halved each time)",
                          counted(record.skipped_updates, "update"));
    }
    if (!quiet_ && primary) progress.finish_epoch(line);
    summary.epochs.push_back(record);
    // The epoch's last learning rate too: a schedule (schedule.gamma > 1, onecycle's peak) can raise it.
    SN_CHECK(std::isfinite(record.train_loss),
             "training diverged: the train loss of epoch {} is {} at a learning rate of {:g} ({}); metrics so far are in {}",
             epoch, unsigned_nan(record.train_loss), record.lr, train::divergence_advice(config_, record.lr),
             summary.run_dir.string());
    // Finite weights can still give outputs that overflow on the test set (one step at a huge rate): the run's
    // numbers mean nothing, and its weights would be refused by eval and predict.
    SN_CHECK(!record.test_loss || std::isfinite(*record.test_loss),
             "training diverged: the test loss after epoch {} is {} at a learning rate of {:g}, the model's outputs "
             "overflowing ({}); metrics so far are in {}",
             epoch, unsigned_nan(*record.test_loss), record.lr, train::divergence_advice(config_, record.lr),
             summary.run_dir.string());
    // A stop request ends the run here, resumably: this epoch's checkpoint is written whatever the schedule.
    // (Not in a data-parallel job: its ranks would have to agree on the epoch.)
    const bool may_stop = !last && rank_.world == 1;
    std::optional<int> stop = may_stop ? stop_requested() : std::nullopt;
    const std::int64_t every = config_.checkpoint.every_epochs;
    const bool checkpoint = last || stop || (every > 0 && epoch % every == 0);
    phase.emplace(phases_, "weights and optimizer state from the engine");
    if (plan_ && (last || checkpoint || epoch_callback_)) {
      plan_->gather_shards();
      wait_for_ranks();  // the gather is a collective: a rank that stopped must not hang the others in it
      plan_->store(*model_, *optimizer_);
      loss_scaling_ = plan_->loss_scaling();
    }
    phase.emplace(phases_, "weights and checkpoint snapshots for the writer");
    if ((last || checkpoint) && primary) write_in_background(summary.run_dir, epoch, last, checkpoint);
    phase.reset();
    if (epoch_callback_) {
      writer_.wait();  // the callback is promised the epoch's files on disk
      epoch_callback_(record);
      // A stop the callback requested ends the run after this epoch too (its weights are stored: a callback
      // gets them), with the checkpoint a stop writes.
      if (may_stop && !stop && (stop = stop_requested()) && !checkpoint && primary) {
        write_in_background(summary.run_dir, epoch, false, true);
      }
    }
    if (stop) {
      summary.stop_signal = stop;
      break;
    }
  }
  phase.emplace(phases_, "waiting for the weights and checkpoint writes");
  writer_.wait();
  phase.reset();
  summary.wall_time_s = seconds_since(start_) + before_trainer_s_;
  summary.phases = phases_;
  write_text_file_atomically(summary.run_dir / "phases.json", phases_.to_json(summary.wall_time_s));
  return summary;
}

}  // namespace sprintnet::train
