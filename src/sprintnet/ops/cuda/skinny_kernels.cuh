#pragma once
// What the output layer's kernels share (skinny_layer.cu: the FMA kernels; skinny_mma.cu: the
// tensor-core ones): 4-element loads and stores, the gathered input, a row's softmax
// cross-entropy, the fixed-order metric sums, and the sliced weight gradient's bias block and tail.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "sprintnet/ops/cuda/batch_rows.cuh"
#include "sprintnet/ops/cuda/element_access.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/step_launch.h"

namespace sprintnet::cuda::skinny_detail {

constexpr int kForwardThreads = 256;
constexpr int kForwardWarps = kForwardThreads / kWarpSize;

// Four consecutive elements as floats, in one load (8 bytes of bf16/fp16, 16 of fp32): the wide
// layers' rows (in % 4 == 0, aligned; vectorizable()) are read this way, a quarter of the loads.
template <typename T>
__device__ inline void load4(const T* p, float (&v)[4]) {
  if constexpr (sizeof(T) == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    const uint2 q = *reinterpret_cast<const uint2*>(p);
    const T* e = reinterpret_cast<const T*>(&q);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = to_float(e[j]);
  }
}
template <typename T>
__device__ inline void store4(T* p, const float (&v)[4]) {
  if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    uint2 q;
    T* e = reinterpret_cast<T*>(&q);
#pragma unroll
    for (int j = 0; j < 4; ++j) e[j] = from_float<T>(v[j]);
    *reinterpret_cast<uint2*>(p) = q;
  }
}
// Whether rows of `in` elements at p can be read four at a time.
template <typename T>
__device__ __host__ inline bool vectorizable(const void* p, std::int64_t in) {
  return in % 4 == 0 && reinterpret_cast<std::uintptr_t>(p) % (4 * sizeof(T)) == 0;
}

// A gathered input value, normalised and rounded to T exactly as batch_gather.cu stores it.
template <typename T>
__device__ inline float gathered_value(const GatherArgs& g, const std::uint8_t* row, std::int64_t f) {
  return round_to<T>(normalized_pixel(g, row[f]));
}

// A warp's row of the softmax cross-entropy from lane c's product (class c < a.classes): the logits
// (bias added, rounded to T as cuBLAS's output would be), the row's loss and hit into the scratch,
// its gradient into dlogits.
template <typename T, bool kGathered>
__device__ void finish_row(const SkinnyForwardArgs& a, std::int64_t row, float product, int lane) {
  const bool active = lane < a.classes;
  float logit = -INFINITY;  // lane c's class
  if (active) {
    float v = product;
    if (a.bias != nullptr) v += to_float(static_cast<const T*>(a.bias)[lane]);
    logit = round_to<T>(v);
  }
  std::int32_t label;
  if constexpr (kGathered) {
    label = a.source.labels[batch_sample(a.source, batch_first_row(a.source), row)];
  } else {
    label = a.labels[row];
  }
  // Max and its first index.
  float max_logit = logit;
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
  const float gap_sum = warp_sum(active ? max_logit - logit : 0.0f);
  const float target_logit = __shfl_sync(kFullWarpMask, logit, label);
  const float off_target = a.smoothing / static_cast<float>(a.classes);
  if (lane == 0) {
    // From the gaps to the maximum, as row_softmax.cuh: lse - x[label] cancels for logits near FLT_MAX.
    a.block_loss[row] = static_cast<double>(logf(exp_sum)) +
                        (1.0 - a.smoothing) * (static_cast<double>(max_logit) - static_cast<double>(target_logit)) +
                        (a.smoothing != 0.0f ? static_cast<double>(off_target) * static_cast<double>(gap_sum) : 0.0);
    a.block_correct[row] = max_index == label ? 1 : 0;
  }
  if (a.dlogits != nullptr && active) {
    const float scale = a.grad_scale * (a.state != nullptr ? a.state->loss_scale : 1.0f);
    const float target = (lane == label ? 1.0f - a.smoothing : 0.0f) + off_target;
    // exp(x - max) / exp_sum, not exp(x - lse): lse = max + log(exp_sum) rounds to max near FLT_MAX.
    a.dlogits[row * a.classes + lane] = scale * (expf(logit - max_logit) / exp_sum - target);
  }
}

// Adds the rows' losses and hits into the metrics, in a fixed tree (every thread of the block calls
// it). The loads bypass L1: in the forward's last block they read what other blocks just wrote.
template <int kThreads>
__device__ void add_row_sums(const RowSums& r) {
  __shared__ double tree_loss[kThreads];
  __shared__ long long tree_correct[kThreads];
  double loss = 0.0;
  long long correct = 0;
  for (std::int64_t i = threadIdx.x; i < r.rows; i += kThreads) {
    loss += __ldcg(r.loss + i);
    correct += __ldcg(r.correct + i);
  }
  tree_loss[threadIdx.x] = loss;
  tree_correct[threadIdx.x] = correct;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      tree_loss[threadIdx.x] += tree_loss[threadIdx.x + half];
      tree_correct[threadIdx.x] += tree_correct[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    r.metrics->loss_sum += r.loss_weight * tree_loss[0];
    r.metrics->correct += tree_correct[0];
  }
}

// The rows' losses and hits into the metrics, when the forward owns them (a.metrics): every block
// counts itself in, and the last to finish adds every row's scratch in a fixed tree, so the sums are
// deterministic. Every thread of the block calls it, after the block's rows are finished.
template <int kThreads>
__device__ void add_forward_row_sums(const SkinnyForwardArgs& a) {
  __shared__ bool last_block;
  if (a.metrics != nullptr) __threadfence();  // the rows' scratch, before the block counts itself in
  __syncthreads();
  if (threadIdx.x == 0) {
    last_block = a.metrics != nullptr && atomicAdd(a.blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  add_row_sums<kThreads>(RowSums{.loss = a.block_loss, .correct = a.block_correct, .rows = a.rows,
                                 .metrics = a.metrics, .loss_weight = a.loss_weight});
  if (threadIdx.x == 0) *a.blocks_done = 0;
}

// The tensor-core forward's geometry (skinny_mma.cu; skinny_layer.cu counts its blocks of kMmaRows rows).
constexpr int kMmaWarps = 8;
constexpr int kMmaRows = 16;
constexpr int kMmaChunk = 32;

constexpr int kGradWarps = 8;
constexpr int kRowChunk = 64;

constexpr int kSplitFeatures = 4 * kWarpSize;

// What a block of the sliced weight gradients owns: a group of kSplitFeatures features and one of
// `splits` slices of the rows, [first, last). The block after the last slice is the bias block.
struct WeightGradSlice {
  int group, split;
  std::int64_t first, last;
};
__device__ inline bool is_bias_block(std::int64_t in, int splits) {
  return static_cast<std::int64_t>(blockIdx.x) == (in + kSplitFeatures - 1) / kSplitFeatures * splits;
}
__device__ inline WeightGradSlice weight_grad_slice(std::int64_t rows, std::int64_t in, int splits) {
  const int groups = static_cast<int>((in + kSplitFeatures - 1) / kSplitFeatures);
  const int group = static_cast<int>(blockIdx.x) % groups, split = static_cast<int>(blockIdx.x) / groups;
  const std::int64_t per_split = (rows + splits - 1) / splits;
  const std::int64_t first = split * per_split;
  return {group, split, first, first + per_split < rows ? first + per_split : rows};
}

// The extra block of the sliced weight gradients: the bias gradient (warp w sums rows w, w + 8, ...;
// then the warps in order), and the forward's row sums where asked.
template <typename T>
__device__ void bias_grad_block(const float* dlogits, int classes, std::int64_t rows, T* dbias, const RowSums& sums) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  if (sums.metrics != nullptr) add_row_sums<kGradWarps * kWarpSize>(sums);
  if (dbias == nullptr) return;
  __shared__ float bias_part[kGradWarps][kSkinnyMaxOutputs];
  float b = 0.0f;
  if (lane < classes) {
    for (std::int64_t r = warp; r < rows; r += kGradWarps) b += dlogits[r * classes + lane];
  }
  bias_part[warp][lane] = b;
  __syncthreads();
  if (warp == 0 && lane < classes) {
    float total = 0.0f;
    for (int i = 0; i < kGradWarps; ++i) total += bias_part[i][lane];
    dbias[lane] = from_float<T>(total);
  }
}

// A block's sums of its 128 features (block_sum[c][lane]: feature 4 lane + j of class c, in
// component j): stored as the gradient when the rows are one slice; otherwise into the slice's
// scratch, and the last block of the feature group (a counter) adds the slices in order. Thread (warp
// w, lane) finishes classes w, w + 8, ... of its lane's four features. Every thread calls it.
template <typename T, int kC>
__device__ void store_weight_grad_block(const float4 (&block_sum)[kC][kWarpSize], int classes, std::int64_t in,
                                        int group, int split, int splits, T* dw, SkinnyScratch scratch) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t f = static_cast<std::int64_t>(group) * kSplitFeatures + 4 * lane;
  const auto store = [&](int c, const float (&v)[4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (f + j < in) dw[c * in + f + j] = from_float<T>(v[j]);
    }
  };
  if (splits == 1) {
    for (int c = warp; c < classes; c += kGradWarps) {
      const float4 q = block_sum[c][lane];
      const float v[4] = {q.x, q.y, q.z, q.w};
      store(c, v);
    }
    return;
  }
  for (int c = warp; c < classes; c += kGradWarps) {
    const float4 q = block_sum[c][lane];
    const float v[4] = {q.x, q.y, q.z, q.w};
    float* part = scratch.partials + (static_cast<std::int64_t>(split) * classes + c) * in + f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (f + j < in) part[j] = v[j];
    }
  }
  __shared__ bool last_block;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(scratch.counters + group, 1u) == static_cast<unsigned>(splits) - 1;
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  for (int c = warp; c < classes; c += kGradWarps) {
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int s = 0; s < splits; ++s) {
      const float* part = scratch.partials + (static_cast<std::int64_t>(s) * classes + c) * in + f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (f + j < in) v[j] += __ldcg(part + j);
      }
    }
    store(c, v);
  }
  if (threadIdx.x == 0) scratch.counters[group] = 0;
}

}  // namespace sprintnet::cuda::skinny_detail
