// The compiled training step on the CPU (train/train_plan.h; docs/ARCHITECTURE.md).
//
// Compile time (the constructor, and the first batch of each new size) allocates every buffer
// and plans every oneDNN product; a step then allocates nothing:
//
//   gather    uint8 → fp32 (and the bf16 copy), the epoch's order
//   forward   one oneDNN product per layer; bias and ReLU are the product's post-ops, so they are
//             applied while the output is in cache (other activations: a loop right after it)
//   loss      softmax cross-entropy (or MSE) and its gradient in one pass, the correct count
//   backward  per layer from the top, a block of W's rows at a time (fp32): that block's part of
//   + update  dX = dZ W (k split by blocks, accumulated; only while dX stays in cache, else dX
//             whole first), its rows of dW = dZ^T X (K = batch), then the eager optimizer's own
//             loop on the block while the block's weights and gradient are still in cache: the
//             weight gradient never goes to memory and the weights come from memory once. Then
//             the activation's gradient; the bias gradient (column sums, fixed order) and its
//             update before the blocks. bf16 keeps each layer whole (one block; then the bf16
//             copy of the weights): oneDNN multiplies strided bf16 sub-blocks with its generic
//             gemm:jit kernel instead of the AMX/AVX512-BF16 brgemm ones.
//
// Every product and loop runs on the one OpenMP team of the process (oneDNN, OpenBLAS and our
// loops share it; its threads persist between regions). The elementwise and loss ops are the
// eager CPU ops themselves, on views of the plan's buffers: only the products differ from the
// eager step (oneDNN instead of OpenBLAS), which tests/train/cpu_compiled_step_test.cpp bounds.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "sprintnet/core/random.h"
#include "sprintnet/io/progress_format.h"
#include "sprintnet/ops/cpu/bf16_copy.h"
#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dnnl_matmul.h"
#include "sprintnet/ops/cpu/jit_signal_shield.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/train/flat_parameters.h"
#include "sprintnet/train/train_plan.h"

namespace sprintnet::train {
namespace {

using cpu::DnnlMatmul;
using cpu::MatmulInput;

constexpr std::int64_t kAlignment = 16;  // elements: every parameter starts on a 64-byte line

// A bf16 tensor's elements as their bit patterns.
std::uint16_t* bf16_data(const Tensor& t) { return static_cast<std::uint16_t*>(t.raw_data()); }

// One layer's buffers for batches of one size.
struct LayerBuffers {
  Tensor z;     // [rows, out] fp32 pre-activation, only when the activation is not a post-op
  Tensor y;     // [rows, out] fp32 output (after the activation; the logits for the last layer)
  Tensor y16;   // bf16 copy of y (hidden layers, bf16)
  Tensor dz;    // [rows, out] fp32 gradient w.r.t. the pre-activation (training)
  Tensor dz16;  // bf16 copy of dz
  Tensor dx;    // [rows, in] fp32 input gradient dZ W, before the previous activation's gradient (l > 0)
  // The backward's products a block of W's rows at a time (the last block may have fewer rows: the
  // _tail products): dW's rows, and dX's part (k = the block's rows; the blocks after the first add).
  std::int64_t grad_block_rows = 0;
  bool split_input_grad = false;  // dX block by block too (else whole, before the blocks)
  std::optional<DnnlMatmul> forward, input_grad, input_grad_add, input_grad_add_tail, weight_grad, weight_grad_tail;
};

// Everything a batch of `rows` samples needs.
struct Workspace {
  std::int64_t rows = 0;
  bool training = false;
  Tensor x, x16, labels;  // [rows, in] fp32 (+ bf16 copy), [rows] int32
  std::vector<LayerBuffers> layers;
};

class CpuTrainPlan final : public TrainPlan {
 public:
  explicit CpuTrainPlan(const TrainPlanSpec& spec);
  void load(nn::Sequential& model, optim::Optimizer& optimizer) override;
  void store(nn::Sequential& model, optim::Optimizer& optimizer) override;
  void start_epoch(std::int64_t epoch) override;
  void step() override;
  std::optional<ProgressSnapshot> progress(std::int64_t steps) override;
  EpochTotals finish_epoch() override;
  EvalResult evaluate(const BatchLoader& loader) override;
  std::string describe() const override;

 private:
  bool bf16() const { return spec_.precision == "bf16"; }
  // A hidden layer whose activation the product applies as a post-op (or needs none).
  bool fused_activation() const {
    return spec_.mlp.activation == Activation::kReLU || spec_.mlp.activation == Activation::kIdentity;
  }
  Workspace& workspace(std::int64_t rows, bool training);
  Workspace make_workspace(std::int64_t rows, bool training) const;
  const void* weights(const FlatLayer& layer) const;
  const float* bias(const FlatLayer& layer) const;
  // Rows [begin, begin + ws.rows) of `order` from `loader`'s data set into ws.x / ws.labels.
  void gather(const BatchLoader& loader, const Tensor& order, std::int64_t begin, Workspace& ws);
  void forward(Workspace& ws);
  // The loss of ws's logits into loss_sum_/correct_ (training: the mean and its gradient).
  void loss(Workspace& ws, const Tensor& loss_sum, const Tensor& correct);
  // Backward and the optimizer's update, layer by layer (see the top of this file).
  void backward_and_update(Workspace& ws);
  // The optimizer's loop over parameters [offset, offset + grad.numel()) of the flat buffers.
  void update_range(std::int64_t offset, const Tensor& grad, const SgdHyper& sgd, const AdamHyper& adam);

  TrainPlanSpec spec_;
  FlatLayout layout_;
  std::int64_t batch_ = 0, steps_per_epoch_ = 0, samples_ = 0;
  Tensor master_, state1_, state2_;         // flat fp32
  Tensor grad_block_, bias_grad_;           // fp32 scratch: a block of a weight gradient, a bias gradient
  std::vector<std::int64_t> grad_block_rows_;  // per layer, for the thread count at construction
  Tensor copy16_;                           // flat bf16 copy of master_ (bf16)
  Tensor order_;                            // int32 [N]: this epoch's sample order
  Tensor identity_;                         // int32 [n]: evaluation order
  std::map<std::pair<std::int64_t, bool>, std::unique_ptr<Workspace>> workspaces_;
  StepCounters counters_;
  std::int64_t epoch_step_ = 0;
  Tensor loss_sum_, correct_;  // fp64 [1], int32 [1]: the epoch's sums
};

CpuTrainPlan::CpuTrainPlan(const TrainPlanSpec& spec) : spec_(spec) {
  check_train_plan_spec(spec);
  SN_CHECK(spec.train != nullptr, "the compiled CPU step needs a training data loader");
  SN_CHECK(spec.precision == "fp32" || spec.precision == "bf16",
           "device.precision = \"{}\": the compiled CPU step computes in fp32 or bf16", spec.precision);
  SN_CHECK(!bf16() || cpu::cpu_has_native_bf16(),
           "device.precision = \"bf16\" needs a CPU with AVX512-BF16 or AMX; this one has {} (use \"fp32\")",
           cpu::dnnl_cpu_isa());
  SN_CHECK(spec.loss == "cross_entropy" || spec.loss == "mse", "loss.type = \"{}\": the compiled CPU step runs "
           "cross_entropy or mse", spec.loss);
  const BatchLoader& train = *spec.train;
  SN_CHECK(train.device().is_cpu(), "the compiled CPU step needs its data on the CPU, not {}", train.device().str());
  SN_CHECK(train.features() == spec.mlp.inputs, "the data has {} features, the model takes {}", train.features(),
           spec.mlp.inputs);
  samples_ = train.samples();
  // No batch holds more rows than the data set (as BatchLoader): buffers sized by a batch_size beyond it would
  // allocate for rows that never come.
  batch_ = std::min(train.options().batch_size, samples_);
  steps_per_epoch_ = train.batches_per_epoch();
  layout_ = flat_layout(spec.mlp, kAlignment);
  master_ = Tensor::zeros({layout_.size}, DType::kF32);
  std::int64_t block = 0, widest = 0;
  for (const FlatLayer& layer : layout_.layers) {
    grad_block_rows_.push_back(bf16() ? layer.out : cpu_grad_block_rows(layer.in, layer.out, cpu_threads()));
    block = std::max(block, grad_block_rows_.back() * layer.in);
    widest = std::max(widest, layer.out);
  }
  grad_block_ = Tensor::zeros({block}, DType::kF32);
  bias_grad_ = Tensor::zeros({widest}, DType::kF32);
  const OptimConfig& opt = spec.optim;
  if (opt.type != "sgd" || opt.momentum != 0.0) state1_ = Tensor::zeros({layout_.size}, DType::kF32);
  if (opt.type != "sgd") state2_ = Tensor::zeros({layout_.size}, DType::kF32);
  if (bf16()) copy16_ = Tensor::zeros({layout_.size}, DType::kBF16);
  loss_sum_ = Tensor::zeros({1}, DType::kF64);
  correct_ = Tensor::zeros({1}, DType::kI32);
  std::vector<std::int32_t> identity(static_cast<std::size_t>(samples_));
  std::iota(identity.begin(), identity.end(), 0);
  order_ = Tensor::from_vector(identity, {samples_});
  // The full training batch and, if the epoch ends with one, the partial batch: planned now.
  workspace(batch_, true);
  if (const std::int64_t tail = samples_ % batch_; tail != 0 && !train.options().drop_last) workspace(tail, true);
}

Workspace CpuTrainPlan::make_workspace(std::int64_t rows, bool training) const {
  const MatmulInput input = bf16() ? MatmulInput::kBF16 : MatmulInput::kF32;
  Workspace ws;
  ws.rows = rows;
  ws.training = training;
  ws.x = Tensor::empty({rows, spec_.mlp.inputs}, DType::kF32);
  if (bf16()) ws.x16 = Tensor::empty({rows, spec_.mlp.inputs}, DType::kBF16);
  ws.labels = Tensor::empty({rows}, DType::kI32);
  for (std::size_t l = 0; l < layout_.layers.size(); ++l) {
    const FlatLayer& layer = layout_.layers[l];
    const bool last = l + 1 == layout_.layers.size();
    const bool fused = last || fused_activation();
    LayerBuffers b;
    b.y = Tensor::empty({rows, layer.out}, DType::kF32);
    if (!fused) b.z = Tensor::empty({rows, layer.out}, DType::kF32);
    if (bf16() && !last) b.y16 = Tensor::empty({rows, layer.out}, DType::kBF16);
    const bool relu = !last && spec_.mlp.activation == Activation::kReLU;
    b.forward.emplace(cpu::forward_product(rows, layer.in, layer.out), input, layer.bias_offset >= 0, relu);
    if (training) {
      b.dz = Tensor::empty({rows, layer.out}, DType::kF32);
      if (bf16()) b.dz16 = Tensor::empty({rows, layer.out}, DType::kBF16);
      b.grad_block_rows = grad_block_rows_[l];
      const std::int64_t tail = layer.out % b.grad_block_rows;
      cpu::MatmulShape block = cpu::weight_grad_product(rows, layer.in, layer.out);
      block.m = b.grad_block_rows;  // rows [r, r + m) of dW: A starts at column r of dZ, same strides
      b.weight_grad.emplace(block, input, false, false);
      if (tail != 0) {
        block.m = tail;
        b.weight_grad_tail.emplace(block, input, false, false);
      }
      if (l > 0) {  // split: dX += dZ[:, r, r + k) W[r, r + k), A from column r of dZ, B from row r of W
        b.dx = Tensor::empty({rows, layer.in}, DType::kF32);
        b.split_input_grad = layer.out > b.grad_block_rows && cpu_split_input_grad(rows, layer.in, cpu_threads());
        cpu::MatmulShape part = cpu::input_grad_product(rows, layer.in, layer.out);
        if (b.split_input_grad) part.k = b.grad_block_rows;
        b.input_grad.emplace(part, input, false, false);
        if (b.split_input_grad) {
          b.input_grad_add.emplace(part, input, false, false, true);
          if (tail != 0) {
            part.k = tail;
            b.input_grad_add_tail.emplace(part, input, false, false, true);
          }
        }
      }
    }
    ws.layers.push_back(std::move(b));
  }
  return ws;
}

Workspace& CpuTrainPlan::workspace(std::int64_t rows, bool training) {
  auto& slot = workspaces_[{rows, training}];
  if (!slot) slot = std::make_unique<Workspace>(make_workspace(rows, training));
  return *slot;
}

const void* CpuTrainPlan::weights(const FlatLayer& layer) const {
  if (bf16()) return bf16_data(copy16_) + layer.weight_offset;
  return master_.data<float>() + layer.weight_offset;
}

const float* CpuTrainPlan::bias(const FlatLayer& layer) const {
  return layer.bias_offset >= 0 ? master_.data<float>() + layer.bias_offset : nullptr;
}

void CpuTrainPlan::load(nn::Sequential& model, optim::Optimizer& optimizer) {
  copy_weights_to_flat(model, layout_, master_);
  counters_ = load_optimizer_state(optimizer, layout_, state1_, state2_);
  if (bf16()) cpu::copy_to_bf16(master_.data<float>(), bf16_data(copy16_), layout_.size);
}

void CpuTrainPlan::store(nn::Sequential& model, optim::Optimizer& optimizer) {
  copy_weights_from_flat(model, layout_, master_);
  store_optimizer_state(optimizer, spec_.optim.type, layout_, state1_, state2_, counters_, "the compiled CPU step");
}

void CpuTrainPlan::start_epoch(std::int64_t epoch) {
  const BatchLoader& train = *spec_.train;
  if (train.options().shuffle) {
    const auto order = epoch_permutation(train.options().seed, static_cast<std::uint64_t>(epoch), samples_);
    std::copy(order.begin(), order.end(), order_.data<std::int32_t>());
  }
  ops::fill(loss_sum_, 0.0);
  ops::fill(correct_, 0.0);
  epoch_step_ = 0;
}

void CpuTrainPlan::gather(const BatchLoader& loader, const Tensor& order, std::int64_t begin, Workspace& ws) {
  const Tensor indices = order.slice_rows(begin, begin + ws.rows);
  const Normalization& norm = loader.normalization();
  ops::gather_rows_u8(loader.images(), indices, ws.x, norm.scale, norm.shift);
  ops::gather_labels(loader.labels(), indices, ws.labels);
  if (bf16()) cpu::copy_to_bf16(ws.x.data<float>(), bf16_data(ws.x16), ws.x.numel());
}

void CpuTrainPlan::forward(Workspace& ws) {
  const void* input = bf16() ? ws.x16.raw_data() : ws.x.raw_data();
  for (std::size_t l = 0; l < layout_.layers.size(); ++l) {
    const FlatLayer& layer = layout_.layers[l];
    LayerBuffers& b = ws.layers[l];
    const bool last = l + 1 == layout_.layers.size();
    if (b.z.defined()) {  // the activation follows the product while its output is in cache
      b.forward->run(input, weights(layer), bias(layer), b.z.data<float>());
      ops::activation_forward(spec_.mlp.activation, b.z, b.y);
    } else {
      b.forward->run(input, weights(layer), bias(layer), b.y.data<float>());
    }
    if (bf16() && !last) cpu::copy_to_bf16(b.y.data<float>(), bf16_data(b.y16), b.y.numel());
    input = bf16() && !last ? b.y16.raw_data() : b.y.raw_data();
  }
}

void CpuTrainPlan::loss(Workspace& ws, const Tensor& loss_sum, const Tensor& correct) {
  LayerBuffers& out = ws.layers.back();
  const double rows = static_cast<double>(ws.rows), classes = static_cast<double>(out.y.size(1));
  const Tensor* grad = ws.training ? &out.dz : nullptr;
  if (spec_.loss == "mse") {
    // Training: the mean over all elements, as nn::MSELoss; evaluation: per sample, as evaluate().
    const double scale = ws.training ? 1.0 / (rows * classes) : 1.0 / classes;
    ops::mse_one_hot(out.y, ws.labels, loss_sum, scale, grad, scale);
  } else {
    const double scale = ws.training ? 1.0 / rows : 1.0;
    ops::cross_entropy(out.y, ws.labels, ws.training ? spec_.label_smoothing : 0.0, loss_sum, scale, grad, scale);
  }
  ops::count_correct(out.y, ws.labels, correct);
  if (ws.training && bf16()) cpu::copy_to_bf16(out.dz.data<float>(), bf16_data(out.dz16), out.dz.numel());
}

void CpuTrainPlan::backward_and_update(Workspace& ws) {
  const double lr = spec_.lr_per_step[static_cast<std::size_t>(counters_.step)];  // step() checked it is there
  const OptimConfig& opt = spec_.optim;
  const SgdHyper sgd{lr, opt.momentum, opt.dampening, opt.weight_decay, opt.nesterov, counters_.opt_steps == 0};
  const AdamHyper adam{lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, opt.type == "adamw",
                       counters_.opt_steps + 1};
  const std::size_t element = bf16() ? 2 : 4;  // bytes of an element of dZ and of the weights multiplied
  for (std::size_t l = layout_.layers.size(); l-- > 0;) {
    const FlatLayer& layer = layout_.layers[l];
    LayerBuffers& b = ws.layers[l];
    const char* dz = static_cast<const char*>(bf16() ? b.dz16.raw_data() : b.dz.raw_data());
    const char* w = static_cast<const char*>(weights(layer));
    const void* input = l == 0 ? (bf16() ? ws.x16.raw_data() : ws.x.raw_data())
                               : (bf16() ? ws.layers[l - 1].y16.raw_data() : ws.layers[l - 1].y.raw_data());
    if (layer.bias_offset >= 0) {
      const Tensor grad = bias_grad_.slice_rows(0, layer.out);
      ops::sum_rows(b.dz, grad);
      update_range(layer.bias_offset, grad, sgd, adam);
    }
    if (l > 0 && !b.split_input_grad) b.input_grad->run(dz, w, nullptr, b.dx.data<float>());  // before any update
    for (std::int64_t row = 0; row < layer.out; row += b.grad_block_rows) {
      const std::int64_t rows = std::min(b.grad_block_rows, layer.out - row);
      const bool whole = rows == b.grad_block_rows;
      const char* dz_block = dz + static_cast<std::size_t>(row) * element;
      if (b.split_input_grad) {  // the block's rows of W before their update: the first block writes dX, the rest add
        const DnnlMatmul& part = row == 0 ? *b.input_grad : whole ? *b.input_grad_add : *b.input_grad_add_tail;
        part.run(dz_block, w + static_cast<std::size_t>(row * layer.in) * element, nullptr, b.dx.data<float>());
      }
      (whole ? *b.weight_grad : *b.weight_grad_tail).run(dz_block, input, nullptr, grad_block_.data<float>());
      update_range(layer.weight_offset + row * layer.in, grad_block_.slice_rows(0, rows * layer.in), sgd, adam);
    }
    if (l > 0) {
      LayerBuffers& prev = ws.layers[l - 1];
      // ReLU's gradient from its output: y > 0 exactly where z > 0.
      ops::activation_backward(spec_.mlp.activation, prev.z.defined() ? prev.z : prev.y, prev.y, b.dx, prev.dz);
      if (bf16()) cpu::copy_to_bf16(prev.dz.data<float>(), bf16_data(prev.dz16), prev.dz.numel());
    }
  }
  ++counters_.opt_steps;
  ++counters_.step;
}

void CpuTrainPlan::update_range(std::int64_t offset, const Tensor& grad, const SgdHyper& sgd,
                                const AdamHyper& adam) {
  // The eager optimizer's own loop over [begin, end) of the flat buffers.
  const auto apply = [&](std::int64_t begin, std::int64_t end) {
    const auto part = [&](const Tensor& t) { return t.defined() ? t.slice_rows(begin, end) : Tensor(); };
    const Tensor p = part(master_), g = grad.slice_rows(begin - offset, end - offset), s1 = part(state1_),
                 s2 = part(state2_);
    if (spec_.optim.type == "sgd") {
      ops::sgd_step(p, g, s1.defined() ? &s1 : nullptr, sgd);
    } else {
      ops::adam_step(p, g, s1, s2, adam);
    }
  };
  const std::int64_t end = offset + grad.numel();
  if (!bf16()) {
    apply(offset, end);  // one parallel loop
    return;
  }
  // Chunk by chunk, each chunk's bf16 copy written while the chunk is still in cache (bf16 updates a
  // whole layer at a time: a second pass would read the weights from memory again).
  constexpr std::int64_t kChunk = 8192;
  const std::int64_t chunks = (end - offset + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = offset + c * kChunk, stop = std::min(end, begin + kChunk);
    apply(begin, stop);
    cpu::copy_to_bf16_serial(master_.data<float>() + begin, bf16_data(copy16_) + begin, stop - begin);
  }
}

void CpuTrainPlan::step() {
  SN_CHECK(epoch_step_ < steps_per_epoch_, "step {} of an epoch of {} steps", epoch_step_ + 1, steps_per_epoch_);
  check_lr_steps(spec_.lr_per_step, counters_.step, 1);
  const cpu::JitSignalShield shield;  // for the whole step: its products' shields are then free
  const std::int64_t begin = epoch_step_ * batch_;
  Workspace& ws = workspace(std::min(batch_, samples_ - begin), true);
  gather(*spec_.train, order_, begin, ws);
  forward(ws);
  loss(ws, loss_sum_, correct_);
  backward_and_update(ws);
  ++epoch_step_;
}

std::optional<ProgressSnapshot> CpuTrainPlan::progress(std::int64_t steps) {
  return ProgressSnapshot{steps, loss_sum_.data<double>()[0]};  // the CPU step has finished when step() returns
}

EpochTotals CpuTrainPlan::finish_epoch() {
  EpochTotals totals;
  totals.loss_sum = loss_sum_.data<double>()[0];
  totals.correct = correct_.data<std::int32_t>()[0];
  return totals;
}

EvalResult CpuTrainPlan::evaluate(const BatchLoader& loader) {
  SN_CHECK(loader.features() == spec_.mlp.inputs, "evaluation data has {} features, the model takes {}",
           loader.features(), spec_.mlp.inputs);
  SN_CHECK(loader.device().is_cpu(), "the compiled CPU step evaluates data on the CPU, not {}", loader.device().str());
  const cpu::JitSignalShield shield;
  const std::int64_t n = loader.samples(), batch = loader.options().batch_size;
  if (identity_.numel() < n) {
    std::vector<std::int32_t> identity(static_cast<std::size_t>(n));
    std::iota(identity.begin(), identity.end(), 0);
    identity_ = Tensor::from_vector(identity, {n});
  }
  const Tensor loss_sum = Tensor::zeros({1}, DType::kF64), correct = Tensor::zeros({1}, DType::kI32);
  for (std::int64_t begin = 0; begin < n; begin += batch) {
    Workspace& ws = workspace(std::min(batch, n - begin), false);
    gather(loader, identity_, begin, ws);
    forward(ws);
    loss(ws, loss_sum, correct);
  }
  EvalResult result;
  result.samples = n;
  result.correct = correct.data<std::int32_t>()[0];
  result.loss = loss_sum.data<double>()[0] / static_cast<double>(n);
  result.accuracy = static_cast<double>(result.correct) / static_cast<double>(n);
  return result;
}

std::string CpuTrainPlan::describe() const {
  // What the products' post-ops apply: the bias where the layers have one, ReLU where a hidden layer has it.
  std::vector<std::string> fused;
  if (spec_.mlp.bias) fused.emplace_back("the bias");
  if (!spec_.mlp.hidden.empty() && spec_.mlp.activation == Activation::kReLU) fused.emplace_back("ReLU");
  const std::string post_ops = fused.empty() ? "" : fmt::format(" with {} fused", fmt::join(fused, " and "));
  return fmt::format("compiled CPU step: {}{}, {} products ({}){}, {} and its gradient in one "
                     "pass, the {} update applied {} over {} flat parameters, {}",
                     spec_.precision, bf16() ? " (fp32 master weights)" : "", cpu::dnnl_library_version(),
                     cpu::dnnl_cpu_isa(), post_ops, spec_.loss == "mse" ? "MSE" : "softmax cross-entropy", spec_.optim.type,
                     bf16() ? "layer by layer" : "block by block with the weight gradient", layout_.size,
                     counted(cpu_threads(), "thread"));
}

}  // namespace

namespace {

// What a thread's L2 holds of the backward's working set (the H100 machines' hosts and the 2-core
// Xeon have 2 MiB a core; 256 KB and 1 MB a thread measured slower there, docs/PERFORMANCE.md).
// Kernel lab: SPRINTNET_CPU_BLOCK_KB sets it, so block sizes are timed side by side in one binary
// (a size larger than every layer's weight gradient takes each layer whole, dX before the blocks).
// Read whenever a plan is made, not cached: plans are made once a run.
std::int64_t cache_bytes_per_thread() {
  const char* env = std::getenv("SPRINTNET_CPU_BLOCK_KB");
  // Capped at 1 TB a thread (any layer whole): a larger value overflowed the products below.
  const std::int64_t kb = env != nullptr ? std::min<long long>(std::atoll(env), std::int64_t{1} << 30) : 0;
  return kb > 0 ? kb * 1024 : std::int64_t{512} * 1024;
}

}  // namespace

// The block stays in the cores' L2 caches between the product that writes it and the update that reads it.
std::int64_t cpu_grad_block_rows(std::int64_t in, std::int64_t out, int threads) {
  const std::int64_t most = std::max<std::int64_t>(1, cache_bytes_per_thread() * std::max(threads, 1) / (in * 4));
  const std::int64_t blocks = (out + most - 1) / most;
  return (out + blocks - 1) / blocks;
}

// Each block after the first re-reads and rewrites dX [rows, in]: worth it only while dX stays in cache.
bool cpu_split_input_grad(std::int64_t rows, std::int64_t in, int threads) {
  return rows * in * 4 <= cache_bytes_per_thread() * std::max(threads, 1);
}

std::unique_ptr<TrainPlan> make_cpu_train_plan(const TrainPlanSpec& spec) {
  return std::make_unique<CpuTrainPlan>(spec);
}

}  // namespace sprintnet::train
