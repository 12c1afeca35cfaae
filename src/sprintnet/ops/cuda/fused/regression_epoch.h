#pragma once
// The fused engine's regression kernel (docs/FUSED.md, "v8: softmax regression on one cluster of
// 8"): a model without hidden layers (softmax regression, or linear regression with MSE) trains a
// whole epoch in one cluster of 8 blocks. Block r owns a 16-aligned range of the input features:
// its slice of the weights in shared memory (bf16) and in the registers of the threads that compute
// their gradients (fp32 master and optimizer state), its columns of every batch gathered in the
// background two steps ahead (a bulk copy a row). A step is two exchanges of st.async stores on
// mbarriers and no barrier across blocks: each block's partial logits to the owner of each 16 rows,
// each owner's loss gradient rows to every block. Takes the grid kernel's arguments (fused_epoch.h)
// and leaves the same state behind (fp32 master weights and optimizer state in the flat buffers, the
// compute copy in copies[step % 2]).
#include <cuda_runtime_api.h>

#include "sprintnet/ops/cuda/fused/fused_epoch.h"

namespace sprintnet::cuda {

inline constexpr int kRegressionCtas = 8;          // the cluster: one owner for each 16 of the 128 rows
inline constexpr int kRegressionRows = 128;        // the largest batch
inline constexpr int kRegressionMaxInputs = 1024;  // a multiple of 16 (whole k-tiles of pixels)
inline constexpr int kRegressionMaxClasses = 16;   // one 16-wide tile of logits

// Whether `device` runs the regression kernel (nullptr: yes; else why not).
const char* regression_epoch_unavailable(int device);
// How many of its clusters `device` holds at once (0 where it cannot run them): runs side by side.
int regression_epoch_active_clusters(int device);
// Trains one epoch (args.train true, bf16, no hidden layer, the limits above: fused_fit.h checks them).
cudaError_t launch_regression_epoch(const FusedEpochArgs& args, cudaStream_t stream);

}  // namespace sprintnet::cuda
