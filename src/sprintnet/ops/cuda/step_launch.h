#pragma once
// Launchers of the kernels of the compiled training step (train/cuda_train_plan.cpp):
// the pieces of a step that cuBLASLt does not do, written so that the whole step
// can be captured once in a CUDA graph and replayed. Nothing here takes a value
// that changes from step to step as an argument: the step number, the learning
// rate and the loss scale are read from device memory (StepState), which the
// kernels themselves advance. Like launch.h, free of sprintnet's core headers
// because nvcc compiles the .cu files.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "sprintnet/ops/cuda/launch.h"  // ActivationKind

namespace sprintnet::cuda {

// Element types of activations and compute copies of the weights.
enum class ElementType : int { kF32, kBF16, kF16 };

inline std::size_t element_bytes(ElementType t) { return t == ElementType::kF32 ? 4 : 2; }

// The run's position, in device memory; written only by the kernels below.
struct StepState {
  std::int64_t step = 0;       // training steps taken: selects the batch and the learning rate
  std::int64_t opt_steps = 0;  // optimizer updates applied (fewer than step when fp16 skipped some)
  std::uint32_t blocks_done = 0;  // the optimizer's completion counter (the last block advances the state)
  std::int32_t found_inf = 0;     // fp16: a gradient of this step is not finite, the update is skipped
  float loss_scale = 1.0f;        // fp16 dynamic loss scale (1 otherwise)
  std::int32_t good_steps = 0;    // fp16: finite steps since the scale last changed
};

// Loss and accuracy summed on the device between reads.
struct StepMetrics {
  double loss_sum = 0.0;     // sum of per-step mean losses (training) or of per-sample losses (evaluation)
  std::int64_t correct = 0;  // samples whose first maximum logit is at the label
  std::int64_t skipped = 0;  // fp16 updates skipped for a non-finite gradient
};

// activation.cu: y = f(x) (y may alias x) and dx = f'(x, y) * dy (dx may alias dy) over `count`
// elements of `type`, computed in fp32: the eager ops (fp32) and the compiled step's hidden layers
// whose activation no cuBLASLt epilogue applies (GELU as our erf form, tanh, sigmoid, SiLU).
cudaError_t launch_activation_forward(ActivationKind act, ElementType type, const void* x, void* y,
                                      std::int64_t count, cudaStream_t stream);
cudaError_t launch_activation_backward(ActivationKind act, ElementType type, const void* x, const void* y,
                                       const void* dy, void* dx, std::int64_t count, cudaStream_t stream);

// batch_gather.cu: rows of a uint8 data set to the compute type, normalised: dst[i, :] = x * scale + shift
// with x the row order[first + i] (identity when order is null), and their labels. With `state` set,
// first = (state->step % steps_per_epoch) * rows: the batch of the current step. The eager ops'
// gathers by index (gather_rows_u8, gather_labels) are the same launch with `error` set.
struct GatherArgs {
  const std::uint8_t* images;
  const std::int32_t* labels;
  std::int64_t features;
  const std::int32_t* order;  // may be null
  const StepState* state;     // may be null: then `first` is used as is
  std::int64_t steps_per_epoch;
  std::int64_t first;  // with `state`: this rank's first row within the step's batch
  std::int64_t rows;
  float scale, shift;
  void* dst;
  ElementType dst_type;
  std::int32_t* dst_labels;
  std::int64_t stride = 0;  // with `state`: rows between consecutive steps' batches (0: rows; data parallel: the global batch)
  // The eager gathers (order = the caller's indices): with `error` set, each index is checked
  // against `samples` (the data set's rows or labels); one out of range is clamped for the read and
  // recorded (device_error.h). dst or dst_labels may be null: only the other is gathered.
  DeviceError* error = nullptr;
  std::int64_t samples = 0;
};
cudaError_t launch_gather_batch(const GatherArgs& args, cudaStream_t stream);

// fused_cross_entropy.cu: softmax cross-entropy of a batch in one block: per-row loss
// (label smoothing as PyTorch), metrics->loss_sum += loss_weight * sum of row losses,
// metrics->correct += rows whose argmax is the label, and, when dlogits is set,
// dlogits = grad_scale * loss_scale * (softmax - target) in the logits' type (the
// scale from state when given, else 1). Deterministic: a fixed reduction order.
struct CrossEntropyArgs {
  const void* logits;
  ElementType type;
  const std::int32_t* labels;
  std::int64_t rows, classes;
  float smoothing;
  void* dlogits;  // may be null (evaluation)
  float grad_scale;
  const StepState* state;  // may be null
  StepMetrics* metrics;
  double loss_weight;
  // loss.type = "mse" instead: a row's loss is its mean squared error against the one-hot target
  // (PyTorch's MSELoss over the batch is the mean of these), dlogits = grad_scale * loss_scale *
  // 2 (logit - target) / classes; smoothing is not used.
  bool squared_error = false;
};
cudaError_t launch_fused_cross_entropy(const CrossEntropyArgs& args, cudaStream_t stream);

// flat_optimizer.cu: one update of every parameter, stored back to back in flat fp32
// buffers: lr = lr_table[state->step]; master (fp32) updated with its gradient and state
// buffers as torch.optim does; `copy` (the compute type, may be null) refreshed from the new
// master. fp16 (check_finite): a non-finite gradient anywhere skips the update and halves
// the loss scale; otherwise gradients are unscaled first. The last block to finish advances
// state (step, opt_steps, scale) so the next replay sees the next step.
enum class FlatOptimizerKind : int { kSgd, kAdam, kAdamW };
struct FlatOptimizerArgs {
  FlatOptimizerKind kind = FlatOptimizerKind::kSgd;
  float* master = nullptr;
  const void* grad = nullptr;  // in grad_type: the products' output type (fp32, or bf16/fp16 as torch.autocast)
  ElementType grad_type = ElementType::kF32;
  float* state1 = nullptr;  // SGD momentum buffer (null without momentum) / Adam exp_avg
  float* state2 = nullptr;  // Adam exp_avg_sq
  void* copy = nullptr;
  ElementType copy_type = ElementType::kF32;
  std::int64_t count = 0;  // a multiple of 4; the buffers are 16-byte aligned
  const double* lr_table = nullptr;  // per step, as optim::LrSchedule gives it (double, like the eager path)
  std::int64_t lr_table_size = 0;    // steps past its end use its last entry
  StepState* state = nullptr;
  float momentum = 0.0f, keep = 1.0f, weight_decay = 0.0f;  // SGD (keep = 1 - dampening); weight_decay also Adam's
  bool nesterov = false;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  double beta1_d = 0.9, beta2_d = 0.999, weight_decay_d = 0.0;  // the scalars the eager path derives in double
  bool check_finite = false;   // fp16 dynamic loss scaling
  StepMetrics* metrics = nullptr;  // counts skipped updates (may be null)
};
cudaError_t launch_flat_optimizer(const FlatOptimizerArgs& args, cudaStream_t stream);
// The same update over [begin, end) of the buffers only (multiples of 4), so each layer's update
// can start as soon as its gradient is ready; only the launch with advance = true (the last of
// a step) advances the state. launch_flat_optimizer() is the whole range with advance = true.
cudaError_t launch_flat_optimizer_range(const FlatOptimizerArgs& args, std::int64_t begin, std::int64_t end,
                                        bool advance, cudaStream_t stream);
// fp16: state->found_inf |= any gradient is not finite (run before launch_flat_optimizer).
cudaError_t launch_check_finite(const void* grad, ElementType type, std::int64_t count, StepState* state,
                                cudaStream_t stream);

// skinny_layer.cu: the output layer when it has few outputs (classes <= kSkinnyMaxOutputs). cuBLAS's
// kernels for a 10-column product are latency-bound and its epilogues run as separate kernels;
// these fuse the product with what surrounds it: forward + softmax cross-entropy (+ gradient,
// loss and accuracy), weight + bias gradient, and the input gradient with the ReLU gradient.
inline constexpr int kSkinnyMaxOutputs = 32;
struct SkinnyForwardArgs {
  const void* x;  // [rows, in], `type`
  const void* w;  // [classes, in], `type`
  const void* bias;  // [classes], `type`, may be null
  ElementType type;
  std::int64_t rows, in;
  int classes;
  const std::int32_t* labels;
  float smoothing;
  float* dlogits;  // [rows, classes] fp32, may be null (evaluation)
  float grad_scale;
  const StepState* state;  // loss scale; may be null
  double* block_loss;      // scratch: one per row
  long long* block_correct;
  std::uint32_t* blocks_done;  // scratch counter (zero between launches)
  // Where the rows' sums go; null leaves them in the scratch for the weight-gradient kernel to add
  // (RowSums), off the critical path of the step.
  StepMetrics* metrics;
  double loss_weight;
  // With `gathered`, x and labels are not used: the rows are gathered from `source` (the step's
  // batch of the uint8 data set, normalised and rounded to `type` exactly as launch_gather_batch
  // would), which saves the gather launch when the output layer is the only layer.
  bool gathered = false;
  GatherArgs source{};
};
// Blocks (and so scratch entries) a forward over `rows` rows uses.
std::int64_t skinny_forward_blocks(std::int64_t rows);
cudaError_t launch_skinny_forward_cross_entropy(const SkinnyForwardArgs& args, cudaStream_t stream);
// dw[c, f] = sum_r dlogits[r, c] x[r, f], dbias[c] = sum_r dlogits[r, c] (may be null): summed in
// fp32, stored in `type` like x (the gradient type of the other layers' products).
// With `source` set, x is not used and the rows are gathered as in SkinnyForwardArgs. With `update`
// set (a lone output layer, no fp16 check), dw and dbias are not written: each gradient, rounded to
// `type` as it would have been stored, updates its parameter at once (flat_update.cuh) and the last
// block advances the step state, so the step needs no separate optimizer launch.
// The per-row losses and hits a training forward left in its scratch (SkinnyForwardArgs with no
// metrics): the weight-gradient kernel adds them into `metrics` in a fixed order, in a block of its own.
struct RowSums {
  const double* loss = nullptr;
  const long long* correct = nullptr;
  std::int64_t rows = 0;
  StepMetrics* metrics = nullptr;
  double loss_weight = 1.0;
};
struct FusedUpdate {
  FlatOptimizerArgs args;
  std::int64_t weight_offset = 0, bias_offset = -1;  // the layer's place in the flat buffers
};
// Without source or update, a wide product's rows (rows x in >= 256 K) are cut into slices summed
// by separate blocks where `scratch` is given (skinny_weight_grad_split: scratch_floats fp32 partial sums, `groups` counters, zero
// before the first launch and left zero by each), so wide layers fill the GPU; the slices are added
// in a fixed order.
struct SkinnyScratch {
  float* partials = nullptr;
  std::uint32_t* counters = nullptr;
};
struct SkinnySplit {
  std::int64_t groups = 0, splits = 1, scratch_floats = 0;
};
SkinnySplit skinny_weight_grad_split(std::int64_t rows, std::int64_t in);
cudaError_t launch_skinny_weight_grad(const float* dlogits, int classes, const void* x, ElementType type,
                                      std::int64_t rows, std::int64_t in, void* dw, void* dbias,
                                      cudaStream_t stream, const GatherArgs* source = nullptr,
                                      const FusedUpdate* update = nullptr, const RowSums* sums = nullptr,
                                      SkinnyScratch scratch = {});
// dx[r, f] = (sum_c dlogits[r, c] w[c, f]) * (relu_out == null || relu_out[r, f] > 0), in `type`.
cudaError_t launch_skinny_input_grad(const float* dlogits, int classes, const void* w, ElementType type,
                                     std::int64_t rows, std::int64_t in, const void* relu_out, void* dx,
                                     cudaStream_t stream);

// convert.cu: dst[i] = src[i] rounded to dst_type.
cudaError_t launch_convert_from_f32(const float* src, void* dst, ElementType dst_type, std::int64_t count,
                                    cudaStream_t stream);

// sum_rows.cu: out[c] = sum_r x[r, c] + beta * out[c], summed in fp32 in a fixed order (bit-identical
// run to run), out in `type` like x: the eager sum_rows and the bias gradient where cuBLASLt has no
// fused epilogue for it.
cudaError_t launch_sum_rows(const void* x, ElementType type, std::int64_t rows, std::int64_t cols, float beta,
                            void* out, cudaStream_t stream);

// permutation.cu: the epoch's order, identical to core/random.h's epoch_permutation():
// samples sorted by (permutation_key(seed, epoch, i), i) with a device radix sort.
std::size_t epoch_permutation_scratch_bytes(std::int64_t n);
cudaError_t launch_epoch_permutation(std::uint64_t seed, std::uint64_t epoch, std::int64_t n, void* scratch,
                                     std::size_t scratch_bytes, std::int32_t* order, cudaStream_t stream);

}  // namespace sprintnet::cuda
