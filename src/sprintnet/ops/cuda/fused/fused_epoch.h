#pragma once
// The fused engine's kernel (docs/FUSED.md): one persistent, cooperatively
// launched kernel that runs a whole training epoch — gather, forward, loss,
// backward, optimizer update, metrics — or a whole evaluation, with grid-wide
// barriers between the stages of each step. Like step_launch.h, free of
// sprintnet's core headers because nvcc compiles the .cu files.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/step_launch.h"

namespace sprintnet::cuda {

inline constexpr int kFusedMaxLayers = 8;
inline constexpr int kFusedMaxClasses = 64;
// Every matrix row (weights, activations, gradients) is padded with zeros to a multiple of 16
// elements: the tensor-core k-step, and 16-byte aligned rows for cp.async.
inline constexpr int kFusedRowAlign = 16;
// Batch buffers hold a multiple of this many rows (the tile height).
inline constexpr int kFusedRowTile = 32;
inline constexpr int kFusedThreads = 256;

enum class FusedLoss : int { kCrossEntropy, kMse };

// One Linear layer: its weight rows [out][in_pad] in the flat buffers (offset in elements), and
// its batch buffers, [rows][out_pad] in the compute type. With a bias, the bias is column `in` of
// the weight rows and every input row carries a 1 in that column (the gathered batch and the
// hidden layers' outputs), so the products add the bias and the weight gradient's column `in` is
// the bias gradient: no separate bias pass anywhere.
struct FusedLayer {
  int in = 0, out = 0, in_pad = 0, out_pad = 0;
  int bias = 0;  // 1: the bias is weight column `in`
  std::int64_t weight_offset = 0;
  void* act = nullptr;  // the layer's output (after the activation; the logits' layer has none)
  void* pre = nullptr;  // the pre-activation, kept where the derivative needs it (GELU, tanh, sigmoid, SiLU)
  void* dz = nullptr;   // the gradient w.r.t. the pre-activation (the output layer's: of the logits)
};

// What the host reads while an epoch runs (host-mapped memory, written by block 0 once per step).
struct alignas(16) FusedProgress {
  std::int64_t steps = 0;
  double loss_sum = 0.0;
};

struct FusedEpochArgs {
  bool train = true;  // false: evaluate `eval_samples` samples in order, batches of `batch` rows
  ElementType type = ElementType::kBF16;  // bf16 or fp16 (fp16: dynamic loss scaling, optimizer.check_finite)
  ActivationKind activation = ActivationKind::kReLU;
  FusedLoss loss = FusedLoss::kCrossEntropy;
  float smoothing = 0.0f;
  int num_layers = 0;
  FusedLayer layers[kFusedMaxLayers];
  std::int64_t rows_alloc = 0;  // rows of every batch buffer (a multiple of kFusedRowTile)

  // The data set: uint8 rows, normalised x * scale + shift and rounded to `type` like launch_gather_batch.
  const std::uint8_t* images = nullptr;
  const std::int32_t* labels = nullptr;
  std::int64_t samples = 0;     // training: samples per epoch (the last batch may be partial)
  const std::int32_t* order = nullptr;  // the epoch's permutation (training), null for evaluation
  float scale = 1.0f, shift = 0.0f;
  // The same rows normalised and rounded to `type` once, [samples][features] (the regression kernel
  // gathers them; null for the other kernels).
  const void* normalised = nullptr;
  std::int64_t batch = 0;
  std::int64_t steps = 0;       // training steps in this epoch (evaluation: batches)
  void* inputs[2] = {nullptr, nullptr};        // gathered batches [rows_alloc][in_pad], alternate steps
  std::int32_t* batch_labels[2] = {nullptr, nullptr};

  // Parameters: fp32 master and optimizer state in the flat buffers of `optimizer`; the compute copies
  // the products read. bf16 alternates them (a step reads copies[step % 2] and its updates write the
  // other, so updates share a stage with the products that read the old weights); fp16 keeps one
  // (copies[0] == copies[1]) and stores gradients in `grads` for the finiteness check first.
  FlatOptimizerArgs optimizer{};
  void* copies[2] = {nullptr, nullptr};
  float* grads = nullptr;
  std::int64_t params = 0;  // length of the flat buffers
  std::int32_t* found_inf = nullptr;  // fp16: two flags, by step parity

  double* row_loss = nullptr;          // per row of a step (training) or of the evaluation set
  std::int32_t* row_correct = nullptr;
  StepState* state = nullptr;          // read at the start, written at the end (training)
  StepMetrics* metrics = nullptr;      // sums added by block 0
  FusedProgress* progress = nullptr;   // host-mapped, may be null
  unsigned* barrier = nullptr;         // zeroed before each launch
  std::uint64_t* stage_clock = nullptr;  // the kernel lab's per-stage profile (may be null): see GridBarrier
  int stage_clock_capacity = 0;
  // Whose clock: block 0, or another for the rows kernel (SPRINTNET_FUSED_PROFILE_BLOCK); -1: every rows
  // block's, each into its own 1/16 of the buffer (the timeline).
  int stage_clock_block = 0;
};

// Bytes of shared memory a block of the kernel uses.
std::size_t fused_epoch_shared_bytes();
// Blocks that can be co-resident on `device` (the cooperative launch's limit).
cudaError_t fused_epoch_max_blocks(int device, int* blocks);
// Launches the epoch (or evaluation) on `blocks` blocks; args.barrier must be zero.
cudaError_t launch_fused_epoch(const FusedEpochArgs& args, int blocks, cudaStream_t stream);

}  // namespace sprintnet::cuda
