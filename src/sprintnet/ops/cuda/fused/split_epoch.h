#pragma once
// The fused engine's split kernel (docs/FUSED.md, v7g; its history in
// bench/lab/resident_epoch.cu): a whole training epoch of a 784-input model with
// one to three hidden layers of 784 and 10 classes (784-784-784-784-10 and
// shallower) at batch <= 128 in 98 blocks, 14 clusters of 7. Cluster c owns 56
// neurons of every hidden layer; rank k takes the k (or o) range 112k..112k+111 of
// every product and keeps that 112 x 56 tile of each hidden layer's fp32 master
// weights in shared memory all epoch. Partial sums go to their owners by bulk copies over
// distributed shared memory; activations through L2, with a grid barrier after
// each of a step's stages (2 a hidden layer and the output layer's one). Takes the fused engine's arguments (fused_epoch.h)
// and leaves the same state behind: the fp32 master and momentum in the flat
// buffers, the bf16 copy (both copies[], bias columns included) for the
// evaluation the grid kernel runs.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "sprintnet/ops/cuda/fused/fused_epoch.h"

namespace sprintnet::cuda {

// The one shape the kernel is compiled for.
inline constexpr int kSplitInputs = 784;
inline constexpr int kSplitWidth = 784;  // every hidden layer
inline constexpr int kSplitMaxHidden = 3;  // hidden layers of kSplitWidth: 1 to this
inline constexpr int kSplitClasses = 10;
inline constexpr int kSplitMaxBatch = 128;
inline constexpr int kSplitBlocks = 98;
inline constexpr int kSplitClusterSize = 7;

// Bytes of global memory the kernel needs besides the engine's buffers: the batch (two, by step
// parity), the hidden layers' outputs and gradients, bf16 [128][784] each, and the live output bias.
std::int64_t split_epoch_scratch_bytes();
// Why `device` cannot run the kernel (nullptr: it can): compute capability 9.0, sm_90 code in this
// build, 14 co-resident clusters of 7 blocks with ~218 KiB of shared memory each.
const char* split_epoch_unavailable(int device);
// Trains one epoch: args.train, bf16, the shape above, SGD (any momentum, dampening, Nesterov,
// weight decay), cross-entropy (with smoothing) or MSE, every activation;
// args.barrier zeroed. `scratch`: split_epoch_scratch_bytes() of device memory.
cudaError_t launch_split_epoch(const FusedEpochArgs& args, void* scratch, cudaStream_t stream);

}  // namespace sprintnet::cuda
