// The fused engine (train/train_plan.h, docs/FUSED.md): a whole epoch is one
// cooperative launch of ops/cuda/fused's kernel; evaluation is another. The
// plan owns the flat parameter buffers (weights padded to 16-element rows, so
// every product reads 16-byte aligned rows), two compute-type copies of the
// weights, the batch buffers of every layer, and a host-mapped progress record
// the kernel writes once a step.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/error.h"
#include "sprintnet/memory/pinned_host_pool.h"
#include "sprintnet/ops/cuda/cuda_backend.h"
#include "sprintnet/ops/cuda/device_guard.h"
#include "sprintnet/ops/cuda/fused/cluster_epoch.h"
#include "sprintnet/ops/cuda/fused/fused_epoch.h"
#include "sprintnet/ops/cuda/fused/regression_epoch.h"
#include "sprintnet/ops/cuda/fused/quads_epoch.h"
#include "sprintnet/ops/cuda/fused/rows_epoch.h"
#include "sprintnet/ops/cuda/fused/split_epoch.h"
#include "sprintnet/ops/cuda/nvtx.h"
#include "sprintnet/ops/cuda/step_launch.h"
#include "sprintnet/ops/cuda/stream_scope.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/train/padded_parameters.h"
#include "sprintnet/train/fused_fit.h"
#include "sprintnet/train/stage_timeline.h"
#include "sprintnet/train/train_plan.h"

namespace sprintnet::train {
namespace {

using cuda::ElementType;

constexpr std::int64_t kTensorAlignment = 128;  // elements between parameters in the flat buffers

std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }

// A kernel-lab switch set to a whole number (SPRINTNET_FUSED_BLOCKS, SPRINTNET_FUSED_PROFILE_BLOCK):
// nullopt when unset or empty, an error naming it when it is not a number.
struct LabSetting {
  std::string text;
  int value = 0;
};
std::optional<LabSetting> lab_setting(const char* name) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return std::nullopt;
  LabSetting setting{env, 0};
  const char* end = env + setting.text.size();
  const auto [stop, error] = std::from_chars(env, end, setting.value);
  SN_CHECK(error == std::errc() && stop == end, "{} = {}: not a whole number", name, env);
  return setting;
}

class FusedTrainPlan final : public TrainPlan {
 public:
  FusedTrainPlan(const TrainPlanSpec& spec, Device device);
  // The kernels that write the progress record are done before it goes back to the pool.
  ~FusedTrainPlan() override { SN_CUDA_WARN(cudaStreamSynchronize(stream_)); }

  void load(nn::Sequential& model, optim::Optimizer& optimizer) override;
  void store(nn::Sequential& model, optim::Optimizer& optimizer) override;
  void start_epoch(std::int64_t epoch) override;
  void step() override {}  // the epoch's kernel runs every step
  std::optional<ProgressSnapshot> progress(std::int64_t steps) override;
  EpochTotals finish_epoch() override;
  EvalResult evaluate(const BatchLoader& loader) override;
  std::string describe() const override;
  SmFootprint sm_footprint() const override { return footprint_; }
  std::optional<LossScaling> loss_scaling() override;
  void set_loss_scaling(const LossScaling& scaling) override;

 private:
  // The kernel's arguments common to training and evaluation.
  cuda::FusedEpochArgs base_args(const BatchLoader& loader) const;
  void launch(const cuda::FusedEpochArgs& args);
  cuda::StepState read_state();
  void write_state(const cuda::StepState& state);

  TrainPlanSpec spec_;
  Device device_;
  ElementType type_;
  DType dtype_;
  cudaStream_t stream_;
  std::int64_t batch_ = 0, eval_batch_ = 0, samples_ = 0, steps_per_epoch_ = 0, rows_alloc_ = 0, params_ = 0;
  std::int64_t run_step_ = 0;  // the run's steps launched (StepState::step once they ran): lr_per_step's bound
  int blocks_ = 0;
  SmFootprint footprint_;  // the training kernel's share of the GPU (training_footprint)
  std::vector<cuda::FusedLayer> layers_;
  std::vector<FlatSlot> slots_;
  Tensor master_, state1_, state2_, grads_, copies_[2];
  std::vector<Tensor> buffers_;  // per layer: act, pre, dz
  Tensor inputs_[2], batch_labels_[2];
  Tensor row_loss_, row_correct_;
  Tensor order_, permutation_scratch_, lr_table_;
  Tensor state_, metrics_, eval_metrics_, sync_;  // sync_: the barrier counter, then two found_inf flags
  // The progress record, then the host's copy of the metrics (StepMetrics), then of the state (StepState).
  PinnedHostRecord progress_record_;
  cuda::FusedProgress* host_progress() const { return static_cast<cuda::FusedProgress*>(progress_record_.host()); }
  cuda::StepMetrics* host_metrics() const { return reinterpret_cast<cuda::StepMetrics*>(host_progress() + 1); }

  // The split, regression and cluster kernels (fused_fit.h) train the models they take wherever they
  // run (choose_kernel); the grid kernel trains the rest and evaluates everything. `kernel_note_`
  // describes their launch (describe()).
  bool split_ = false;
  bool regression_ = false;
  Tensor normalised_;  // the regression kernel's data set, normalised to the compute type once
  int split_blocks_ = 0;  // the split kernel's shape (split_epoch.h)
  Tensor split_scratch_;  // the split kernel's activations and gradients (split_epoch_scratch_bytes())
  bool cluster_ = false;
  cuda::ClusterLayout cluster_layout_;
  Tensor cluster_partials_;  // the cluster kernel's first-layer partial sums (global memory, through L2)
  bool rows_ = false;
  bool quads_ = false;
  cuda::QuadsLayout quads_layout_;
  cuda::RowsLayout rows_layout_;
  Tensor rows_scratch_;  // the rows kernel's new values a step, multicast from global memory
  std::string kernel_note_;
  Tensor stage_clock_;  // SPRINTNET_FUSED_PROFILE=1: when each stage of the last epoch ended
  int stage_clock_block_ = 0;  // ... on whose clock (SPRINTNET_FUSED_PROFILE_BLOCK, rows kernel)
  void print_profile();
  void choose_kernel();
  SmFootprint training_footprint(int max_blocks) const;
};

Tensor zeros_bytes(std::int64_t bytes, Device device) { return Tensor::zeros({bytes}, DType::kU8, device); }

// Whether the kernel `name` trains this model: `why_not` is the model's answer (fused_fit.h), and where it
// has none, `gpu()` asks the GPU (nullptr: it runs the kernel). A kernel SPRINTNET_FUSED_KERNEL (`asked`)
// insists on that cannot is an error naming why; under auto the next kernel is tried.
template <class GpuAnswer>
bool kernel_takes(const std::string& asked, const char* name, std::optional<std::string> why_not, GpuAnswer gpu) {
  if (!why_not) {
    if (const char* no = gpu()) why_not = no;
  }
  SN_CHECK(!why_not || asked.empty(), "SPRINTNET_FUSED_KERNEL = \"{}\": the {} kernel cannot train this model: {}", name,
           name, why_not.value_or(""));
  return !why_not;
}

// The quads, split, regression, rows and cluster kernels each train every model they take on a GPU
// that runs them (docs/FUSED.md: faster than the grid kernel on each; the regression kernel than the
// cluster kernel; the rows kernel than the cluster kernel; the quads kernel as fast as the split kernel
// on half its SMs), the grid kernel the rest; the kernel lab's SPRINTNET_FUSED_KERNEL = "grid", "quads", "split", "regression",
// "rows" or "cluster" insists on one (all but "grid" fail naming why they cannot).
void FusedTrainPlan::choose_kernel() {
  const char* env = std::getenv("SPRINTNET_FUSED_KERNEL");
  const std::string asked = env != nullptr ? env : "";
  SN_CHECK(asked.empty() || asked == "grid" || asked == "quads" || asked == "split" || asked == "regression" ||
               asked == "rows" || asked == "cluster",
           "SPRINTNET_FUSED_KERNEL = \"{}\": expected \"grid\", \"quads\", \"split\", \"regression\", \"rows\" or "
           "\"cluster\"",
           asked);
  if (asked == "grid") return;
  // auto leaves the models the rows kernel takes (two hidden layers of at most 128) to it.
  if ((asked == "quads" || (asked.empty() && fused_rows_unsupported(spec_.mlp, spec_.precision, batch_))) &&
      kernel_takes(asked, "quads", fused_quads_unsupported(spec_.mlp, spec_.precision, spec_.optim, batch_), [&] {
        quads_layout_ = fused_quads_layout(spec_.mlp);
        return cuda::quads_epoch_unavailable(device_.index, quads_layout_.bytes);
      })) {
    quads_ = true;
    kernel_note_ = fmt::format(
        "one cluster of 16 blocks as four quads, each quad 32 of the batch's rows and each of its blocks a quarter of "
        "every hidden layer ({} KiB a block; the GPU holds {} such clusters at once)",
        quads_layout_.bytes / 1024, cuda::quads_epoch_active_clusters(device_.index, quads_layout_.bytes));
    return;
  }
  if ((asked.empty() || asked == "regression") &&
      kernel_takes(asked, "regression", fused_regression_unsupported(spec_.mlp, spec_.precision, batch_),
                   [&] { return cuda::regression_epoch_unavailable(device_.index); })) {
    regression_ = true;
    kernel_note_ = fmt::format(
        "one {}-block cluster, each block's slice of the weights in shared memory and its fp32 master in registers "
        "(the GPU holds {} such clusters at once)",
        cuda::kRegressionCtas, cuda::regression_epoch_active_clusters(device_.index));
    return;
  }
  const int width = spec_.mlp.hidden.empty() ? 0 : static_cast<int>(spec_.mlp.hidden.front());
  const int depth = static_cast<int>(spec_.mlp.hidden.size());
  if ((asked.empty() || asked == "split") &&
      kernel_takes(asked, "split", fused_split_unsupported(spec_.mlp, spec_.precision, batch_),
                   [&] { return cuda::split_epoch_unavailable(device_.index, width, depth); })) {
    split_ = true;
    split_scratch_ = zeros_bytes(cuda::split_epoch_scratch_bytes(), device_);
    const cuda::SplitShape& shape = *cuda::split_shape(width);
    split_blocks_ = shape.blocks;
    kernel_note_ = fmt::format(
        "{} blocks in clusters of {} (the GPU holds {} such clusters at once), each block's fp32 master tiles in "
        "shared memory",
        shape.blocks, shape.cluster, cuda::split_epoch_active_clusters(device_.index, width, depth));
    return;
  }
  if ((asked.empty() || asked == "rows") &&
      kernel_takes(asked, "rows", fused_rows_unsupported(spec_.mlp, spec_.precision, batch_), [&] {
        rows_layout_ = fused_rows_layout(spec_.mlp);
        return cuda::rows_epoch_unavailable(device_.index, rows_layout_.bytes);
      })) {
    rows_ = true;
    rows_scratch_ = zeros_bytes(rows_layout_.scratch_bytes, device_);
    kernel_note_ = fmt::format(
        "one cluster of 16 blocks, the batch's rows split over them and the hidden weights in each block's shared "
        "memory ({} KiB a block; the GPU holds {} such clusters at once)",
        rows_layout_.bytes / 1024, cuda::rows_epoch_active_clusters(device_.index, rows_layout_.bytes));
    return;
  }
  if (!kernel_takes(asked, "cluster", fused_cluster_unsupported(spec_.mlp, spec_.precision, batch_), [&] {
        cluster_layout_ = fused_cluster_layout(spec_.mlp);
        return cuda::cluster_epoch_unavailable(device_.index, cluster_layout_.bytes);
      })) {
    return;  // the grid kernel
  }
  cluster_ = true;
  cluster_partials_ = Tensor::zeros({cluster_layout_.partials_bytes / 4}, DType::kF32, device_);
  kernel_note_ = fmt::format("one 16-block cluster with the weights in shared memory ({} KiB a block)",
                             cluster_layout_.bytes / 1024);
}

FusedTrainPlan::FusedTrainPlan(const TrainPlanSpec& spec, Device device) : spec_(spec), device_(device) {
  check_train_plan_spec(spec);
  SN_CHECK(device.is_cuda(), "the fused engine runs on CUDA devices, not {}", device.str());
  SN_CHECK(spec.precision == "bf16" || spec.precision == "fp16",
           "device.precision = \"{}\": the fused engine computes in bf16 or fp16", spec.precision);
  type_ = spec.precision == "fp16" ? ElementType::kF16 : ElementType::kBF16;
  dtype_ = spec.precision == "fp16" ? DType::kF16 : DType::kBF16;
  const cuda::DeviceGuard guard(device.index);
  stream_ = static_cast<cuda::CudaBackend&>(backend_for(device)).stream();

  const BatchLoader& train = *spec.train;
  batch_ = train.options().batch_size;
  eval_batch_ = spec.eval_batch_size;
  samples_ = train.samples_per_epoch();
  steps_per_epoch_ = train.batches_per_epoch();
  rows_alloc_ = round_up(std::max(batch_, eval_batch_), cuda::kFusedRowTile);
  const auto& mlp = spec.mlp;
  std::vector<std::int64_t> widths = mlp.hidden;
  widths.push_back(mlp.outputs);
  SN_CHECK(static_cast<int>(widths.size()) <= cuda::kFusedMaxLayers, "the fused engine takes at most {} layers, not {}",
           cuda::kFusedMaxLayers, widths.size());
  SN_CHECK(mlp.outputs <= cuda::kFusedMaxClasses, "the fused engine takes at most {} classes, not {}",
           cuda::kFusedMaxClasses, mlp.outputs);

  // Flat layout: layer by layer, the weight as [out][in_pad] rows whose column `in` is the bias
  // (fused_epoch.h); a hidden layer's output rows carry the next layer's 1 in column `out`.
  std::int64_t in = mlp.inputs;
  const int bias = mlp.bias ? 1 : 0;
  const bool keeps_pre = mlp.activation != Activation::kReLU && mlp.activation != Activation::kIdentity;
  buffers_.reserve(3 * widths.size());  // the references below must stay valid
  for (std::size_t l = 0; l < widths.size(); ++l) {
    cuda::FusedLayer layer;
    layer.in = static_cast<int>(in);
    layer.out = static_cast<int>(widths[l]);
    const bool hidden = l + 1 < widths.size();
    layer.bias = bias;
    layer.in_pad = static_cast<int>(round_up(in + bias, cuda::kFusedRowAlign));
    layer.out_pad = static_cast<int>(round_up(widths[l] + (hidden ? bias : 0), cuda::kFusedRowAlign));
    layer.weight_offset = params_;
    slots_.push_back({params_, layer.out, layer.in, layer.in_pad});
    if (mlp.bias) slots_.push_back({params_ + layer.in, layer.out, 1, layer.in_pad});
    params_ = round_up(params_ + std::int64_t{layer.out} * layer.in_pad, kTensorAlignment);
    const Shape shape{rows_alloc_, layer.out_pad};
    Tensor& act = buffers_.emplace_back(hidden ? Tensor::zeros(shape, dtype_, device) : Tensor());
    Tensor& pre = buffers_.emplace_back(hidden && keeps_pre ? Tensor::zeros(shape, dtype_, device) : Tensor());
    Tensor& dz = buffers_.emplace_back(Tensor::zeros(shape, dtype_, device));
    layer.act = act.defined() ? act.raw_data() : nullptr;
    layer.pre = pre.defined() ? pre.raw_data() : nullptr;
    layer.dz = dz.raw_data();
    layers_.push_back(layer);
    in = widths[l];
  }

  master_ = Tensor::zeros({params_}, DType::kF32, device);
  const bool sgd = spec.optim.type == "sgd";
  if (!sgd || spec.optim.momentum > 0.0) state1_ = Tensor::zeros({params_}, DType::kF32, device);
  if (!sgd) state2_ = Tensor::zeros({params_}, DType::kF32, device);
  copies_[0] = Tensor::zeros({params_}, dtype_, device);
  // bf16 alternates two copies; fp16 applies its update in a stage of its own and keeps one.
  if (type_ == ElementType::kF16) {
    copies_[1] = copies_[0];
    grads_ = Tensor::zeros({params_}, DType::kF32, device);
  } else {
    copies_[1] = Tensor::zeros({params_}, dtype_, device);
  }
  for (int s = 0; s < 2; ++s) {
    inputs_[s] = Tensor::zeros({rows_alloc_, layers_[0].in_pad}, dtype_, device);
    batch_labels_[s] = Tensor::zeros({rows_alloc_}, DType::kI32, device);
  }
  row_loss_ = Tensor::zeros({rows_alloc_}, DType::kF64, device);
  row_correct_ = Tensor::zeros({rows_alloc_}, DType::kI32, device);

  std::vector<std::int32_t> identity(static_cast<std::size_t>(train.samples()));
  for (std::size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<std::int32_t>(i);
  order_ = Tensor::from_vector(identity, {train.samples()}, device);
  permutation_scratch_ = zeros_bytes(static_cast<std::int64_t>(cuda::epoch_permutation_scratch_bytes(train.samples())),
                                     device);
  lr_table_ = Tensor::from_vector(spec.lr_per_step, {static_cast<std::int64_t>(spec.lr_per_step.size())}, device);
  state_ = zeros_bytes(sizeof(cuda::StepState), device);
  metrics_ = zeros_bytes(sizeof(cuda::StepMetrics), device);
  eval_metrics_ = zeros_bytes(sizeof(cuda::StepMetrics), device);
  sync_ = zeros_bytes(4 * sizeof(std::uint32_t), device);

  progress_record_ = PinnedHostRecord(sizeof(cuda::FusedProgress) + sizeof(cuda::StepMetrics) + sizeof(cuda::StepState));

  if (const char* profile = std::getenv("SPRINTNET_FUSED_PROFILE"); profile != nullptr && *profile == '1') {
    stage_clock_ = zeros_bytes(std::int64_t{8} << 18, device);  // 2^18 nanosecond stamps (the timeline's 16 x 2^14)
  }
  choose_kernel();
  if (const char* all = std::getenv("SPRINTNET_FUSED_PROFILE_BLOCK"); all != nullptr && std::string_view(all) == "all") {
    // Every block's stamps, read against one clock: who the others wait for at each exchange.
    SN_CHECK(rows_ || quads_, "SPRINTNET_FUSED_PROFILE_BLOCK = all: the rows or quads kernel's timeline (this run: another kernel)");
    stage_clock_block_ = -1;
  } else if (const auto block = lab_setting("SPRINTNET_FUSED_PROFILE_BLOCK")) {
    // A block other than 0 shows whose step sets the pace (the rows kernel's stages end at its own
    // stamps; the other kernels stamp at barriers, the same on every block).
    SN_CHECK((rows_ || quads_) && block->value >= 0 && block->value < cuda::kRowsCtas,
             "SPRINTNET_FUSED_PROFILE_BLOCK = {}: a block of the rows or quads kernel, 0 to {} (this run: {})", block->text,
             cuda::kRowsCtas - 1, rows_ || quads_ ? "one of them" : "another kernel");
    stage_clock_block_ = block->value;
  }
  if (regression_) {
    // The regression kernel gathers its batches from the training set normalised once (as
    // launch_gather_batch rounds every batch): its step has no conversion left in it (FUSED.md, v8b).
    normalised_ = Tensor::empty({train.samples(), mlp.inputs}, dtype_, device);
    cuda::GatherArgs g{};
    g.images = train.images().data<std::uint8_t>();
    g.features = mlp.inputs;
    g.rows = train.samples();
    g.scale = static_cast<float>(train.normalization().scale);
    g.shift = static_cast<float>(train.normalization().shift);
    g.dst = normalised_.raw_data();
    g.dst_type = type_;
    SN_CUDA_CHECK(cuda::launch_gather_batch(g, stream_));
  }
  int max_blocks = 0;
  SN_CUDA_CHECK(cuda::fused_epoch_max_blocks(device.index, &max_blocks));
  // More blocks than the widest training stage has jobs only add barrier arrivals (evaluation,
  // with its larger batches, gives each block several jobs a stage).
  std::int64_t widest = 0;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const auto& layer = layers_[l];
    const std::int64_t row_tiles = round_up(batch_, 32) / 32;
    const std::int64_t forward = row_tiles * round_up(layer.out_pad, 32) / 32;
    const std::int64_t wgrad = round_up(layer.out, 32) / 32 * (round_up(layer.in + layer.bias, 64) / 64);
    const std::int64_t dgrad = l > 0 ? row_tiles * round_up(layers_[l - 1].out_pad, 32) / 32 : 0;
    widest = std::max({widest, forward, wgrad + dgrad});
  }
  blocks_ = static_cast<int>(std::min<std::int64_t>(max_blocks, widest));
  // Where the split or the cluster kernel trains, the grid kernel only evaluates. Beside other runs (a
  // sweep's worker has its own stream) on no more blocks than the training kernel holds, so the runs do
  // not queue behind a grid as wide as the GPU (16 default runs, 8 at a time on an H100: evaluation
  // 0.134 s a run on 132 blocks, ~the whole-GPU wait). Alone, on every block the GPU holds at once: an
  // evaluation batch has more tile jobs than a training step (the default run's 10 evaluations: 0.011 s
  // on 32 blocks, 0.004 s on 132; the same sums in the same order, so the same metrics).
  if (split_ || regression_ || cluster_ || rows_ || quads_) {
    const int training_blocks = split_ ? split_blocks_ : regression_ ? cuda::kRegressionCtas : cuda::kClusterCtas;
    blocks_ = gpu_shared_with_other_runs(device.index) ? std::min(blocks_, training_blocks) : max_blocks;
  }
  if (const auto asked = lab_setting("SPRINTNET_FUSED_BLOCKS")) {
    SN_CHECK(asked->value >= 1 && asked->value <= max_blocks,
             "SPRINTNET_FUSED_BLOCKS = {}: this GPU runs 1 to {} blocks at once", asked->text, max_blocks);
    blocks_ = asked->value;
  }
  footprint_ = training_footprint(max_blocks);
}

// The training kernel's share of the GPU, from its clusters and the clusters the GPU holds at once
// (its blocks and the blocks, for the grid kernel); not from its SMs and the GPU's: a GPC's SMs do not
// divide into whole clusters, so an H100 holds 30 of the 256-wide split kernel's clusters of 4, not 33.
// k runs take turns together when k - 1 kernels fit whole and the k-th at least half: 7 of a kernel of
// which 7 fit, 4 of the default model's 8-cluster kernel (30 clusters: the fourth starts with 6 of its
// 8 and gets the rest as the others' epochs end). Three of those would leave a fifth of the GPU idle
// and the sweep's last run alone (16 runs: 1.07-1.24 s with four, 1.17-1.26 s with three; docs/SWEEP.md).
TrainPlan::SmFootprint FusedTrainPlan::training_footprint(int max_blocks) const {
  const auto share = [](int a_run, int at_once) {
    if (at_once < a_run) return SmFootprint{kGpuShares, kGpuShares};  // the whole GPU
    // k * held <= kGpuShares exactly when k * a_run <= at_once + a_run / 2 (the units are fine enough).
    return SmFootprint{static_cast<int>(std::int64_t{a_run} * kGpuShares / (at_once + a_run / 2)), kGpuShares};
  };
  if (split_) {
    const int width = static_cast<int>(spec_.mlp.hidden.front());
    const cuda::SplitShape& shape = *cuda::split_shape(width);
    return share(shape.blocks / shape.cluster,
                 cuda::split_epoch_active_clusters(device_.index, width, static_cast<int>(spec_.mlp.hidden.size())));
  }
  if (regression_) return share(1, cuda::regression_epoch_active_clusters(device_.index));
  if (cluster_) return share(1, cuda::cluster_epoch_active_clusters(device_.index, cluster_layout_.bytes));
  if (rows_) return share(1, cuda::rows_epoch_active_clusters(device_.index, rows_layout_.bytes));
  if (quads_) return share(1, cuda::quads_epoch_active_clusters(device_.index, quads_layout_.bytes));
  return share(blocks_, max_blocks);  // the grid kernel
}

cuda::FusedEpochArgs FusedTrainPlan::base_args(const BatchLoader& loader) const {
  cuda::FusedEpochArgs a;
  a.type = type_;
  a.activation = static_cast<cuda::ActivationKind>(spec_.mlp.activation);
  a.loss = spec_.loss == "mse" ? cuda::FusedLoss::kMse : cuda::FusedLoss::kCrossEntropy;
  a.smoothing = static_cast<float>(spec_.label_smoothing);
  a.num_layers = static_cast<int>(layers_.size());
  std::copy(layers_.begin(), layers_.end(), a.layers);
  a.rows_alloc = rows_alloc_;
  a.images = loader.images().data<std::uint8_t>();
  // The cluster kernel's 2 x 8 split and the rows kernel copy the pixels in 16-byte pieces (cluster_layout.h).
  SN_CHECK((!cluster_ || !cluster_layout_.first_split) && !rows_ && !quads_ ? true : reinterpret_cast<std::uintptr_t>(a.images) % 16 == 0,
           "the fused engine: the data set's images are not 16-byte aligned on the device");
  a.labels = loader.labels().data<std::int32_t>();
  a.scale = static_cast<float>(loader.normalization().scale);
  a.shift = static_cast<float>(loader.normalization().shift);
  for (int s = 0; s < 2; ++s) {
    a.inputs[s] = inputs_[s].raw_data();
    a.batch_labels[s] = batch_labels_[s].data<std::int32_t>();
    a.copies[s] = copies_[s].raw_data();
  }
  a.optimizer = flat_optimizer_config(spec_.optim, type_ == ElementType::kF16);
  a.optimizer.master = master_.data<float>();
  a.optimizer.state1 = state1_.defined() ? state1_.data<float>() : nullptr;
  a.optimizer.state2 = state2_.defined() ? state2_.data<float>() : nullptr;
  a.optimizer.copy_type = type_;
  a.optimizer.count = params_;
  a.optimizer.lr_table = lr_table_.data<double>();
  a.optimizer.lr_table_size = lr_table_.numel();
  a.grads = grads_.defined() ? grads_.data<float>() : nullptr;
  a.params = params_;
  auto* sync = static_cast<std::uint32_t*>(sync_.raw_data());
  a.barrier = sync;
  a.found_inf = reinterpret_cast<std::int32_t*>(sync + 2);
  a.row_loss = row_loss_.data<double>();
  a.row_correct = row_correct_.data<std::int32_t>();
  a.state = static_cast<cuda::StepState*>(state_.raw_data());
  if (stage_clock_.defined()) {
    a.stage_clock = static_cast<std::uint64_t*>(stage_clock_.raw_data());
    a.stage_clock_capacity = static_cast<int>(stage_clock_.numel() / 8);
    a.stage_clock_block = stage_clock_block_;
  }
  return a;
}

void FusedTrainPlan::launch(const cuda::FusedEpochArgs& args) {
  SN_CUDA_CHECK(cudaMemsetAsync(sync_.raw_data(), 0, sync_.nbytes(), stream_));
  SN_CUDA_CHECK(cuda::launch_fused_epoch(args, blocks_, stream_));
}

void FusedTrainPlan::load(nn::Sequential& model, optim::Optimizer& optimizer) {
  const cuda::DeviceGuard guard(device_.index);
  const auto layers = linear_layers(model, layers_.size());
  const FlatImages images = export_to_flat(layers, optimizer, slots_, params_, spec_.optim, "fused engine");
  const auto upload = [&](const Tensor& dst, const std::vector<float>& image) {
    if (dst.defined()) ops::copy(dst, Tensor::from_vector(image, {params_}, device_));
  };
  upload(master_, images.master);
  upload(state1_, images.state1);
  upload(state2_, images.state2);
  const cuda::StepState state = step_state_from(optimizer.counters(), type_ == ElementType::kF16);
  run_step_ = state.step;
  // The step reads copies[step % 2]; both start as the weights (fp16 has one).
  for (const Tensor& copy : copies_) {
    SN_CUDA_CHECK(cuda::launch_convert_from_f32(master_.data<float>(), copy.raw_data(), type_, params_, stream_));
  }
  write_state(state);
}

cuda::StepState FusedTrainPlan::read_state() {
  cuda::StepState state;
  SN_CUDA_CHECK(cudaMemcpyAsync(&state, state_.raw_data(), sizeof(state), cudaMemcpyDeviceToHost, stream_));
  SN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return state;
}

void FusedTrainPlan::write_state(const cuda::StepState& state) {
  SN_CUDA_CHECK(cudaMemcpyAsync(state_.raw_data(), &state, sizeof(state), cudaMemcpyHostToDevice, stream_));
  SN_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `state` may be on the caller's stack frame
}

std::optional<LossScaling> FusedTrainPlan::loss_scaling() {
  if (type_ != ElementType::kF16) return std::nullopt;
  const cuda::DeviceGuard guard(device_.index);
  return loss_scaling_of(read_state());
}

void FusedTrainPlan::set_loss_scaling(const LossScaling& scaling) {
  if (type_ != ElementType::kF16) TrainPlan::set_loss_scaling(scaling);  // throws
  const cuda::DeviceGuard guard(device_.index);
  write_state(with_loss_scaling(read_state(), scaling, "the fused engine"));
}

// Each slot copied on the device (one 2-D copy from the padded rows), in stream order with the copies
// into the model and the optimizer: ~2.4 ms an epoch less than through host images, which a checkpoint
// every epoch paid 10 times in the default run (docs/PERFORMANCE.md).
void FusedTrainPlan::store(nn::Sequential& model, optim::Optimizer& optimizer) {
  const cuda::DeviceGuard guard(device_.index);
  const auto layers = linear_layers(model, layers_.size());
  const Tensor* buffers[] = {&master_, &state1_, &state2_};
  const FlatSlotReader read = [&](int buffer, const FlatSlot& slot, const Shape& shape, Device device) {
    SN_CHECK(device == device_, "the fused engine on {} stores into a model on {}", device_.str(), device.str());
    Tensor out = Tensor::empty(shape, DType::kF32, device_);
    const float* from = buffers[buffer]->data<float>() + slot.offset;
    SN_CUDA_CHECK(cudaMemcpy2DAsync(out.raw_data(), slot.cols * sizeof(float), from, slot.row_stride * sizeof(float),
                                    slot.cols * sizeof(float), slot.rows, cudaMemcpyDeviceToDevice, stream_));
    return out;
  };
  import_from_flat(read, state1_.defined(), slots_, layers, optimizer, spec_.optim, read_state(), "the fused engine");
  SN_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the slots' temporaries are released with the copies done
}

void FusedTrainPlan::start_epoch(std::int64_t epoch) {
  // The kernel runs the whole epoch (it would take the table's last entry again past its end).
  check_lr_steps(spec_.lr_per_step, run_step_, steps_per_epoch_);
  run_step_ += steps_per_epoch_;
  const cuda::DeviceGuard guard(device_.index);
  const BatchLoader& train = *spec_.train;
  if (train.options().shuffle) {
    SN_CUDA_CHECK(cuda::launch_epoch_permutation(train.options().seed, static_cast<std::uint64_t>(epoch), train.samples(),
                                                 permutation_scratch_.raw_data(), permutation_scratch_.nbytes(),
                                                 order_.data<std::int32_t>(), stream_));
  }
  SN_CUDA_CHECK(cudaMemsetAsync(metrics_.raw_data(), 0, metrics_.nbytes(), stream_));
  *host_progress() = cuda::FusedProgress{};
  cuda::FusedEpochArgs a = base_args(train);
  a.train = true;
  a.samples = samples_;
  a.order = order_.data<std::int32_t>();
  a.batch = batch_;
  a.steps = steps_per_epoch_;
  a.metrics = static_cast<cuda::StepMetrics*>(metrics_.raw_data());
  a.progress = static_cast<cuda::FusedProgress*>(progress_record_.device());
  a.normalised = normalised_.defined() ? normalised_.raw_data() : nullptr;  // the regression kernel's
  if (split_) {
    SN_CUDA_CHECK(cudaMemsetAsync(sync_.raw_data(), 0, sync_.nbytes(), stream_));  // the grid barrier
    SN_CUDA_CHECK(cuda::launch_split_epoch(a, split_scratch_.raw_data(), stream_));
  } else if (regression_) {
    SN_CUDA_CHECK(cuda::launch_regression_epoch(a, stream_));
  } else if (cluster_) {
    SN_CUDA_CHECK(cuda::launch_cluster_epoch(a, cluster_layout_, cluster_partials_.data<float>(), stream_));
  } else if (rows_) {
    SN_CUDA_CHECK(cuda::launch_rows_epoch(a, rows_layout_, rows_scratch_.raw_data(), stream_));
  } else if (quads_) {
    SN_CUDA_CHECK(cuda::launch_quads_epoch(a, quads_layout_, stream_));
  } else {
    launch(a);
  }
}

std::optional<ProgressSnapshot> FusedTrainPlan::progress(std::int64_t /*steps*/) {
  // The kernel writes both fields in one 16-byte store.
  const volatile cuda::FusedProgress* p = host_progress();
  const std::int64_t steps = p->steps;
  if (steps == 0) return std::nullopt;
  return ProgressSnapshot{steps, p->loss_sum};
}

EpochTotals FusedTrainPlan::finish_epoch() {
  const cuda::NvtxRange range("finish_epoch");
  cuda::StepMetrics* host = host_metrics();
  SN_CUDA_CHECK(cudaMemcpyAsync(host, metrics_.raw_data(), sizeof(*host), cudaMemcpyDeviceToHost, stream_));
  SN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (stage_clock_.defined()) print_profile();
  return {host->loss_sum, host->correct, host->skipped};
}

// The mean time of each stage of a step over the epoch (clock[0]: start, clock[1]: first gather).
void FusedTrainPlan::print_profile() {
  const auto bytes = stage_clock_.to(Device::cpu()).to_vector<std::uint8_t>();
  std::vector<std::int64_t> clock(bytes.size() / 8);
  std::memcpy(clock.data(), bytes.data(), clock.size() * 8);
  if (stage_clock_block_ < 0) {
    const std::int64_t region = static_cast<std::int64_t>(clock.size()) / cuda::kRowsCtas;
    std::fprintf(stderr, "%s",
                 format_stage_timeline(read_stage_timeline(clock, cuda::kRowsCtas, region, steps_per_epoch_)).c_str());
    SN_CUDA_CHECK(cudaMemsetAsync(stage_clock_.raw_data(), 0, stage_clock_.nbytes(), stream_));
    return;
  }
  // Grid kernel: 2 stages a layer (fp16: one more); the split kernel: split_stamps_per_step (its
  // barriers and the stamps inside its stages); the cluster, regression and rows kernels: as many
  // stamps a step as they wrote (their lab adds some inside stages).
  const std::size_t layers = layers_.size();
  std::size_t per_step = split_ ? static_cast<std::size_t>(cuda::split_stamps_per_step(static_cast<int>(layers) - 1))
                                : 2 * layers + (type_ == ElementType::kF16 ? 1 : 0);
  if (cluster_ || regression_ || rows_ || quads_) {
    const auto written = static_cast<std::size_t>(std::count_if(clock.begin(), clock.end(), [](auto t) { return t != 0; }));
    per_step = (written - 2) / static_cast<std::size_t>(std::max<std::int64_t>(steps_per_epoch_, 1));
  }
  std::vector<double> sum(per_step, 0.0);
  std::int64_t steps = 0;
  for (std::size_t first = 2; first + per_step <= clock.size() && steps < steps_per_epoch_; first += per_step) {
    for (std::size_t k = 0; k < per_step; ++k) sum[k] += static_cast<double>(clock[first + k] - clock[first + k - 1]);
    ++steps;
  }
  const double per = 1e-3 / static_cast<double>(std::max<std::int64_t>(steps, 1));
  const std::string kernel = split_        ? fmt::format("split kernel, {} blocks", split_blocks_)
                             : regression_ ? fmt::format("regression kernel, {} blocks", cuda::kRegressionCtas)
                             : cluster_    ? fmt::format("cluster kernel, {} blocks", cuda::kClusterCtas)
                             : rows_       ? fmt::format("rows kernel, {} blocks, block {}'s clock", cuda::kRowsCtas,
                                                             stage_clock_block_)
                             : quads_      ? fmt::format("quads kernel, {} blocks, block {}'s clock", cuda::kQuadsCtas,
                                                             stage_clock_block_)
                                           : fmt::format("grid kernel, {} blocks", blocks_);
  std::string line = fmt::format("fused profile ({}, {} steps): start+gather {:.2f} us; per step:", kernel, steps,
                                 1e-3 * static_cast<double>(clock[1] - clock[0]));
  double total = 0.0;
  for (std::size_t k = 0; k < per_step; ++k) {
    line += fmt::format(" s{} {:.2f}", k, sum[k] * per);
    total += sum[k];
  }
  std::fprintf(stderr, "%s us; %.2f us a step\n", line.c_str(), total * per);
}

EvalResult FusedTrainPlan::evaluate(const BatchLoader& loader) {
  const cuda::NvtxRange range("evaluate");
  const cuda::DeviceGuard guard(device_.index);
  SN_CHECK(loader.features() == spec_.mlp.inputs, "evaluation data has {} features, the model takes {}",
           loader.features(), spec_.mlp.inputs);
  const std::int64_t n = loader.samples();
  if (row_loss_.numel() < n) {  // one loss per evaluated sample, added in order at the end
    row_loss_ = Tensor::zeros({n}, DType::kF64, device_);
    row_correct_ = Tensor::zeros({n}, DType::kI32, device_);
  }
  SN_CUDA_CHECK(cudaMemsetAsync(eval_metrics_.raw_data(), 0, eval_metrics_.nbytes(), stream_));
  cuda::FusedEpochArgs a = base_args(loader);
  a.train = false;
  a.samples = n;
  a.batch = eval_batch_;
  a.steps = (n + eval_batch_ - 1) / eval_batch_;
  a.metrics = static_cast<cuda::StepMetrics*>(eval_metrics_.raw_data());
  launch(a);
  cuda::StepMetrics* host = host_metrics();
  SN_CUDA_CHECK(cudaMemcpyAsync(host, eval_metrics_.raw_data(), sizeof(*host), cudaMemcpyDeviceToHost, stream_));
  SN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  EvalResult result;
  result.samples = n;
  result.correct = host->correct;
  result.loss = host->loss_sum / static_cast<double>(n);
  result.accuracy = static_cast<double>(host->correct) / static_cast<double>(n);
  return result;
}

std::string FusedTrainPlan::describe() const {
  const std::size_t layers = layers_.size();
  // The cluster kernel: the first layer's partial sums and one before the output stage (its other
  // stages wait on their data's mbarriers); the rows kernel: the one that frees the partials' slots;
  // the regression kernel: none (two exchanges on
  // mbarriers); the split kernel: a grid barrier a stage, the output layer's forward and backward
  // one; the grid kernel: 2 a layer (fp16: one more).
  const std::size_t barriers = regression_ ? 0
                               : rows_ || quads_ ? 1
                               : cluster_  ? 2
                               : split_    ? 2 * layers - 1
                                           : 2 * layers + (type_ == ElementType::kF16 ? 1 : 0);
  return fmt::format("fused engine: one persistent kernel per epoch on {} ({} barriers a step), {} tensor-core "
                     "products with fp32 master weights, {} update over {} flat parameters",
                     split_ || regression_ || cluster_ || rows_ || quads_ ? kernel_note_
                                                       : fmt::format("a grid of {} blocks exchanging through L2", blocks_),
                     barriers, spec_.precision, spec_.optim.type, params_);
}

}  // namespace

std::int64_t gpu_on_chip_bytes(int index) {
  int bytes = 0;
  SN_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, index));
  return bytes;
}

bool gpu_runs_quads_kernel(int index, const nn::MlpSpec& mlp) {
  if (fused_quads_unsupported(mlp, "bf16", OptimConfig{}, 1)) return false;
  return cuda::quads_epoch_unavailable(index, fused_quads_layout(mlp).bytes) == nullptr;
}

bool gpu_runs_rows_kernel(int index, const nn::MlpSpec& mlp) {
  if (fused_rows_unsupported(mlp, "bf16", 1)) return false;
  return cuda::rows_epoch_unavailable(index, fused_rows_layout(mlp).bytes) == nullptr;
}

bool gpu_runs_cluster_kernel(int index, const nn::MlpSpec& mlp) {
  const cuda::DeviceGuard guard(index);
  return cuda::cluster_epoch_unavailable(index, fused_cluster_layout(mlp).bytes) == nullptr;
}

bool gpu_runs_regression_kernel(int index) {
  const cuda::DeviceGuard guard(index);
  return cuda::regression_epoch_unavailable(index) == nullptr;
}

bool gpu_runs_split_kernel(int index, std::int64_t width, std::int64_t depth) {
  const cuda::DeviceGuard guard(index);
  return cuda::split_epoch_unavailable(index, static_cast<int>(width), static_cast<int>(depth)) == nullptr;
}

bool gpu_shared_with_other_runs(int index) { return cuda::thread_stream_resources(index) != nullptr; }

std::unique_ptr<TrainPlan> make_fused_train_plan(const TrainPlanSpec& spec, Device device) {
  return std::make_unique<FusedTrainPlan>(spec, device);
}

}  // namespace sprintnet::train
