#pragma once
// The fused engine's quads kernel (docs/FUSED.md, v18): a model with two hidden layers of at most 256
// (the default model, 784-256-256-10) trained a whole epoch in one thread-block cluster of 16 blocks as
// four quads: quad q owns the batch's rows 32q..32q+31 for every hidden and output layer, block 4q + j
// of it neuron quarter j of each hidden layer. Every exchange stays inside a quad or among the blocks
// of one quarter, by st.async stores into the receivers' shared memory. Takes the same arguments as
// the grid kernel (fused_epoch.h) plus the shared-memory layout, and leaves the same state behind.
#include <cuda_runtime_api.h>

#include "sprintnet/ops/cuda/fused/fused_epoch.h"
#include "sprintnet/ops/cuda/fused/quads_layout.h"

namespace sprintnet::cuda {

// Whether `device` runs the quads kernel with `shared_bytes` a block (nullptr: yes).
const char* quads_epoch_unavailable(int device, std::int64_t shared_bytes);
// How many of its clusters `device` holds at once (0 where it cannot run them).
int quads_epoch_active_clusters(int device, std::int64_t shared_bytes);
// Trains one epoch (args.train, bf16, SGD).
cudaError_t launch_quads_epoch(const FusedEpochArgs& args, const QuadsLayout& layout, cudaStream_t stream);

}  // namespace sprintnet::cuda
