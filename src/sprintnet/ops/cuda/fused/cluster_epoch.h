#pragma once
// The fused engine's cluster kernel (docs/FUSED.md, v4 to v6): a small model's
// whole training epoch in one thread-block cluster of 16 blocks, its weights
// resident in their shared memory (the first layer's fp32 master and optimizer
// state in registers), activations copied block to block by bulk copies on
// mbarriers (the first layer's partial sums through L2). Takes the
// same arguments as the grid kernel (fused_epoch.h) plus the shared-memory
// layout and the partial sums' buffer, and leaves the same
// state behind (fp32 master weights and optimizer state in the flat buffers,
// the compute copy the evaluation reads in copies[step % 2]).
#include <cuda_runtime_api.h>

#include "sprintnet/ops/cuda/fused/cluster_layout.h"
#include "sprintnet/ops/cuda/fused/fused_epoch.h"

namespace sprintnet::cuda {

// Whether `device` runs a cluster of kClusterCtas blocks with `shared_bytes` each (nullptr: yes).
const char* cluster_epoch_unavailable(int device, std::int64_t shared_bytes);
// How many such clusters `device` holds at once (0 where it cannot run them): a run takes one, so
// this says how many runs train side by side (sweeps).
int cluster_epoch_active_clusters(int device, std::int64_t shared_bytes);
// Trains one epoch (args.train must be true, args.type bf16); `partials` is the first layer's partial
// products' buffer, layout.partials_bytes of global memory.
cudaError_t launch_cluster_epoch(const FusedEpochArgs& args, const ClusterLayout& layout, float* partials,
                                 cudaStream_t stream);

}  // namespace sprintnet::cuda
