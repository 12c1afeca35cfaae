#pragma once
// The fused engine's split kernel (docs/FUSED.md, v7g; its history in
// bench/lab/resident_epoch.cu): a whole training epoch of a 784-input model with
// one to three hidden layers of one width (784 or 256) and 10 classes
// (784-784-784-784-10, 784-256-256-10 and the like) at batch <= 128. Hidden layers
// of 784 train in 98 blocks, 14 clusters of 7; of 256, in 32 blocks, 8 clusters of
// 4. Each block owns 8 neurons of every hidden layer; cluster c owns its blocks'
// neurons, and rank k takes a range of the k (or o) dimension of every product
// (112 or 64 wide; the first layer's 784 inputs split as evenly as 16-wide tiles go
// where the width is 256), keeping that tile of each layer's fp32 master weights in
// shared memory all epoch. Partial sums go to their owners by bulk copies over
// distributed shared memory; activations through L2, with a grid barrier after
// each of a step's stages (2 a hidden layer and the output layer's one). Takes the fused engine's arguments (fused_epoch.h)
// and leaves the same state behind: the fp32 master and momentum in the flat
// buffers, the bf16 copy (both copies[], bias columns included) for the
// evaluation the grid kernel runs.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "sprintnet/ops/cuda/fused/fused_epoch.h"

namespace sprintnet::cuda {

// The shapes the kernel is compiled for: 784 inputs, 1 to kSplitMaxHidden hidden layers of one of
// kSplitShapes' widths, 10 classes, a batch of at most 128.
inline constexpr int kSplitInputs = 784;
inline constexpr int kSplitMaxHidden = 3;
inline constexpr int kSplitClasses = 10;
inline constexpr int kSplitMaxBatch = 128;
struct SplitShape {
  int width;    // every hidden layer
  int blocks;   // width / 8: a block owns 8 neurons of each
  int cluster;  // blocks a cluster
};
inline constexpr SplitShape kSplitShapes[] = {{784, 98, 7}, {256, 32, 4}};
// The shape of hidden layers `width` wide (nullptr: none).
constexpr const SplitShape* split_shape(std::int64_t width) {
  for (const SplitShape& shape : kSplitShapes) {
    if (shape.width == width) return &shape;
  }
  return nullptr;
}

// The profile's stamps a step (SPRINTNET_FUSED_PROFILE) with `depth` hidden layers: the grid barriers
// and the stamps inside the stages (split_epoch_kernel.cuh: 5 a forward stage, 6 the output stage, 7 a
// backward stage with an input gradient, 5 the first layer's).
constexpr int split_stamps_per_step(int depth) { return 12 * depth + 4; }

// Bytes of global memory the kernel needs besides the engine's buffers: the batch (two, by step
// parity), the hidden layers' outputs and gradients, bf16 [128][784] each (whatever the width), the
// live output bias and the hidden layers' optimizer state in fragment order.
std::int64_t split_epoch_scratch_bytes();
// Why `device` cannot run the kernel for `depth` hidden layers `width` wide (nullptr: it can):
// compute capability 9.0, sm_90 code in this build, the shape's clusters co-resident (14 of 7 blocks
// with ~218 KiB of shared memory each for 784; 8 of 4 with ~206 KiB for 256). Loads that shape and
// depth's module (H100: ~0.01 s for 256 wide, ~0.08 s for 784 x 3), which the launch needs anyway.
const char* split_epoch_unavailable(int device, int width, int depth);
// How many of the shape's clusters `device` holds at once (0 where it cannot run the kernel): a run
// takes blocks / cluster of them, so this says how many runs train side by side (sweeps).
int split_epoch_active_clusters(int device, int width, int depth);
// Trains one epoch: args.train, bf16, a shape above, SGD (any momentum, dampening, Nesterov,
// weight decay), Adam or AdamW, cross-entropy (with smoothing) or MSE, every activation;
// args.barrier zeroed. `scratch`: split_epoch_scratch_bytes() of device memory.
cudaError_t launch_split_epoch(const FusedEpochArgs& args, void* scratch, cudaStream_t stream);

}  // namespace sprintnet::cuda
