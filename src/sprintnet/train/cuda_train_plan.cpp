// The compiled training step on CUDA (train/train_plan.h).
//
// Compile time (the constructor) allocates every buffer the step touches and
// plans every cuBLASLt product; the first start_epoch() captures one step into
// a CUDA graph. A step is then a single graph launch (docs/ARCHITECTURE.md):
//
//   gather    uint8 → compute type, the batch picked by the device step counter
//   forward   hidden layers: products with bias + ReLU epilogues;
//             output layer (<= 32 classes): one kernel with the softmax cross-entropy
//   backward  weight gradients (bias gradient fused) on a side stream, input
//             gradients on the main one, then ReLU's gradient by an elementwise kernel (the
//             output layer's skinny kernel applies it itself)
//   update    flat fp32 buffers, per layer on a third stream from 4 M parameters, else
//             one launch; writes the compute-type copy and advances the step counter
//
// Weights, gradients and optimizer state of all layers live in flat buffers
// (each tensor at a 128-element boundary), so an update is one kernel.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <deque>
#include <optional>
#include <string_view>

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/error.h"
#include "sprintnet/core/graph_capture_lock.h"
#include "sprintnet/dist/update_sharding.h"
#include "sprintnet/memory/pinned_host_pool.h"
#include "sprintnet/nn/linear.h"
#include "sprintnet/ops/cuda/cuda_backend.h"
#include "sprintnet/ops/cuda/device_guard.h"
#include "sprintnet/ops/cuda/gemm.h"
#include "sprintnet/ops/cuda/nvtx.h"
#include "sprintnet/ops/cuda/step_launch.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/train/flat_parameters.h"
#include "sprintnet/train/padded_parameters.h"
#include "sprintnet/train/train_plan.h"

namespace sprintnet::train {
namespace {

using cuda::ElementType;
using cuda::GemmDesc;
using cuda::GemmEpilogue;
using cuda::GemmPrecision;

constexpr std::int64_t kTensorAlignment = 128;  // elements: 512 B in fp32, 256 B in 16-bit
constexpr int kProgressSlots = 4;

std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }

// A non-blocking communicator may answer ncclInProgress while NCCL finishes enqueuing a call; the
// job's is blocking (dist/communicator.cpp), so this only guards against one that is not.
ncclResult_t settled(ncclComm_t comm, ncclResult_t r) {
  while (r == ncclInProgress) {
    if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) return ncclInternalError;
  }
  return r;
}

struct Precision {
  GemmPrecision gemm;
  ElementType element;  // activations and the weights the products read
  DType dtype;
};

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return {GemmPrecision::kF32, ElementType::kF32, DType::kF32};
  if (name == "tf32") return {GemmPrecision::kTF32, ElementType::kF32, DType::kF32};
  if (name == "bf16") return {GemmPrecision::kBF16, ElementType::kBF16, DType::kBF16};
  if (name == "fp16") return {GemmPrecision::kF16, ElementType::kF16, DType::kF16};
  SN_FAIL("device.precision = \"{}\": the compiled step computes in fp32, tf32, bf16 or fp16", name);
}

// Owns a captured-and-instantiated graph.
struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() { reset(); }
  void reset() {
    if (exec != nullptr) SN_CUDA_WARN(cudaGraphExecDestroy(exec));
    if (graph != nullptr) SN_CUDA_WARN(cudaGraphDestroy(graph));
    exec = nullptr;
    graph = nullptr;
  }
};

struct EventDeleter {
  void operator()(CUevent_st* e) const noexcept { SN_CUDA_WARN(cudaEventDestroy(e)); }
};
struct StreamDeleter {
  void operator()(CUstream_st* s) const noexcept { SN_CUDA_WARN(cudaStreamDestroy(s)); }
};
using Event = std::unique_ptr<CUevent_st, EventDeleter>;

Event make_event() {
  cudaEvent_t e = nullptr;
  SN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return Event(e);
}

// One Linear layer's place in the flat buffers and its activation buffers.
struct Layer {
  std::int64_t in = 0, out = 0;
  std::int64_t weight_offset = 0, bias_offset = -1;  // elements into the flat buffers; -1: no bias
  bool relu = false;                                  // a ReLU follows (hidden layers)
  // A hidden activation that no cuBLASLt epilogue applies (GELU, tanh, sigmoid, SiLU): an elementwise
  // kernel applies it to the product's output, kept in `pre` for the backward.
  std::optional<cuda::ActivationKind> elementwise;
  Tensor pre;        // [B, out] compute type: the pre-activation, with `elementwise`
  Tensor act;        // [B, out] compute type: the layer's output (after its activation)
  Tensor grad;       // [B, out] compute type: gradient w.r.t. the pre-activation
  Tensor mask;       // ReLU mask bits, cuBLASLt's layout
  Tensor eval_act;   // [eval batch, out]
};

class CudaTrainPlan final : public TrainPlan {
 public:
  CudaTrainPlan(const TrainPlanSpec& spec, Device device);
  ~CudaTrainPlan() override;

  void load(nn::Sequential& model, optim::Optimizer& optimizer) override;
  void store(nn::Sequential& model, optim::Optimizer& optimizer) override;
  void start_epoch(std::int64_t epoch) override;
  void step() override;
  std::optional<ProgressSnapshot> progress(std::int64_t steps) override;
  EpochTotals finish_epoch() override;
  EvalResult evaluate(const BatchLoader& loader) override;
  std::string describe() const override;
  void* stream_handle() const override { return stream_; }
  std::optional<LossScaling> loss_scaling() override;
  void set_loss_scaling(const LossScaling& scaling) override;

 private:
  // The weights the products read: the compute copy, or the master itself in fp32/tf32.
  void* weights(std::int64_t offset) const;
  // One training step over `rows` rows per rank (batch_, or the partial last batch's).
  void enqueue_step(cudaStream_t main, std::int64_t rows);
  // Layers before the loss (all but the skinny output layer, which the loss kernel computes).
  void enqueue_forward(const void* input, std::int64_t rows, bool training, cudaStream_t stream);
  // The loss (and, training, its gradient into the output layer's gradient buffer).
  void enqueue_loss(const void* input, std::int64_t rows, const std::int32_t* labels, bool training,
                    cuda::StepMetrics* metrics, cudaStream_t stream);
  cuda::FlatOptimizerArgs update_args();
  // Rows [0, rows) of `loader`'s data set into dst and dst_labels, in order (callers set order/state).
  cuda::GatherArgs gather_args(const BatchLoader& loader, std::int64_t rows, const Tensor& dst,
                               const Tensor& dst_labels) const;
  // Elements [begin, end) of the flat buffers that hold layer l's weight and bias.
  std::pair<std::int64_t, std::int64_t> layer_range(std::size_t l) const;
  // A hidden layer's gradient times its elementwise activation's derivative (nothing for ReLU/identity).
  void enqueue_activation_gradient(Layer& layer, std::int64_t rows, cudaStream_t stream);
  void gather_shards() override;
  // Data parallel: the ranks' sum of `count` gradients from `offset`, in place, on `stream`.
  void enqueue_all_reduce(std::int64_t offset, std::int64_t count, cudaStream_t stream);
  // The sharded update (ZeRO-1, dist/update_sharding.h): the range's gradients summed into this
  // rank's shard; the shards of a buffer gathered back into every rank (in place).
  void enqueue_reduce_scatter(const dist::FlatRange& range, cudaStream_t stream);
  void enqueue_all_gather(const Tensor& buffer, const dist::FlatRange& range, cudaStream_t stream);
  // The range's update: all of it, or (sharded) this rank's shard, then the weights gathered.
  void enqueue_range_update(const cuda::FlatOptimizerArgs& optimizer, const dist::FlatRange& range, bool advance,
                            cudaStream_t stream);
  std::vector<dist::FlatRange> update_ranges() const;
  void enqueue_evaluation(const BatchLoader& loader, cudaStream_t stream);
  // Records what `enqueue` launches on the plan's stream into `graph`, instantiated and uploaded.
  template <typename Enqueue>
  void capture(Graph& graph, Enqueue&& enqueue);
  // A product in the plan's precision; outputs (activations and gradients) in the compute type.
  GemmDesc desc(std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb, GemmEpilogue e) const;
  // Where layers_ keep their parameters in the flat buffers (train/flat_parameters.h).
  FlatLayout flat_layout() const;
  cuda::StepState read_state();
  void write_state(const cuda::StepState& state);

  TrainPlanSpec spec_;
  Device device_;
  Precision precision_;
  cudaStream_t stream_;  // the backend's: ordered with every tensor copy and allocation
  std::unique_ptr<CUstream_st, StreamDeleter> side_;    // weight gradients
  std::unique_ptr<CUstream_st, StreamDeleter> update_;  // per-layer optimizer updates
  std::unique_ptr<cuda::CublasLtGemm> gemm_main_, gemm_side_;  // one workspace per concurrent stream
  std::int64_t batch_ = 0, eval_batch_ = 0, steps_per_epoch_ = 0, samples_ = 0;
  std::int64_t global_batch_ = 0;  // batch_ * spec_.world
  std::int64_t tail_rows_ = 0;      // train.drop_last = false: the partial last batch's rows (0: none)
  std::int64_t step_in_epoch_ = 0;  // steps launched since start_epoch (picks the last batch's graph)
  std::int64_t run_step_ = 0;       // the run's steps launched (StepState::step once they ran): lr_per_step's bound
  std::vector<Layer> layers_;
  std::int64_t params_ = 0;  // flat length, padded
  bool bias_grad_fused_ = true;
  bool mse_ = false;               // loss.type = "mse" (squared error against one-hot targets)
  bool skinny_ = false;            // the output layer runs on the fused kernels of skinny_layer.cu
  bool per_layer_updates_ = true;  // each layer's update starts when its gradients are done (not fp16)
  bool sharded_ = false;           // device.update = sharded over several ranks (ZeRO-1)
  bool wgrad_on_side_ = true;      // weight gradients beside the input gradients (SPRINTNET_WGRAD_SIDE=0: serial)
  bool relu_by_epilogue_ = false;  // ReLU's gradient by cuBLASLt's DRELU (SPRINTNET_DRELU_EPILOGUE=1), not a kernel
  bool shards_gathered_ = false;   // since the last step (gather_shards)
  Tensor master_, grad_, state1_, state2_, copy_;
  Tensor input_, labels_, eval_input_, eval_labels_;
  Tensor dlogits_;  // skinny output layer: fp32 [B, classes]
  Tensor block_loss_, block_correct_, blocks_done_;  // its per-block scratch
  Tensor skinny_partials_, skinny_counters_;        // its weight gradient's slices of rows (wide layers)
  cuda::SkinnyScratch skinny_scratch_{};            // ... as the kernel takes them (null: no slices)
  cuda::GatherArgs step_gather_{};  // how the step gathers its batch (the lone skinny layer reads through it)
  Tensor order_, permutation_scratch_, lr_table_;
  Tensor state_, metrics_, eval_metrics_;  // StepState, StepMetrics (raw bytes)
  PinnedHostRecord pinned_;  // kProgressSlots + 1 StepMetrics, then a StepState
  std::array<Event, kProgressSlots> slot_events_;
  std::deque<std::pair<int, std::int64_t>> pending_;  // (slot, steps) in flight, oldest first
  int next_slot_ = 0;
  std::optional<ProgressSnapshot> latest_;
  std::vector<Event> fork_events_;
  Graph step_graph_;
  Graph tail_graph_;  // the partial last batch's step
  Graph eval_graph_;
  const BatchLoader* eval_loader_ = nullptr;  // the loader eval_graph_ was captured for
};

CudaTrainPlan::CudaTrainPlan(const TrainPlanSpec& spec, Device device)
    : spec_(spec), device_(device), precision_(parse_precision(spec.precision)) {
  check_train_plan_spec(spec);
  SN_CHECK(device.is_cuda(), "the compiled step runs on CUDA devices, not {}", device.str());
  const cuda::DeviceGuard guard(device.index);
  stream_ = static_cast<cuda::CudaBackend&>(backend_for(device)).stream();
  // The weight gradients and the per-layer reductions and updates run at the device's highest stream
  // priority, the chain of input gradients at the lowest: a layer's weight gradient then finishes
  // before the input gradient beside it, so its reduction (data parallel) starts while the rest of
  // the backward still has work to hide it behind. The captured kernel nodes keep their stream's
  // priority (capture copies it; instantiate with UseNodePriority). SPRINTNET_STREAM_PRIORITY=0 turns
  // it off, for measuring what it gains (docs/PERFORMANCE.md).
  int lowest = 0, highest = 0;
  SN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
  const char* priority_switch = std::getenv("SPRINTNET_STREAM_PRIORITY");
  const int priority = priority_switch != nullptr && std::string_view(priority_switch) == "0" ? lowest : highest;
  cudaStream_t side = nullptr;
  SN_CUDA_CHECK(cudaStreamCreateWithPriority(&side, cudaStreamNonBlocking, priority));
  side_.reset(side);
  cudaStream_t update = nullptr;
  SN_CUDA_CHECK(cudaStreamCreateWithPriority(&update, cudaStreamNonBlocking, priority));
  update_.reset(update);
  // SPRINTNET_WGRAD_SIDE=0 puts the weight gradients on the main stream, each before its layer's input
  // gradient, one product at a time (kernel lab: what two large products side by side cost or gain,
  // docs/PERFORMANCE.md).
  if (const char* wgrad = std::getenv("SPRINTNET_WGRAD_SIDE")) wgrad_on_side_ = std::string_view(wgrad) != "0";
  // ReLU's gradient: an elementwise kernel (from the layer's output) after a plain input-gradient product.
  // cuBLASLt's DRELU epilogue, which reads a mask the forward writes (RELU_AUX_BIAS), slows the product
  // itself: 4096 x 8192 x 8192 bf16 at ~615 TFLOP/s against ~810 without it (H200; docs/PERFORMANCE.md).
  // SPRINTNET_DRELU_EPILOGUE=1 brings the epilogue and the mask back, for measuring both.
  if (const char* drelu = std::getenv("SPRINTNET_DRELU_EPILOGUE")) relu_by_epilogue_ = std::string_view(drelu) == "1";
  // SPRINTNET_BGRAD_EPILOGUE=0: the bias gradient by a column-sum kernel after a plain weight-gradient product
  // instead of cuBLASLt's BGRADB epilogue (kernel lab, docs/PERFORMANCE.md).
  if (const char* bgrad = std::getenv("SPRINTNET_BGRAD_EPILOGUE")) bias_grad_fused_ = std::string_view(bgrad) != "0";
  gemm_main_ = std::make_unique<cuda::CublasLtGemm>();
  gemm_side_ = std::make_unique<cuda::CublasLtGemm>();

  const BatchLoader& train = *spec.train;
  global_batch_ = train.options().batch_size;
  SN_CHECK(global_batch_ % spec.world == 0, "train.batch_size = {} does not split evenly over {} GPUs", global_batch_,
           spec.world);
  batch_ = global_batch_ / spec.world;  // this rank's rows of every step
  eval_batch_ = spec.eval_batch_size;
  samples_ = train.samples();
  steps_per_epoch_ = train.batches_per_epoch();
  tail_rows_ = train.options().drop_last ? 0 : samples_ % global_batch_;
  SN_CHECK(tail_rows_ == 0 || spec.world == 1,
           "data parallel over {} GPUs needs whole batches: {} training samples leave a last batch of {} (batch {}); "
           "set train.drop_last = true", spec.world, samples_, tail_rows_, global_batch_);
  SN_CHECK(batch_ <= 65535 && eval_batch_ <= 65535, "the compiled step takes batches of at most 65535 samples");
  const auto& mlp = spec.mlp;

  // Flat layout: layer by layer, weight then bias, as the model's parameters() lists them.
  std::int64_t in = mlp.inputs;
  std::vector<std::int64_t> widths = mlp.hidden;
  widths.push_back(mlp.outputs);
  for (std::size_t l = 0; l < widths.size(); ++l) {
    Layer layer;
    layer.in = in;
    layer.out = widths[l];
    const bool hidden = l + 1 < widths.size();
    layer.relu = hidden && mlp.activation == Activation::kReLU;
    if (hidden && mlp.activation != Activation::kReLU && mlp.activation != Activation::kIdentity) {
      layer.elementwise = static_cast<cuda::ActivationKind>(mlp.activation);  // the same order (fused engine too)
    }
    layer.weight_offset = params_;
    params_ = round_up(params_ + layer.in * layer.out, kTensorAlignment);
    if (mlp.bias) {
      layer.bias_offset = params_;
      params_ = round_up(params_ + layer.out, kTensorAlignment);
    }
    layers_.push_back(std::move(layer));
    in = widths[l];
  }

  mse_ = spec.loss == "mse";
  skinny_ = !mse_ && layers_.back().out <= cuda::kSkinnyMaxOutputs;  // skinny_layer.cu fuses cross-entropy
  // SPRINTNET_SKINNY=0 sends it through cuBLASLt and the general cross-entropy instead (for measuring
  // what the skinny kernels gain: docs/PERFORMANCE.md).
  if (const char* skinny = std::getenv("SPRINTNET_SKINNY")) skinny_ = skinny_ && std::string_view(skinny) != "0";
  // fp16 checks every gradient before any update. SPRINTNET_SINGLE_UPDATE=1 also keeps one update at the
  // end of the step (for measuring what the overlap gains, docs/PERFORMANCE.md).
  const char* single_update = std::getenv("SPRINTNET_SINGLE_UPDATE");
  // Below ~4 M parameters the update is short and the extra launches and dependencies cost more than
  // the overlap gains (4x784x128: 30.9 ms/epoch with one update, 32.0 per layer; 4x4096x128: 232 vs 218).
  constexpr std::int64_t kOverlapFromParams = std::int64_t{4} << 20;
  // Data parallel: per layer, an all-reduce of its gradients then its update; below the threshold one
  // all-reduce of every gradient, then one update (docs/DISTRIBUTED.md).
  per_layer_updates_ = precision_.element != ElementType::kF16 && params_ >= kOverlapFromParams &&
                       !(single_update != nullptr && std::string_view(single_update) == "1");

  sharded_ = dist::resolve_update(spec.update, update_ranges(), spec.world, spec.precision) == "sharded";

  // Padding stays zero in every buffer: its gradient is never written, so its update keeps it zero.
  master_ = Tensor::zeros({params_}, DType::kF32, device);
  // Gradients in the products' output type: fp32, or bf16/fp16 as torch.autocast computes them (the
  // update reads them into fp32 master weights and state). Half the bytes of the update's biggest read.
  grad_ = Tensor::zeros({params_}, precision_.dtype, device);
  const bool sgd = spec.optim.type == "sgd";
  if (!sgd || spec.optim.momentum > 0.0) state1_ = Tensor::zeros({params_}, DType::kF32, device);
  if (!sgd) state2_ = Tensor::zeros({params_}, DType::kF32, device);
  if (precision_.element != ElementType::kF32) copy_ = Tensor::zeros({params_}, precision_.dtype, device);

  const DType act = precision_.dtype == DType::kF32 ? DType::kF32 : precision_.dtype;
  input_ = Tensor::empty({batch_, mlp.inputs}, act, device);
  labels_ = Tensor::empty({batch_}, DType::kI32, device);
  eval_input_ = Tensor::empty({eval_batch_, mlp.inputs}, act, device);
  eval_labels_ = Tensor::empty({eval_batch_}, DType::kI32, device);
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    Layer& layer = layers_[l];
    layer.act = Tensor::empty({batch_, layer.out}, act, device);
    layer.grad = Tensor::empty({batch_, layer.out}, act, device);
    if (layer.elementwise) layer.pre = Tensor::empty({batch_, layer.out}, act, device);
    // The DRELU epilogue's mask (below a skinny layer its kernel reads act instead).
    if (layer.relu && relu_by_epilogue_ && !(skinny_ && l + 2 == layers_.size())) {
      layer.mask = Tensor::zeros({static_cast<std::int64_t>(cuda::relu_mask_bytes(batch_, layer.out))}, DType::kU8,
                                 device);
    }
    layer.eval_act = Tensor::empty({eval_batch_, layer.out}, act, device);
  }
  if (skinny_) {
    dlogits_ = Tensor::empty({batch_, layers_.back().out}, DType::kF32, device);
    const std::int64_t blocks = cuda::skinny_forward_blocks(std::max(batch_, eval_batch_));
    block_loss_ = Tensor::empty({blocks}, DType::kF64, device);
    block_correct_ = Tensor::empty({blocks * 8}, DType::kU8, device);
    blocks_done_ = Tensor::zeros({4}, DType::kU8, device);
    // The weight gradient's slices of rows (wide layers); a tail batch takes no more slices.
    const cuda::SkinnySplit split = cuda::skinny_weight_grad_split(batch_, layers_.back().in);
    if (split.splits > 1) {
      skinny_partials_ = Tensor::empty({split.scratch_floats}, DType::kF32, device);
      skinny_counters_ = Tensor::zeros({split.groups}, DType::kI32, device);
      skinny_scratch_ = {.partials = skinny_partials_.data<float>(),
                         .counters = static_cast<std::uint32_t*>(skinny_counters_.raw_data())};
    }
  }
  std::vector<std::int32_t> identity(static_cast<std::size_t>(samples_));
  for (std::size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<std::int32_t>(i);
  order_ = Tensor::from_vector(identity, {samples_}, device);
  permutation_scratch_ = Tensor::empty(
      {static_cast<std::int64_t>(cuda::epoch_permutation_scratch_bytes(samples_))}, DType::kU8, device);
  lr_table_ = Tensor::from_vector(spec.lr_per_step, {static_cast<std::int64_t>(spec.lr_per_step.size())}, device);
  state_ = Tensor::zeros({static_cast<std::int64_t>(sizeof(cuda::StepState))}, DType::kU8, device);
  metrics_ = Tensor::zeros({static_cast<std::int64_t>(sizeof(cuda::StepMetrics))}, DType::kU8, device);
  eval_metrics_ = Tensor::zeros({static_cast<std::int64_t>(sizeof(cuda::StepMetrics))}, DType::kU8, device);

  pinned_ = PinnedHostRecord((kProgressSlots + 1) * sizeof(cuda::StepMetrics) + sizeof(cuda::StepState));
  for (auto& e : slot_events_) e = make_event();
  for (std::size_t i = 0; i < 4 * layers_.size() + 2; ++i) fork_events_.push_back(make_event());

  // Plan every product now (cuBLASLt's heuristic runs on the host), so capture only records launches.
  for (const Layer& layer : layers_) {
    if (layer.bias_offset >= 0) {
      for (const std::int64_t rows : {batch_, tail_rows_}) {
        if (rows == 0) continue;
        const GemmDesc fused = desc(layer.out, layer.in, rows, true, false, GemmEpilogue::kBiasGradA);
        bias_grad_fused_ = bias_grad_fused_ && gemm_side_->supported(fused);
      }
    }
  }
}

// The copies into the pinned record are done before it goes back to the pool.
CudaTrainPlan::~CudaTrainPlan() { SN_CUDA_WARN(cudaStreamSynchronize(stream_)); }

GemmDesc CudaTrainPlan::desc(std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb,
                             GemmEpilogue e) const {
  return GemmDesc{.m = m, .n = n, .k = k, .trans_a = ta, .trans_b = tb, .precision = precision_.gemm,
                  .c_f32 = precision_.element == ElementType::kF32, .epilogue = e};
}

void* CudaTrainPlan::weights(std::int64_t offset) const {
  if (copy_.defined()) return static_cast<char*>(copy_.raw_data()) + offset * dtype_size(copy_.dtype());
  return master_.data<float>() + offset;
}

FlatLayout CudaTrainPlan::flat_layout() const {
  FlatLayout layout;
  for (const Layer& layer : layers_) {
    layout.layers.push_back({layer.in, layer.out, layer.weight_offset, layer.bias_offset});
  }
  layout.size = params_;
  return layout;
}

void CudaTrainPlan::enqueue_forward(const void* input, std::int64_t rows, bool training, cudaStream_t stream) {
  const void* x = input;
  const std::size_t products = skinny_ ? layers_.size() - 1 : layers_.size();
  for (std::size_t l = 0; l < products; ++l) {
    Layer& layer = layers_[l];
    const bool bias = layer.bias_offset >= 0;
    const bool mask = training && layer.mask.defined();
    GemmEpilogue e = bias ? GemmEpilogue::kBias : GemmEpilogue::kNone;
    if (layer.relu) {
      e = mask ? (bias ? GemmEpilogue::kReluAuxBias : GemmEpilogue::kReluAux)
               : (bias ? GemmEpilogue::kReluBias : GemmEpilogue::kRelu);
    }
    Tensor& out = training ? layer.act : layer.eval_act;
    // Training keeps an elementwise activation's input for the backward; evaluation applies it in place.
    Tensor& product = training && layer.elementwise ? layer.pre : out;
    // Forward: Y[rows, out] = X[rows, in] @ W[out, in]^T (+ bias, ReLU).
    gemm_main_->run(desc(rows, layer.out, layer.in, false, true, e),
                    {.a = x, .b = weights(layer.weight_offset), .c = product.raw_data(),
                     .bias = bias ? weights(layer.bias_offset) : nullptr,
                     .aux = mask ? layer.mask.raw_data() : nullptr},
                    stream);
    if (layer.elementwise) {
      SN_CUDA_CHECK(cuda::launch_activation_forward(*layer.elementwise, precision_.element, product.raw_data(),
                                                    out.raw_data(), rows * layer.out, stream));
    }
    x = out.raw_data();
  }
}

void CudaTrainPlan::enqueue_loss(const void* input, std::int64_t rows, const std::int32_t* labels, bool training,
                                 cuda::StepMetrics* metrics, cudaStream_t stream) {
  Layer& last = layers_.back();
  // Training: the step's mean loss over the global batch (each rank adds its rows' share).
  const double weight = training ? 1.0 / static_cast<double>(rows * spec_.world) : 1.0;
  const float smoothing = training ? static_cast<float>(spec_.label_smoothing) : 0.0f;
  const auto* state = training ? static_cast<const cuda::StepState*>(state_.raw_data()) : nullptr;
  if (skinny_) {
    const void* x = input;
    if (layers_.size() > 1) {
      const Layer& below = layers_[layers_.size() - 2];
      x = training ? below.act.raw_data() : below.eval_act.raw_data();
    }
    const cuda::SkinnyForwardArgs args{.x = x,
                                       .w = weights(last.weight_offset),
                                       .bias = last.bias_offset >= 0 ? weights(last.bias_offset) : nullptr,
                                       .type = precision_.element,
                                       .rows = rows,
                                       .in = last.in,
                                       .classes = static_cast<int>(last.out),
                                       .labels = labels,
                                       .smoothing = smoothing,
                                       .dlogits = training ? dlogits_.data<float>() : nullptr,
                                       .grad_scale = static_cast<float>(weight),
                                       .state = state,
                                       .block_loss = block_loss_.data<double>(),
                                       .block_correct = static_cast<long long*>(block_correct_.raw_data()),
                                       .blocks_done = static_cast<std::uint32_t*>(blocks_done_.raw_data()),
                                       // Training: the weight-gradient kernel adds the rows (RowSums).
                                       .metrics = training ? nullptr : metrics,
                                       .loss_weight = weight,
                                       .gathered = training && layers_.size() == 1,
                                       .source = step_gather_};
    SN_CUDA_CHECK(cuda::launch_skinny_forward_cross_entropy(args, stream));
    return;
  }
  const cuda::CrossEntropyArgs args{.logits = training ? last.act.raw_data() : last.eval_act.raw_data(),
                                    .type = precision_.element,
                                    .labels = labels,
                                    .rows = rows,
                                    .classes = last.out,
                                    .smoothing = smoothing,
                                    .dlogits = training ? last.grad.raw_data() : nullptr,
                                    .grad_scale = static_cast<float>(weight),
                                    .state = state,
                                    .metrics = metrics,
                                    .loss_weight = weight,
                                    .squared_error = mse_};
  SN_CUDA_CHECK(cuda::launch_fused_cross_entropy(args, stream));
}

cuda::GatherArgs CudaTrainPlan::gather_args(const BatchLoader& loader, std::int64_t rows, const Tensor& dst,
                                            const Tensor& dst_labels) const {
  return {.images = loader.images().data<std::uint8_t>(),
          .labels = loader.labels().data<std::int32_t>(),
          .features = spec_.mlp.inputs,
          .order = nullptr,
          .state = nullptr,
          .steps_per_epoch = 1,
          .first = 0,
          .rows = rows,
          .scale = static_cast<float>(loader.normalization().scale),
          .shift = static_cast<float>(loader.normalization().shift),
          .dst = dst.raw_data(),
          .dst_type = precision_.element,
          .dst_labels = dst_labels.data<std::int32_t>()};
}

std::pair<std::int64_t, std::int64_t> CudaTrainPlan::layer_range(std::size_t l) const {
  const std::int64_t begin = layers_[l].weight_offset;
  const std::int64_t end = l + 1 < layers_.size() ? layers_[l + 1].weight_offset : params_;
  return {begin, end};
}

cuda::FlatOptimizerArgs CudaTrainPlan::update_args() {
  // The hyper-parameters as every flat update takes them (padded_parameters.h), then this plan's buffers.
  cuda::FlatOptimizerArgs args = flat_optimizer_config(spec_.optim, precision_.element == ElementType::kF16);
  args.master = master_.data<float>();
  args.grad = grad_.raw_data();
  args.grad_type = precision_.element;
  args.state1 = state1_.defined() ? state1_.data<float>() : nullptr;
  args.state2 = state2_.defined() ? state2_.data<float>() : nullptr;
  args.copy = copy_.defined() ? copy_.raw_data() : nullptr;
  args.copy_type = precision_.element;
  args.count = params_;
  args.lr_table = lr_table_.data<double>();
  args.lr_table_size = lr_table_.numel();
  args.state = static_cast<cuda::StepState*>(state_.raw_data());
  args.metrics = static_cast<cuda::StepMetrics*>(metrics_.raw_data());
  return args;
}

void CudaTrainPlan::enqueue_step(cudaStream_t main, std::int64_t rows) {
  const BatchLoader& train = *spec_.train;
  auto* state = static_cast<cuda::StepState*>(state_.raw_data());
  auto* metrics = static_cast<cuda::StepMetrics*>(metrics_.raw_data());
  cuda::GatherArgs gather = gather_args(train, rows, input_, labels_);
  gather.order = order_.data<std::int32_t>();
  gather.state = state;
  gather.steps_per_epoch = steps_per_epoch_;
  gather.first = spec_.rank * batch_;  // this rank's share of the global batch
  gather.stride = global_batch_;
  // A lone output layer reads the batch straight from the data set (one launch fewer per step).
  const bool gathered = skinny_ && layers_.size() == 1;
  if (!gathered) SN_CUDA_CHECK(cuda::launch_gather_batch(gather, main));
  step_gather_ = gather;
  enqueue_forward(input_.raw_data(), rows, true, main);
  enqueue_loss(input_.raw_data(), rows, labels_.data<std::int32_t>(), true, metrics, main);

  // Backward. Weight gradients go to the side stream as soon as their layer's output gradient is
  // ready; the chain of input gradients, the critical path, stays on the main stream; each layer's
  // update goes to a third stream once both its weight gradient and its input gradient (which
  // reads the weights the update overwrites) are done, beside the products of the layers below.
  cudaStream_t side = side_.get(), update = update_.get();
  std::size_t event = 0;
  const auto record = [&](cudaStream_t done) {
    cudaEvent_t e = fork_events_.at(event++).get();
    SN_CUDA_CHECK(cudaEventRecord(e, done));
    return e;
  };
  const auto after = [&](cudaStream_t waiter, cudaStream_t done) {
    SN_CUDA_CHECK(cudaStreamWaitEvent(waiter, record(done), 0));
  };
  auto* grad = static_cast<char*>(grad_.raw_data());
  const std::size_t grad_bytes = dtype_size(grad_.dtype());
  const auto grad_at = [&](std::int64_t offset) { return static_cast<void*>(grad + offset * grad_bytes); };
  const cuda::FlatOptimizerArgs optimizer = update_args();
  // A lone output layer applies the update inside its weight-gradient kernel (not with fp16, whose
  // update must wait for every gradient's finiteness check): two launches a step in all.
  const bool fused_update = gathered && !optimizer.check_finite && spec_.world == 1;
  const cuda::FusedUpdate fused_args{.args = optimizer, .weight_offset = layers_[0].weight_offset,
                                     .bias_offset = layers_[0].bias_offset};
  for (std::size_t l = layers_.size(); l-- > 0;) {
    Layer& layer = layers_[l];
    const void* x = l == 0 ? input_.raw_data() : layers_[l - 1].act.raw_data();
    const bool bias = layer.bias_offset >= 0;
    // The first layer's weight gradient is the last product of the step: nothing to overlap it with.
    cudaStream_t wgrad = l == 0 || !wgrad_on_side_ ? main : side;
    if (wgrad == side) after(side, main);
    // Recorded right after the input-gradient product (l > 0), the last reader of W: the update need not
    // wait for the activation's gradient applied after it.
    cudaEvent_t w_read = nullptr;
    if (skinny_ && l + 1 == layers_.size()) {
      // The output layer: dW and the bias gradient from the fp32 logits gradient in one kernel, which
      // also adds the forward's per-row losses into the step's metrics.
      const cuda::RowSums row_sums{.loss = block_loss_.data<double>(),
                                   .correct = static_cast<const long long*>(block_correct_.raw_data()),
                                   .rows = rows,
                                   .metrics = metrics,
                                   .loss_weight = 1.0 / static_cast<double>(rows * spec_.world)};
      SN_CUDA_CHECK(cuda::launch_skinny_weight_grad(dlogits_.data<float>(), static_cast<int>(layer.out), x,
                                                    precision_.element, rows, layer.in, grad_at(layer.weight_offset),
                                                    bias ? grad_at(layer.bias_offset) : nullptr, wgrad,
                                                    gathered ? &step_gather_ : nullptr,
                                                    fused_update ? &fused_args : nullptr, &row_sums,
                                                    skinny_scratch_));
      if (l > 0) {
        Layer& below = layers_[l - 1];
        SN_CUDA_CHECK(cuda::launch_skinny_input_grad(dlogits_.data<float>(), static_cast<int>(layer.out),
                                                     weights(layer.weight_offset), precision_.element, rows,
                                                     layer.in, below.relu ? below.act.raw_data() : nullptr,
                                                     below.grad.raw_data(), main));
        w_read = record(main);
        enqueue_activation_gradient(below, rows, main);
      }
    } else {
      // dW[out, in] = dZ[B, out]^T @ X[B, in]; the bias gradient (sum of dZ over the batch) fused.
      const bool fused = bias && bias_grad_fused_;
      const GemmEpilogue wgrad_epilogue = fused ? GemmEpilogue::kBiasGradA : GemmEpilogue::kNone;
      (wgrad == side ? gemm_side_ : gemm_main_)->run(desc(layer.out, layer.in, rows, true, false, wgrad_epilogue),
                      {.a = layer.grad.raw_data(), .b = x, .c = grad_at(layer.weight_offset),
                       .bias = fused ? grad_at(layer.bias_offset) : nullptr},
                      wgrad);
      if (bias && !fused) {
        SN_CUDA_CHECK(cuda::launch_sum_rows(layer.grad.raw_data(), precision_.element, rows, layer.out, 0.0F,
                                            grad_at(layer.bias_offset), wgrad));
      }
      if (l > 0) {
        Layer& below = layers_[l - 1];
        // dX[B, in] = dZ[B, out] @ W[out, in], times ReLU's gradient of the layer below.
        const bool drelu = below.relu && relu_by_epilogue_;
        const GemmEpilogue dgrad_epilogue = drelu ? GemmEpilogue::kDRelu : GemmEpilogue::kNone;
        gemm_main_->run(desc(rows, layer.in, layer.out, false, false, dgrad_epilogue),
                        {.a = layer.grad.raw_data(), .b = weights(layer.weight_offset), .c = below.grad.raw_data(),
                         .aux = drelu ? below.mask.raw_data() : nullptr},
                        main);
        w_read = record(main);
        if (below.relu && !drelu) {
          SN_CUDA_CHECK(cuda::launch_activation_backward(cuda::ActivationKind::kReLU, precision_.element,
                                                         below.act.raw_data(), below.act.raw_data(),
                                                         below.grad.raw_data(), below.grad.raw_data(),
                                                         rows * below.out, main));
        }
        enqueue_activation_gradient(below, rows, main);
      }
    }
    if (per_layer_updates_ && !fused_update) {
      const auto [begin, end] = layer_range(l);
      // Data parallel: the layer's gradients are summed over the ranks as soon as they are written,
      // while the products of the layers below go on on the main stream (the overlap of
      // docs/DISTRIBUTED.md); its update then also waits for its input gradient, which reads W.
      after(update, wgrad);
      if (sharded_) {
        enqueue_reduce_scatter({begin, end}, update);
      } else if (spec_.world > 1) {
        enqueue_all_reduce(begin, end - begin, update);
      }
      if (wgrad == side) SN_CUDA_CHECK(cudaStreamWaitEvent(update, w_read, 0));  // side: l > 0, so recorded
      enqueue_range_update(optimizer, {begin, end}, /*advance=*/l == 0, update);
    }
  }
  if (fused_update) return;
  if (per_layer_updates_) {
    after(main, update);
  } else {
    if (layers_.size() > 1 && wgrad_on_side_) after(main, side);
    if (sharded_) {
      enqueue_reduce_scatter({0, params_}, main);
      enqueue_range_update(optimizer, {0, params_}, /*advance=*/true, main);
      return;
    }
    if (spec_.world > 1) enqueue_all_reduce(0, params_, main);
    if (optimizer.check_finite) {
      SN_CUDA_CHECK(cuda::launch_check_finite(grad_.raw_data(), precision_.element, params_, optimizer.state, main));
    }
    SN_CUDA_CHECK(cuda::launch_flat_optimizer(optimizer, main));
  }
}

void CudaTrainPlan::enqueue_activation_gradient(Layer& layer, std::int64_t rows, cudaStream_t stream) {
  // grad (w.r.t. the layer's output, from the product above) *= f'(pre, act), in place.
  if (!layer.elementwise) return;
  SN_CUDA_CHECK(cuda::launch_activation_backward(*layer.elementwise, precision_.element, layer.pre.raw_data(),
                                                 layer.act.raw_data(), layer.grad.raw_data(), layer.grad.raw_data(),
                                                 rows * layer.out, stream));
}

ncclDataType_t nccl_type(DType dtype) {
  return dtype == DType::kF32 ? ncclFloat32 : dtype == DType::kBF16 ? ncclBfloat16 : ncclFloat16;
}

void CudaTrainPlan::enqueue_all_reduce(std::int64_t offset, std::int64_t count, cudaStream_t stream) {
  // Sums the ranks' gradients (each already weighted by 1 / global batch) in place, in the graph.
  const ncclDataType_t type = nccl_type(grad_.dtype());
  const auto comm = static_cast<ncclComm_t>(spec_.nccl_comm);
  void* at = static_cast<char*>(grad_.raw_data()) + offset * static_cast<std::int64_t>(dtype_size(grad_.dtype()));
  const ncclResult_t r = settled(comm, ncclAllReduce(at, at, static_cast<std::size_t>(count), type, ncclSum, comm, stream));
  SN_CHECK(r == ncclSuccess, "rank {}: ncclAllReduce of the gradients: {}", spec_.rank, ncclGetErrorString(r));
}

std::vector<dist::FlatRange> CudaTrainPlan::update_ranges() const {
  if (!per_layer_updates_) return {{0, params_}};
  std::vector<dist::FlatRange> ranges;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const auto [begin, end] = layer_range(l);
    ranges.push_back({begin, end});
  }
  return ranges;
}

void CudaTrainPlan::enqueue_reduce_scatter(const dist::FlatRange& range, cudaStream_t stream) {
  // In place: rank r's shard of the sum lands where its shard of the gradients lies.
  const dist::FlatRange shard = dist::shard_of(range, spec_.rank, spec_.world);
  const auto comm = static_cast<ncclComm_t>(spec_.nccl_comm);
  auto* grad = static_cast<char*>(grad_.raw_data());
  const auto bytes = static_cast<std::int64_t>(dtype_size(grad_.dtype()));
  const ncclResult_t r = settled(comm, ncclReduceScatter(grad + range.begin * bytes, grad + shard.begin * bytes,
                                                         static_cast<std::size_t>(shard.size()),
                                                         nccl_type(grad_.dtype()), ncclSum, comm, stream));
  SN_CHECK(r == ncclSuccess, "rank {}: ncclReduceScatter of the gradients: {}", spec_.rank, ncclGetErrorString(r));
}

void CudaTrainPlan::enqueue_all_gather(const Tensor& buffer, const dist::FlatRange& range, cudaStream_t stream) {
  const dist::FlatRange shard = dist::shard_of(range, spec_.rank, spec_.world);
  const auto comm = static_cast<ncclComm_t>(spec_.nccl_comm);
  auto* data = static_cast<char*>(buffer.raw_data());
  const auto bytes = static_cast<std::int64_t>(dtype_size(buffer.dtype()));
  const ncclResult_t r = settled(comm, ncclAllGather(data + shard.begin * bytes, data + range.begin * bytes,
                                                     static_cast<std::size_t>(shard.size()), nccl_type(buffer.dtype()),
                                                     comm, stream));
  SN_CHECK(r == ncclSuccess, "rank {}: ncclAllGather of the updated parameters: {}", spec_.rank,
           ncclGetErrorString(r));
}

void CudaTrainPlan::enqueue_range_update(const cuda::FlatOptimizerArgs& optimizer, const dist::FlatRange& range,
                                         bool advance, cudaStream_t stream) {
  if (!sharded_) {
    SN_CUDA_CHECK(cuda::launch_flat_optimizer_range(optimizer, range.begin, range.end, advance, stream));
    return;
  }
  const dist::FlatRange shard = dist::shard_of(range, spec_.rank, spec_.world);
  SN_CUDA_CHECK(cuda::launch_flat_optimizer_range(optimizer, shard.begin, shard.end, advance, stream));
  // The products read the compute copy (bf16, tf32's fp32 master otherwise): every rank needs all of it.
  enqueue_all_gather(copy_.defined() ? copy_ : master_, range, stream);
}

template <typename Enqueue>
void CudaTrainPlan::capture(Graph& graph, Enqueue&& enqueue) {
  const cuda::NvtxRange range("capture");
  graph.reset();
  const std::shared_lock capturing(graph_capture_mutex());  // other threads' cudaFree would break it
  SN_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t broken = nullptr;
    static_cast<void>(cudaStreamEndCapture(stream_, &broken));
    if (broken != nullptr) static_cast<void>(cudaGraphDestroy(broken));
    throw;
  }
  SN_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph.graph));
  SN_CUDA_CHECK(cudaGraphInstantiate(&graph.exec, graph.graph, cudaGraphInstantiateFlagUseNodePriority));
  SN_CUDA_CHECK(cudaGraphUpload(graph.exec, stream_));
}

void CudaTrainPlan::load(nn::Sequential& model, optim::Optimizer& optimizer) {
  const cuda::DeviceGuard guard(device_.index);
  const FlatLayout layout = flat_layout();
  copy_weights_to_flat(model, layout, master_);
  if (copy_.defined()) {
    SN_CUDA_CHECK(cuda::launch_convert_from_f32(master_.data<float>(), copy_.raw_data(), precision_.element, params_,
                                                stream_));
  }
  const StepCounters counters = load_optimizer_state(optimizer, layout, state1_, state2_);
  cuda::StepState state;
  state.step = counters.step;
  run_step_ = counters.step;
  state.opt_steps = counters.opt_steps;
  state.loss_scale = precision_.element == ElementType::kF16 ? kInitialLossScale : 1.0f;
  write_state(state);
}

void CudaTrainPlan::write_state(const cuda::StepState& state) {
  SN_CUDA_CHECK(cudaMemcpyAsync(state_.raw_data(), &state, sizeof(state), cudaMemcpyHostToDevice, stream_));
  SN_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `state` may be on the caller's stack frame
}

std::optional<LossScaling> CudaTrainPlan::loss_scaling() {
  if (precision_.element != ElementType::kF16) return std::nullopt;
  const cuda::DeviceGuard guard(device_.index);
  return loss_scaling_of(read_state());
}

void CudaTrainPlan::set_loss_scaling(const LossScaling& scaling) {
  if (precision_.element != ElementType::kF16) TrainPlan::set_loss_scaling(scaling);  // throws
  const cuda::DeviceGuard guard(device_.index);
  write_state(with_loss_scaling(read_state(), scaling, "the compiled CUDA step"));
}

cuda::StepState CudaTrainPlan::read_state() {
  auto* host = reinterpret_cast<cuda::StepState*>(static_cast<cuda::StepMetrics*>(pinned_.host()) + kProgressSlots + 1);
  SN_CUDA_CHECK(cudaMemcpyAsync(host, state_.raw_data(), sizeof(*host), cudaMemcpyDeviceToHost, stream_));
  SN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return *host;
}

void CudaTrainPlan::gather_shards() {
  if (!sharded_ || shards_gathered_) return;
  const cuda::DeviceGuard guard(device_.index);
  // Each rank updated only its shards of the master weights and state: gather them, so what is
  // saved, and a resume on any number of GPUs, has them all. (fp32/tf32 gather the master weights
  // every step already: the products read them.)
  for (const dist::FlatRange& range : update_ranges()) {
    for (const Tensor* buffer : {&master_, &state1_, &state2_}) {
      if (buffer->defined() && !(buffer == &master_ && !copy_.defined())) enqueue_all_gather(*buffer, range, stream_);
    }
  }
  shards_gathered_ = true;
}

void CudaTrainPlan::store(nn::Sequential& model, optim::Optimizer& optimizer) {
  const cuda::DeviceGuard guard(device_.index);
  gather_shards();  // Trainer::fit calls it first and waits, watched for stalls; then this is a no-op
  const FlatLayout layout = flat_layout();
  copy_weights_from_flat(model, layout, master_);
  const cuda::StepState state = read_state();
  store_optimizer_state(optimizer, spec_.optim.type, layout, state1_, state2_, {state.step, state.opt_steps},
                        "the compiled CUDA step");
}

void CudaTrainPlan::start_epoch(std::int64_t epoch) {
  const cuda::DeviceGuard guard(device_.index);
  if (step_graph_.exec == nullptr) capture(step_graph_, [&] { enqueue_step(stream_, batch_); });
  if (tail_rows_ > 0 && tail_graph_.exec == nullptr) capture(tail_graph_, [&] { enqueue_step(stream_, tail_rows_); });
  const BatchLoader& train = *spec_.train;
  if (train.options().shuffle) {
    SN_CUDA_CHECK(cuda::launch_epoch_permutation(train.options().seed, static_cast<std::uint64_t>(epoch), samples_,
                                                 permutation_scratch_.raw_data(), permutation_scratch_.nbytes(),
                                                 order_.data<std::int32_t>(), stream_));
  }  // else order_ holds the identity, set at compile time
  SN_CUDA_CHECK(cudaMemsetAsync(metrics_.raw_data(), 0, metrics_.nbytes(), stream_));
  pending_.clear();
  latest_.reset();
  step_in_epoch_ = 0;
}

void CudaTrainPlan::step() {
  check_lr_steps(spec_.lr_per_step, run_step_, 1);  // (the kernels would take the table's last entry again)
  ++run_step_;
  shards_gathered_ = false;
  const bool last = ++step_in_epoch_ == steps_per_epoch_;
  SN_CUDA_CHECK(cudaGraphLaunch(last && tail_rows_ > 0 ? tail_graph_.exec : step_graph_.exec, stream_));
}

std::optional<ProgressSnapshot> CudaTrainPlan::progress(std::int64_t steps) {
  auto* slots = static_cast<cuda::StepMetrics*>(pinned_.host());
  // Collect what has arrived, oldest first, without waiting.
  while (!pending_.empty()) {
    const auto [slot, at] = pending_.front();
    const cudaError_t ready = cudaEventQuery(slot_events_[static_cast<std::size_t>(slot)].get());
    if (ready == cudaErrorNotReady) break;
    SN_CUDA_CHECK(ready);
    // Data parallel: this rank's share of the loss, scaled to the whole batch (shown, not recorded).
    latest_ = ProgressSnapshot{at, slots[slot].loss_sum * spec_.world};
    pending_.pop_front();
  }
  if (pending_.size() < kProgressSlots) {  // a free slot: ask for the current sums
    const int slot = next_slot_;
    next_slot_ = (next_slot_ + 1) % kProgressSlots;
    SN_CUDA_CHECK(cudaMemcpyAsync(&slots[slot], metrics_.raw_data(), sizeof(cuda::StepMetrics),
                                  cudaMemcpyDeviceToHost, stream_));
    SN_CUDA_CHECK(cudaEventRecord(slot_events_[static_cast<std::size_t>(slot)].get(), stream_));
    pending_.emplace_back(slot, steps);
  }
  return latest_;
}

EpochTotals CudaTrainPlan::finish_epoch() {
  const cuda::NvtxRange range("finish_epoch");
  if (spec_.world > 1) {
    // Every rank's share of the loss and hits, summed (fp16 skips are the same on every rank).
    auto* m = static_cast<cuda::StepMetrics*>(metrics_.raw_data());
    const auto comm = static_cast<ncclComm_t>(spec_.nccl_comm);
    SN_CHECK(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
    const ncclResult_t a = ncclAllReduce(&m->loss_sum, &m->loss_sum, 1, ncclFloat64, ncclSum, comm, stream_);
    const ncclResult_t b = ncclAllReduce(&m->correct, &m->correct, 1, ncclInt64, ncclSum, comm, stream_);
    const ncclResult_t end = settled(comm, ncclGroupEnd());
    SN_CHECK(end == ncclSuccess && (a == ncclSuccess || a == ncclInProgress) && (b == ncclSuccess || b == ncclInProgress),
             "rank {}: all-reduce of the epoch's sums failed: {}", spec_.rank, ncclGetErrorString(end));
  }
  auto* final_slot = static_cast<cuda::StepMetrics*>(pinned_.host()) + kProgressSlots;
  SN_CUDA_CHECK(cudaMemcpyAsync(final_slot, metrics_.raw_data(), sizeof(*final_slot), cudaMemcpyDeviceToHost, stream_));
  SN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  pending_.clear();
  return {final_slot->loss_sum, final_slot->correct, final_slot->skipped};
}

void CudaTrainPlan::enqueue_evaluation(const BatchLoader& loader, cudaStream_t stream) {
  auto* metrics = static_cast<cuda::StepMetrics*>(eval_metrics_.raw_data());
  SN_CUDA_CHECK(cudaMemsetAsync(metrics, 0, sizeof(*metrics), stream));
  const std::int64_t n = loader.samples();
  for (std::int64_t first = 0; first < n; first += eval_batch_) {
    const std::int64_t rows = std::min(eval_batch_, n - first);
    cuda::GatherArgs gather = gather_args(loader, rows, eval_input_, eval_labels_);
    gather.first = first;
    SN_CUDA_CHECK(cuda::launch_gather_batch(gather, stream));
    enqueue_forward(eval_input_.raw_data(), rows, false, stream);
    enqueue_loss(eval_input_.raw_data(), rows, eval_labels_.data<std::int32_t>(), false, metrics, stream);
  }
  auto* host = static_cast<cuda::StepMetrics*>(pinned_.host()) + kProgressSlots;
  SN_CUDA_CHECK(cudaMemcpyAsync(host, metrics, sizeof(*host), cudaMemcpyDeviceToHost, stream));
}

EvalResult CudaTrainPlan::evaluate(const BatchLoader& loader) {
  const cuda::NvtxRange range("evaluate");
  const cuda::DeviceGuard guard(device_.index);
  SN_CHECK(loader.features() == spec_.mlp.inputs, "evaluation data has {} features, the model takes {}",
           loader.features(), spec_.mlp.inputs);
  if (eval_loader_ != &loader) {
    capture(eval_graph_, [&] { enqueue_evaluation(loader, stream_); });
    eval_loader_ = &loader;
  }
  SN_CUDA_CHECK(cudaGraphLaunch(eval_graph_.exec, stream_));
  SN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const auto* host = static_cast<const cuda::StepMetrics*>(pinned_.host()) + kProgressSlots;
  EvalResult result;
  result.samples = loader.samples();
  result.correct = host->correct;
  result.loss = host->loss_sum / static_cast<double>(result.samples);
  result.accuracy = static_cast<double>(host->correct) / static_cast<double>(result.samples);
  return result;
}

std::string CudaTrainPlan::describe() const {
  const std::string parallel =
      spec_.world > 1
          ? fmt::format(", data parallel over {} GPUs ({} rows each, {})", spec_.world, batch_,
                        sharded_ ? "gradients reduce-scattered by NCCL in the graph, each rank updating its shard of "
                                   "the master weights and state, the weights all-gathered: device.update = sharded"
                                 : "gradients all-reduced by NCCL in the graph, the update replicated")
          : "";
  const bool elementwise = layers_.front().elementwise.has_value();
  return fmt::format("compiled step: one CUDA graph per step, {} matrix products{}, cuBLASLt epilogues ({}, {}), "
                     "fused softmax cross-entropy, one {} update over {} flat parameters",
                     spec_.precision, precision_.element == ElementType::kF32 ? "" : " with fp32 master weights",
                     elementwise ? fmt::format("bias; {} and its gradient by elementwise kernels",
                                               ops::activation_name(spec_.mlp.activation))
                                 : relu_by_epilogue_ ? "bias+ReLU with mask, ReLU gradient"
                                                     : "bias+ReLU; ReLU's gradient by an elementwise kernel",
                     bias_grad_fused_ ? "bias gradient" : "bias gradient by a column-sum kernel", spec_.optim.type,
                     params_) +
         parallel;
}

}  // namespace

std::unique_ptr<TrainPlan> make_cuda_train_plan(const TrainPlanSpec& spec, Device device) {
  return std::make_unique<CudaTrainPlan>(spec, device);
}

}  // namespace sprintnet::train
