#pragma once
// The fused engine's rows kernel (docs/FUSED.md, v13): a small model's whole training epoch in one
// thread-block cluster of 16 blocks, the batch's rows split over the blocks for every hidden and
// output layer (each block runs its 8 rows through them alone, the hidden weights replicated in every
// block's shared memory), the first layer split 2 x 8 as the cluster kernel's (v11a). Two exchanges on
// a step's path: the first layer's partial sums to the rows' owners, the first layer's gradient back.
// Each block steps its 32 x 32 tile of every hidden-to-hidden layer and its 8 columns of the output
// layer from the rows' operands, sent beside the path, and multicasts the new values into every block;
// both go through L2 (global memory, then a multicast bulk copy). Takes the same arguments as the grid
// kernel (fused_epoch.h) plus the shared-memory layout and a scratch buffer of layout.scratch_bytes, and
// leaves the same state behind.
#include <cuda_runtime_api.h>

#include "sprintnet/ops/cuda/fused/fused_epoch.h"
#include "sprintnet/ops/cuda/fused/rows_layout.h"

namespace sprintnet::cuda {

// Whether `device` runs the rows kernel with `shared_bytes` a block (nullptr: yes).
const char* rows_epoch_unavailable(int device, std::int64_t shared_bytes);
// How many of its clusters `device` holds at once (0 where it cannot run them).
int rows_epoch_active_clusters(int device, std::int64_t shared_bytes);
// Trains one epoch (args.train, bf16).
cudaError_t launch_rows_epoch(const FusedEpochArgs& args, const RowsLayout& layout, void* scratch, cudaStream_t stream);

}  // namespace sprintnet::cuda
