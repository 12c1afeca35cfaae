// Softmax cross-entropy (or squared error) of a whole batch in one block, fused with its gradient
// and the step's metrics (loss sum and correct predictions), so the training
// step needs no separate reduction launch. One warp per row (rows strided over
// the block's 32 warps): the row's first maximum here, its softmax cross-entropy and
// gradient by row_softmax.cuh (shared with the eager op). The block's partial sums
// are added in warp order by one thread: deterministic.
// A batch of B rows costs B/32 row passes: one block is enough for MNIST-sized
// class counts at every batch size we train with.
#include <cmath>

#include "sprintnet/ops/cuda/element_access.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"
#include "sprintnet/ops/cuda/row_softmax.cuh"

namespace sprintnet::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / kWarpSize;

// loss.type = "mse": the row's mean squared error against its one-hot target and its gradient
// (`max_index`: the row's argmax, for the accuracy).
__device__ void squared_error_row(const CrossEntropyArgs& a, std::int64_t base, std::int32_t label, float scale,
                                  std::int64_t max_index, int lane, double& loss, long long& correct) {
  const float inv_classes = 1.0f / static_cast<float>(a.classes);
  float sum = 0.0f;
  for (std::int64_t c = lane; c < a.classes; c += kWarpSize) {
    const float diff = load_element(a.logits, a.type, base + c) - (c == label ? 1.0f : 0.0f);
    sum += diff * diff;
    if (a.dlogits != nullptr) store_element(a.dlogits, a.type, base + c, scale * 2.0f * diff * inv_classes);
  }
  sum = warp_sum(sum);
  if (lane == 0) {
    loss += static_cast<double>(sum) / static_cast<double>(a.classes);
    correct += max_index == label ? 1 : 0;
  }
}

__global__ void __launch_bounds__(kThreads) fused_cross_entropy_kernel(CrossEntropyArgs a) {
  __shared__ double warp_loss[kWarps];
  __shared__ long long warp_correct[kWarps];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const float scale = a.grad_scale * (a.state != nullptr ? a.state->loss_scale : 1.0f);
  double loss = 0.0;
  long long correct = 0;
  for (std::int64_t row = warp; row < a.rows; row += kWarps) {
    const std::int64_t base = row * a.classes;
    const std::int32_t label = a.labels[row];
    // Max with its first index (ties resolved to the lower index, as torch.argmax and count_correct).
    float max_logit = -INFINITY;
    std::int64_t max_index = a.classes;
    for (std::int64_t c = lane; c < a.classes; c += kWarpSize) {
      const float v = load_element(a.logits, a.type, base + c);
      if (v > max_logit || max_index == a.classes) {  // strict: a lane keeps its first maximum
        max_logit = v;
        max_index = c;
      }
    }
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(kFullWarpMask, max_logit, offset);
      const std::int64_t other_index = __shfl_xor_sync(kFullWarpMask, max_index, offset);
      if (other > max_logit || (other == max_logit && other_index < max_index)) {
        max_logit = other;
        max_index = other_index;
      }
    }
    if (a.squared_error) {
      squared_error_row(a, base, label, scale, max_index, lane, loss, correct);
      continue;
    }
    const double row_loss = warp_softmax_cross_entropy(
        [&](std::int64_t c) { return load_element(a.logits, a.type, base + c); }, a.classes, label, max_logit,
        a.smoothing, scale, a.dlogits != nullptr,
        [&](std::int64_t c, float g) { store_element(a.dlogits, a.type, base + c, g); });
    if (lane == 0) {
      loss += row_loss;
      correct += max_index == label ? 1 : 0;
    }
  }
  if (lane == 0) {
    warp_loss[warp] = loss;
    warp_correct[warp] = correct;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    long long total_correct = 0;
    for (int w = 0; w < kWarps; ++w) {
      total += warp_loss[w];
      total_correct += warp_correct[w];
    }
    a.metrics->loss_sum += a.loss_weight * total;
    a.metrics->correct += total_correct;
  }
}

}  // namespace

cudaError_t launch_fused_cross_entropy(const CrossEntropyArgs& args, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  const NvtxRange range("fused_cross_entropy");
  fused_cross_entropy_kernel<<<1, kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
