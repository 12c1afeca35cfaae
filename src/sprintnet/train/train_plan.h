#pragma once
// The engines behind one interface: the compiled step (below, on a GPU; on the CPU,
// cpu_train_plan.cpp) and the fused GPU engine (make_fused_train_plan: a whole epoch in one
// kernel, whose start_epoch() launches it and whose step() has nothing left to do).
//
// The compiled training step: what the Trainer runs instead of the eager
// module-by-module loop. An MLP, its loss and its optimizer are compiled
// once into fixed buffers and a CUDA graph; an epoch is then one permutation
// launch plus one graph replay per step, with nothing read back until the
// epoch ends (see docs/ARCHITECTURE.md, "The compiled step").
//
// The plan keeps its own copies of the weights (fp32 master and the compute
// type) and optimizer state; load() and store() move them between the plan and
// the eager model and optimizer, which stay the source of truth for
// checkpoints, resume and the weights files.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sprintnet/io/config.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/nn/sequential.h"
#include "sprintnet/optim/optimizer.h"
#include "sprintnet/train/batch_loader.h"
#include "sprintnet/train/evaluate.h"
#include "sprintnet/train/loss_scaling.h"

namespace sprintnet::train {

// Sums of one epoch, read when it ends.
struct EpochTotals {
  double loss_sum = 0.0;      // sum of the steps' mean losses
  std::int64_t correct = 0;   // training samples predicted right (before each update)
  std::int64_t skipped = 0;   // fp16 updates skipped for a non-finite gradient
};

// What a progress read saw: the sums after `steps` steps of the epoch.
struct ProgressSnapshot {
  std::int64_t steps = 0;
  double loss_sum = 0.0;
};

class TrainPlan {
 public:
  virtual ~TrainPlan() = default;
  // Copies the model's weights and the optimizer's state and counters into the plan.
  virtual void load(nn::Sequential& model, optim::Optimizer& optimizer) = 0;
  // Copies the plan's weights, state and counters back (waits for the device).
  virtual void store(nn::Sequential& model, optim::Optimizer& optimizer) = 0;
  // fp16's dynamic loss scaling as of the last step taken (waits for the device), which a checkpoint keeps beside
  // what store() gives; nullopt where the plan computes in another precision.
  virtual std::optional<LossScaling> loss_scaling() { return std::nullopt; }
  // A resumed fp16 run's loss scaling, after load() and before the first step (load() starts from GradScaler's
  // initial state). Throws in a plan without one.
  virtual void set_loss_scaling(const LossScaling& scaling);
  // Data parallel with the sharded update: enqueues the collectives that bring every rank's shards
  // of the master weights and optimizer state together, for store() (every rank calls both, in
  // step; the caller waits on stream_handle(), watched for stalls, between them). No-op otherwise.
  virtual void gather_shards() {}
  // Enqueues the order of epoch `epoch` (0-based) and clears the epoch's sums; no host wait.
  virtual void start_epoch(std::int64_t epoch) = 0;
  // Enqueues one training step; no host wait.
  virtual void step() = 0;
  // Asks for the sums after `steps` steps (an asynchronous copy), and returns the newest snapshot
  // that has arrived, if any: progress without ever waiting for the device.
  virtual std::optional<ProgressSnapshot> progress(std::int64_t steps) = 0;
  // Waits for the epoch's steps and returns its sums.
  virtual EpochTotals finish_epoch() = 0;
  // Loss and accuracy on `loader`'s data set, in the training precision (a graph, one read).
  virtual EvalResult evaluate(const BatchLoader& loader) = 0;
  // e.g. "compiled CUDA graph, bf16 (fp32 master weights), cuBLASLt epilogues: bias+ReLU, ..."
  virtual std::string describe() const = 0;
  // The CUDA stream the plan runs on (a cudaStream_t; null on the CPU): data parallelism waits on
  // it, watched for stalls, instead of blocking (dist/communicator.h).
  virtual void* stream_handle() const { return nullptr; }
  // The share of the GPU's SMs an epoch holds for its whole length (a persistent kernel's), `held`
  // of `total` units: runs sharing a GPU take turns for them (sm_turns.h). {0, 0} where an epoch is
  // many kernels that come and go (the compiled step) or on the CPU.
  struct SmFootprint {
    int held = 0, total = 0;
  };
  // The units of a whole GPU in every plan's footprint, so runs of different kernels share one count.
  static constexpr int kGpuShares = 1 << 20;
  virtual SmFootprint sm_footprint() const { return {}; }
};

// Everything the plan is compiled from. Every make_*_train_plan checks it first (check_train_plan_spec).
struct TrainPlanSpec {
  nn::MlpSpec mlp;
  OptimConfig optim;                   // checked as the config's optim.* keys
  double label_smoothing = 0.0;        // checked as loss.label_smoothing (cross_entropy only)
  std::string loss = "cross_entropy";  // checked as loss.type: cross_entropy or mse
  std::string precision;  // fp32, tf32, bf16 or fp16
  const BatchLoader* train = nullptr;  // its data set, normalisation, batch size and shuffle seed
  std::int64_t eval_batch_size = 1000;
  // The learning rate of every step of the run (each finite and >= 0), indexed by the run's step counted from its
  // first: the optimizer's "steps" counter, which load() takes (a resumed run's goes on from its checkpoint). A
  // step past the table's end is an error, never its last entry again: the Trainer gives steps an epoch x
  // train.epochs (a constant rate is that many copies of it).
  std::vector<double> lr_per_step;
  // Data parallel (docs/DISTRIBUTED.md): this rank computes rows [rank * B / world, (rank + 1) * B / world)
  // of every global batch of B rows; gradients and the epoch's sums are all-reduced over `nccl_comm`.
  int rank = 0, world = 1;
  void* nccl_comm = nullptr;  // ncclComm_t when world > 1
  std::string update = "auto";  // device.update: replicated, sharded (ZeRO-1) or auto
};

// What every plan takes from `spec` as the Trainer's config would have it: optim, loss and label_smoothing by the
// config schema's rules for optim.*, loss.type and loss.label_smoothing (optim.type one of sgd, adam, adamw; betas
// in [0, 1); eps > 0; nesterov with momentum; ...), lr_per_step not empty, each entry finite and >= 0. Throws
// sprintnet::Error "TrainPlanSpec: <field>: <problem>; ..." naming every field at fault.
void check_train_plan_spec(const TrainPlanSpec& spec);
// Steps [first_step, first_step + steps) of the run (0-based, as lr_per_step is indexed) all have a rate in
// `lr_per_step`; else throws naming the step without one and the table's length. Each plan asks before it runs them.
void check_lr_steps(const std::vector<double>& lr_per_step, std::int64_t first_step, std::int64_t steps);
// Why `config` cannot be compiled (e.g. "activation 'tanh'"), or nullopt when it can.
std::optional<std::string> train_plan_unsupported(const Config& config);
// The CUDA plan on `device`. Throws when built without CUDA.
std::unique_ptr<TrainPlan> make_cuda_train_plan(const TrainPlanSpec& spec, Device device);
// The fused engine (one persistent kernel per epoch, docs/FUSED.md) on `device`. Throws when built without CUDA.
std::unique_ptr<TrainPlan> make_fused_train_plan(const TrainPlanSpec& spec, Device device);
// The CPU plan (cpu_train_plan.cpp): oneDNN products, any activation, both losses, partial batches.
std::unique_ptr<TrainPlan> make_cpu_train_plan(const TrainPlanSpec& spec);
// Rows of an in -> out layer's weight gradient the CPU plan computes and applies at a time on
// `threads` threads (fp32; the last block may have fewer), and whether a batch of `rows` also
// computes the input gradient block by block (else whole, before the blocks).
std::int64_t cpu_grad_block_rows(std::int64_t in, std::int64_t out, int threads);
bool cpu_split_input_grad(std::int64_t rows, std::int64_t in, int threads);

}  // namespace sprintnet::train
