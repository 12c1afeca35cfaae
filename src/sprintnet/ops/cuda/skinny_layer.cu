// The output layer of a classifier, when it has few outputs (MNIST's 10): a
// product with 10 columns is too thin for cuBLAS's tiles (its kernels wait on
// latency, and its epilogues run as extra kernels), so these kernels fuse the
// product with its neighbours. Deterministic: every sum has a fixed order.
#include <cmath>

#include "sprintnet/ops/cuda/element_access.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

constexpr int kForwardThreads = 256;
constexpr int kForwardWarps = kForwardThreads / kWarpSize;

// One warp per row: lanes stride over the inputs, each keeping all `classes` partial sums; a
// butterfly gives every lane every logit; lane c then owns class c for the softmax. Per-block sums
// go to scratch, and the last block to finish adds them in block order into the metrics.
__global__ void __launch_bounds__(kForwardThreads) skinny_forward_kernel(SkinnyForwardArgs a) {
  __shared__ double warp_loss[kForwardWarps];
  __shared__ long long warp_correct[kForwardWarps];
  __shared__ bool last_block;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kForwardWarps + warp;
  double loss = 0.0;
  long long correct = 0;
  if (row < a.rows) {
    float acc[kSkinnyMaxOutputs];
#pragma unroll
    for (int c = 0; c < kSkinnyMaxOutputs; ++c) acc[c] = 0.0f;
    const std::int64_t base = row * a.in;
    for (std::int64_t f = lane; f < a.in; f += kWarpSize) {
      const float x = load_element(a.x, a.type, base + f);
#pragma unroll
      for (int c = 0; c < kSkinnyMaxOutputs; ++c) {
        if (c < a.classes) acc[c] += x * load_element(a.w, a.type, c * a.in + f);
      }
    }
    float logit = -INFINITY;  // lane c's class
#pragma unroll
    for (int c = 0; c < kSkinnyMaxOutputs; ++c) {
      if (c < a.classes) {
        float v = warp_sum(acc[c]);
        if (a.bias != nullptr) v += load_element(a.bias, a.type, c);
        // The product is rounded to the compute type, as cuBLAS's output would be.
        if (a.type == ElementType::kBF16) v = __bfloat162float(__float2bfloat16_rn(v));
        if (a.type == ElementType::kF16) v = __half2float(__float2half_rn(v));
        if (lane == c) logit = v;
      }
    }
    const bool active = lane < a.classes;
    const std::int32_t label = a.labels[row];
    // Max and its first index.
    float max_logit = active ? logit : -INFINITY;
    int max_index = active ? lane : kWarpSize;
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(kFullWarpMask, max_logit, offset);
      const int other_index = __shfl_xor_sync(kFullWarpMask, max_index, offset);
      if (other > max_logit || (other == max_logit && other_index < max_index)) {
        max_logit = other;
        max_index = other_index;
      }
    }
    const float exp_sum = warp_sum(active ? expf(logit - max_logit) : 0.0f);
    const float logit_sum = warp_sum(active ? logit : 0.0f);
    const float target_logit = __shfl_sync(kFullWarpMask, logit, label);
    const float log_sum_exp = max_logit + logf(exp_sum);
    const float off_target = a.smoothing / static_cast<float>(a.classes);
    if (lane == 0) {
      loss = static_cast<double>(log_sum_exp) - (1.0 - a.smoothing) * static_cast<double>(target_logit) -
             static_cast<double>(off_target) * static_cast<double>(logit_sum);
      correct = max_index == label ? 1 : 0;
    }
    if (a.dlogits != nullptr && active) {
      const float scale = a.grad_scale * (a.state != nullptr ? a.state->loss_scale : 1.0f);
      const float target = (lane == label ? 1.0f - a.smoothing : 0.0f) + off_target;
      a.dlogits[row * a.classes + lane] = scale * (expf(logit - log_sum_exp) - target);
    }
  }
  if (lane == 0) {
    warp_loss[warp] = loss;
    warp_correct[warp] = correct;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double block_loss = 0.0;
    long long block_correct = 0;
    for (int w = 0; w < kForwardWarps; ++w) {
      block_loss += warp_loss[w];
      block_correct += warp_correct[w];
    }
    a.block_loss[blockIdx.x] = block_loss;
    a.block_correct[blockIdx.x] = block_correct;
    __threadfence();
    last_block = atomicAdd(a.blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last_block && threadIdx.x == 0) {
    __threadfence();
    double total = 0.0;
    long long total_correct = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) {
      total += static_cast<volatile double*>(a.block_loss)[b];
      total_correct += static_cast<volatile long long*>(a.block_correct)[b];
    }
    a.metrics->loss_sum += a.loss_weight * total;
    a.metrics->correct += total_correct;
    *a.blocks_done = 0;
  }
}

constexpr int kGradThreads = 128;
constexpr int kRowChunk = 64;

// One thread per input feature; the output gradient goes through shared memory in chunks of rows.
__global__ void __launch_bounds__(kGradThreads) skinny_weight_grad_kernel(const float* dlogits, int classes,
                                                                         const void* x, ElementType type,
                                                                         std::int64_t rows, std::int64_t in,
                                                                         float* dw, float* dbias) {
  __shared__ float dz[kRowChunk * kSkinnyMaxOutputs];
  const std::int64_t f = static_cast<std::int64_t>(blockIdx.x) * kGradThreads + threadIdx.x;
  float acc[kSkinnyMaxOutputs];
#pragma unroll
  for (int c = 0; c < kSkinnyMaxOutputs; ++c) acc[c] = 0.0f;
  float bias_acc = 0.0f;  // thread c of block 0: the bias gradient of class c
  for (std::int64_t start = 0; start < rows; start += kRowChunk) {
    const int chunk = static_cast<int>(rows - start < kRowChunk ? rows - start : kRowChunk);
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.x); i < chunk * classes; i += kGradThreads) {
      dz[i] = dlogits[start * classes + i];
    }
    __syncthreads();
    if (blockIdx.x == 0 && static_cast<int>(threadIdx.x) < classes) {
      for (int r = 0; r < chunk; ++r) bias_acc += dz[r * classes + static_cast<int>(threadIdx.x)];
    }
    if (f < in) {
      for (int r = 0; r < chunk; ++r) {
        const float xv = load_element(x, type, (start + r) * in + f);
#pragma unroll
        for (int c = 0; c < kSkinnyMaxOutputs; ++c) {
          if (c < classes) acc[c] += dz[r * classes + c] * xv;
        }
      }
    }
  }
  if (f < in) {
#pragma unroll
    for (int c = 0; c < kSkinnyMaxOutputs; ++c) {
      if (c < classes) dw[c * in + f] = acc[c];
    }
  }
  if (dbias != nullptr && blockIdx.x == 0 && static_cast<int>(threadIdx.x) < classes) dbias[threadIdx.x] = bias_acc;
}

__global__ void skinny_input_grad_kernel(const float* dlogits, int classes, const void* w, ElementType type,
                                         std::int64_t rows, std::int64_t in, const void* relu_out, void* dx) {
  const std::int64_t count = rows * in;
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) {
    const std::int64_t r = i / in, f = i % in;
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) sum += dlogits[r * classes + c] * load_element(w, type, c * in + f);
    if (relu_out != nullptr && !(load_element(relu_out, type, i) > 0.0f)) sum = 0.0f;
    store_element(dx, type, i, sum);
  }
}

}  // namespace

std::int64_t skinny_forward_blocks(std::int64_t rows) { return (rows + kForwardWarps - 1) / kForwardWarps; }

cudaError_t launch_skinny_forward_cross_entropy(const SkinnyForwardArgs& args, cudaStream_t stream) {
  if (args.classes < 1 || args.classes > kSkinnyMaxOutputs) return cudaErrorInvalidValue;
  if (args.rows == 0) return cudaSuccess;
  const NvtxRange range("skinny_forward_cross_entropy");
  skinny_forward_kernel<<<static_cast<unsigned>(skinny_forward_blocks(args.rows)), kForwardThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t launch_skinny_weight_grad(const float* dlogits, int classes, const void* x, ElementType type,
                                      std::int64_t rows, std::int64_t in, float* dw, float* dbias,
                                      cudaStream_t stream) {
  if (classes < 1 || classes > kSkinnyMaxOutputs) return cudaErrorInvalidValue;
  if (in == 0) return cudaSuccess;
  const NvtxRange range("skinny_weight_grad");
  const auto blocks = static_cast<unsigned>((in + kGradThreads - 1) / kGradThreads);
  skinny_weight_grad_kernel<<<blocks, kGradThreads, 0, stream>>>(dlogits, classes, x, type, rows, in, dw, dbias);
  return cudaGetLastError();
}

cudaError_t launch_skinny_input_grad(const float* dlogits, int classes, const void* w, ElementType type,
                                     std::int64_t rows, std::int64_t in, const void* relu_out, void* dx,
                                     cudaStream_t stream) {
  if (classes < 1 || classes > kSkinnyMaxOutputs) return cudaErrorInvalidValue;
  if (rows * in == 0) return cudaSuccess;
  const NvtxRange range("skinny_input_grad");
  skinny_input_grad_kernel<<<elementwise_blocks(rows * in), kElementwiseThreads, 0, stream>>>(
      dlogits, classes, w, type, rows, in, relu_out, dx);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
