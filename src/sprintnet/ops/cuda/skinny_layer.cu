// The output layer of a classifier, when it has few outputs (MNIST's 10): a
// product with 10 columns is too thin for cuBLAS's tiles (its kernels wait on
// latency, and its epilogues run as extra kernels), so these kernels fuse the
// product with its neighbours. Deterministic: every sum has a fixed order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "sprintnet/ops/cuda/element_access.cuh"
#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

constexpr int kForwardThreads = 256;
constexpr int kForwardWarps = kForwardThreads / kWarpSize;

__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float to_float(__half v) { return __half2float(v); }
template <typename T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) { return v; }
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ inline __half from_float<__half>(float v) { return __float2half_rn(v); }
__device__ inline float round_to(float v, const float*) { return v; }
__device__ inline float round_to(float v, const __nv_bfloat16*) { return __bfloat162float(__float2bfloat16_rn(v)); }
__device__ inline float round_to(float v, const __half*) { return __half2float(__float2half_rn(v)); }

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

// The first row of the current step's batch in the epoch's order.
__device__ inline std::int64_t batch_first_row(const GatherArgs& g) {
  return (g.state != nullptr ? g.state->step % g.steps_per_epoch : 0) * (g.stride > 0 ? g.stride : g.rows) + g.first;
}
// Row `row` of the step's batch: its sample index in the data set.
__device__ inline std::int64_t batch_sample(const GatherArgs& g, std::int64_t first, std::int64_t row) {
  return g.order != nullptr ? g.order[first + row] : first + row;
}
// A gathered input value, normalised and rounded to T exactly as batch_gather.cu stores it.
template <typename T>
__device__ inline float gathered_value(const GatherArgs& g, const std::uint8_t* row, std::int64_t f) {
  return round_to(static_cast<float>(row[f]) * g.scale + g.shift, static_cast<const T*>(nullptr));
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
    logit = round_to(v, static_cast<const T*>(nullptr));
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
  const float logit_sum = warp_sum(active ? logit : 0.0f);
  const float target_logit = __shfl_sync(kFullWarpMask, logit, label);
  const float log_sum_exp = max_logit + logf(exp_sum);
  const float off_target = a.smoothing / static_cast<float>(a.classes);
  if (lane == 0) {
    a.block_loss[row] = static_cast<double>(log_sum_exp) - (1.0 - a.smoothing) * static_cast<double>(target_logit) -
                        static_cast<double>(off_target) * static_cast<double>(logit_sum);
    a.block_correct[row] = max_index == label ? 1 : 0;
  }
  if (a.dlogits != nullptr && active) {
    const float scale = a.grad_scale * (a.state != nullptr ? a.state->loss_scale : 1.0f);
    const float target = (lane == label ? 1.0f - a.smoothing : 0.0f) + off_target;
    a.dlogits[row * a.classes + lane] = scale * (expf(logit - log_sum_exp) - target);
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

// One block per row: its 8 warps split the inputs, each lane keeping kC partial sums (classes
// rounded up to kC; the rows past the last class read the last row again, so the hot loop has no
// branch and its loads issue together); the warps' sums meet in shared memory in warp order; warp 0
// then owns the row, lane c class c, for the softmax. kWide (many rows of whole 4-element vectors:
// wide()): four inputs a thread an iteration, only the real classes, and the threads' sums added
// through shared memory (a warp a class) instead of a butterfly per class in every warp. (A warp
// a row, 8 rows a block, measured slower at 4096 inputs: 100 us against 70 a step.) Each row's loss
// and hit go to scratch, and the last block to finish adds them in row order (a fixed tree), so the
// sums are deterministic.
template <typename T, int kC, bool kGathered, bool kWide>
__global__ void __launch_bounds__(kForwardThreads) skinny_forward_kernel(SkinnyForwardArgs a) {
  __shared__ float sums[kForwardWarps][kC];
  __shared__ float parts[kWide ? kC : 1][kWide ? kForwardThreads : 1];  // kWide: each thread's sums
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t row = blockIdx.x;
  if constexpr (kWide) {
    float acc[kC];
#pragma unroll
    for (int c = 0; c < kC; ++c) acc[c] = 0.0f;
    const T* x_row = x + row * a.in;
    for (std::int64_t f = 4 * static_cast<std::int64_t>(threadIdx.x); f < a.in; f += 4 * kForwardThreads) {
      float xv[4];
      load4(x_row + f, xv);
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        if (c < a.classes) {
          float wv[4];
          load4(w + c * a.in + f, wv);
          acc[c] += xv[0] * wv[0] + xv[1] * wv[1] + xv[2] * wv[2] + xv[3] * wv[3];
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      if (c < a.classes) parts[c][threadIdx.x] = acc[c];
    }
    __syncthreads();
    // Warp w adds classes w, w + 8, ...: each lane 8 threads' sums in order, then the warp's tree.
    for (int c = warp; c < a.classes; c += kForwardWarps) {
      float v = 0.0f;
#pragma unroll
      for (int i = 0; i < kForwardWarps; ++i) v += parts[c][lane + i * kWarpSize];
      v = warp_sum(v);
      if (lane == 0) sums[0][c] = v;
    }
    __syncthreads();
    if (warp == 0) finish_row<T, kGathered>(a, row, lane < a.classes ? sums[0][lane] : 0.0f, lane);
  } else {
    const T* w_rows[kC];
#pragma unroll
    for (int c = 0; c < kC; ++c) w_rows[c] = w + static_cast<std::int64_t>(c < a.classes ? c : a.classes - 1) * a.in;
    float acc[kC];
#pragma unroll
    for (int c = 0; c < kC; ++c) acc[c] = 0.0f;
    const T* x_row = x + row * a.in;
    const std::uint8_t* u8_row = nullptr;
    if constexpr (kGathered) {
      u8_row = a.source.images + batch_sample(a.source, batch_first_row(a.source), row) * a.in;
    }
#pragma unroll 2
    for (std::int64_t f = threadIdx.x; f < a.in; f += kForwardThreads) {
      float xv;
      if constexpr (kGathered) {
        xv = gathered_value<T>(a.source, u8_row, f);
      } else {
        xv = to_float(x_row[f]);
      }
#pragma unroll
      for (int c = 0; c < kC; ++c) acc[c] += xv * to_float(w_rows[c][f]);
    }
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      const float v = warp_sum(acc[c]);
      if (lane == 0) sums[warp][c] = v;
    }
    __syncthreads();
    if (warp == 0) {
      float product = 0.0f;
      if (lane < a.classes) {
        for (int i = 0; i < kForwardWarps; ++i) product += sums[i][lane];
      }
      finish_row<T, kGathered>(a, row, product, lane);
    }
  }
  add_forward_row_sums<kForwardThreads>(a);
}

// ---- the forward of a wide 16-bit layer on the tensor cores (mma.sync m16n8k16, fp32 sums): the
// FMA kernels above spend ~10 K instructions a row at 4096 inputs (a multiply, a conversion and a
// load from L1 for each input and class, then the block's sums), which bound them at 5-7x their
// memory time; one mma does 16 rows x 8 classes x 16 inputs. A block owns 16 rows; its 8 warps take
// the inputs in interleaved chunks of 32 and meet in shared memory, in warp order. (H100, 4096 rows
// of 4096: 60 -> 25 us; docs/PERFORMANCE.md, "The output layer on the tensor cores".)
//
// Fragments straight from global memory, 16 bytes a thread: lane (g, t) = (lane / 4, lane % 4) reads
// inputs 8t..8t+7 of a chunk from rows g and g + 8 of x and from class 8j + g of w for tile j. The mma
// sees them as two k-steps of 16: its column 2t + {0,1} is input 8t + {0,1} (then 8t + {4,5}),
// column 2t + 8 + {0,1} is 8t + {2,3} (then 8t + {6,7}). A and B use the same map, so the sum is
// the product's. Rows past the last read the last row; classes past the last read the last class
// (their sums are never used); chunks past `in` read zeros.
constexpr int kMmaWarps = 8;
constexpr int kMmaRows = 16;
constexpr int kMmaChunk = 32;

template <typename T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                            std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint4 load16_or_zero(const void* p, bool valid) {
  return valid ? *static_cast<const uint4*>(p) : make_uint4(0u, 0u, 0u, 0u);
}

template <typename T, int kTiles>  // kTiles: classes in tiles of 8
__global__ void __launch_bounds__(kMmaWarps * kWarpSize) skinny_forward_mma_kernel(SkinnyForwardArgs a) {
  __shared__ float parts[kMmaWarps][kTiles * 4][kWarpSize];  // each warp's accumulators
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kMmaRows;
  const auto clamp_row = [&](std::int64_t r) { return r < a.rows ? r : a.rows - 1; };
  const T* x_lo = x + clamp_row(row0 + g) * a.in + 8 * t;
  const T* x_hi = x + clamp_row(row0 + g + 8) * a.in + 8 * t;
  const T* w_rows[kTiles];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const int c = 8 * j + g;
    w_rows[j] = w + static_cast<std::int64_t>(c < a.classes ? c : a.classes - 1) * a.in + 8 * t;
  }
  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
  }
#pragma unroll 4
  for (std::int64_t k = static_cast<std::int64_t>(warp) * kMmaChunk; k < a.in; k += kMmaWarps * kMmaChunk) {
    const bool valid = k + 8 * t < a.in;
    const uint4 lo = load16_or_zero(x_lo + k, valid), hi = load16_or_zero(x_hi + k, valid);
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const uint4 b = load16_or_zero(w_rows[j] + k, valid);
      mma_16x8x16<T>(acc[j], lo.x, hi.x, lo.y, hi.y, b.x, b.y);
      mma_16x8x16<T>(acc[j], lo.z, hi.z, lo.w, hi.w, b.z, b.w);
    }
  }
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) parts[warp][j * 4 + i][lane] = acc[j][i];
  }
  __syncthreads();
  // Warp w finishes rows 2w and 2w + 1, lane c class c: accumulator (row r, class c) is register
  // (c % 2) + 2 (r / 8) of tile c / 8 in lane (r % 8) * 4 + (c % 8) / 2; the warps' parts in order.
  for (int r = 2 * warp; r < 2 * warp + 2; ++r) {
    const std::int64_t row = row0 + r;
    if (row >= a.rows) break;  // the same for the whole warp
    float product = 0.0f;
    if (lane < a.classes) {
      const int reg = (lane / 8) * 4 + (lane % 2) + 2 * (r / 8), holder = (r % 8) * 4 + (lane % 8) / 2;
#pragma unroll
      for (int i = 0; i < kMmaWarps; ++i) product += parts[i][reg][holder];
    }
    finish_row<T, false>(a, row, product, lane);
  }
  add_forward_row_sums<kMmaWarps * kWarpSize>(a);
}

constexpr int kGradWarps = 8;
constexpr int kRowChunk = 64;

// A block owns 32 input features (one per lane); its 8 warps split the rows, each thread keeping
// kC sums for its feature; the warps' sums are then added in warp order (deterministic). The
// output gradient passes through shared memory a chunk of rows at a time.
template <typename T, int kC, bool kGathered, bool kUpdate>
__global__ void __launch_bounds__(kGradWarps * kWarpSize)
    skinny_weight_grad_kernel(const float* dlogits, int classes, const T* x, std::int64_t rows, std::int64_t in,
                              T* dw, T* dbias, GatherArgs source, FusedUpdate update, RowSums sums) {
  __shared__ BlockScalars scalars;
  // With RowSums, one extra block (the last) adds the forward's row sums while the others work.
  if (sums.metrics != nullptr && blockIdx.x == gridDim.x - 1) {
    add_row_sums<kGradWarps * kWarpSize>(sums);
    if constexpr (kUpdate) {
      if (threadIdx.x == 0) {
        const BlockScalars unused = block_scalars(update.args);  // read before counting in, like every block
        finish_update_block(update.args, unused);
      }
    }
    return;
  }
  if constexpr (kUpdate) {
    if (threadIdx.x == 0) scalars = block_scalars(update.args);  // read before any block advances the state
  }
  __shared__ float dz[kRowChunk * kSkinnyMaxOutputs + kC];  // + kC: the clamped reads past the last class
  __shared__ float partial[kGradWarps][kC][kWarpSize];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t f = static_cast<std::int64_t>(blockIdx.x) * kWarpSize + lane;
  const bool has_bias = kUpdate ? update.bias_offset >= 0 : dbias != nullptr;
  const bool bias_thread = has_bias && blockIdx.x == 0 && warp == 0 && lane < classes;
  float acc[kC];
#pragma unroll
  for (int c = 0; c < kC; ++c) acc[c] = 0.0f;
  float bias_acc = 0.0f;
  for (std::int64_t start = 0; start < rows; start += kRowChunk) {
    const int chunk = static_cast<int>(rows - start < kRowChunk ? rows - start : kRowChunk);
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.x); i < chunk * classes + kC; i += kGradWarps * kWarpSize) {
      dz[i] = i < chunk * classes ? dlogits[start * classes + i] : 0.0f;
    }
    __syncthreads();
    if (bias_thread) {
      for (int r = 0; r < chunk; ++r) bias_acc += dz[r * classes + lane];
    }
    if (f < in) {
#pragma unroll 4
      for (int r = warp; r < chunk; r += kGradWarps) {
        float xv;
        if constexpr (kGathered) {
          const std::int64_t sample = batch_sample(source, batch_first_row(source), start + r);
          xv = gathered_value<T>(source, source.images + sample * in, f);
        } else {
          xv = to_float(x[(start + r) * in + f]);
        }
        const float* dz_row = dz + r * classes;
#pragma unroll
        for (int c = 0; c < kC; ++c) acc[c] += dz_row[c] * xv;
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kC; ++c) partial[warp][c][lane] = acc[c];
  __syncthreads();
  // Warp w writes the classes c = w, w + 8, ...: each a sum over the 8 warps in order.
  if (f < in) {
    for (int c = warp; c < classes; c += kGradWarps) {
      float sum = 0.0f;
      for (int i = 0; i < kGradWarps; ++i) sum += partial[i][c][lane];
      if constexpr (kUpdate) {
        update_element(update.args, scalars, update.weight_offset + c * in + f, to_float(from_float<T>(sum)));
      } else {
        dw[c * in + f] = from_float<T>(sum);
      }
    }
  }
  if (bias_thread) {
    if constexpr (kUpdate) {
      update_element(update.args, scalars, update.bias_offset + lane, to_float(from_float<T>(bias_acc)));
    } else {
      dbias[lane] = from_float<T>(bias_acc);
    }
  }
  if constexpr (kUpdate) {
    __syncthreads();
    if (threadIdx.x == 0) finish_update_block(update.args, scalars);
  }
}

template <int kC, bool kGathered, bool kWide = false>
cudaError_t launch_forward_for(const SkinnyForwardArgs& a, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(skinny_forward_blocks(a.rows));
  switch (a.type) {
    case ElementType::kBF16:
      skinny_forward_kernel<__nv_bfloat16, kC, kGathered, kWide><<<blocks, kForwardThreads, 0, stream>>>(a);
      break;
    case ElementType::kF16:
      skinny_forward_kernel<__half, kC, kGathered, kWide><<<blocks, kForwardThreads, 0, stream>>>(a);
      break;
    case ElementType::kF32:
      skinny_forward_kernel<float, kC, kGathered, kWide><<<blocks, kForwardThreads, 0, stream>>>(a);
      break;
  }
  return cudaGetLastError();
}

// The wide kernels take products of at least this many input elements (rows x in): on the H100 they
// were faster from 4x784x1024 (800 K) and 4x4096x128 (520 K) up, slower at 4x784x128 and below (the
// narrow ones' per-row butterflies and single pass win where there is little to read), so below it
// the narrow kernels run (docs/PERFORMANCE.md, "The output layer at large batches").
constexpr std::int64_t kWideElements = std::int64_t{256} * 1024;

bool wide(std::int64_t rows, std::int64_t in) { return rows * in >= kWideElements; }
// vectorizable() for an element type known at run time.
bool vectorizable_as(ElementType type, const void* p, std::int64_t in) {
  return type == ElementType::kF32 ? vectorizable<float>(p, in) : vectorizable<__nv_bfloat16>(p, in);
}

// The tensor-core kernels (the forward, and the bf16 input gradient), unless SPRINTNET_SKINNY_MMA=0
// (kernel lab: the FMA kernels they replaced).
bool skinny_tensor_cores() {
  static const bool on = [] {
    const char* v = std::getenv("SPRINTNET_SKINNY_MMA");
    return v == nullptr || std::string_view(v) != "0";
  }();
  return on;
}

cudaError_t launch_forward_mma(const SkinnyForwardArgs& a, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((a.rows + kMmaRows - 1) / kMmaRows);
  constexpr int threads = kMmaWarps * kWarpSize;
  const auto typed = [&](auto tiles) {
    constexpr int kTiles = decltype(tiles)::value;
    if (a.type == ElementType::kBF16) {
      skinny_forward_mma_kernel<__nv_bfloat16, kTiles><<<blocks, threads, 0, stream>>>(a);
    } else {
      skinny_forward_mma_kernel<__half, kTiles><<<blocks, threads, 0, stream>>>(a);
    }
    return cudaGetLastError();
  };
  if (a.classes <= 8) return typed(std::integral_constant<int, 1>{});
  if (a.classes <= 16) return typed(std::integral_constant<int, 2>{});
  return typed(std::integral_constant<int, 4>{});
}

template <int kC, bool kGathered, bool kUpdate>
cudaError_t launch_weight_grad_for(const float* dlogits, int classes, const void* x, ElementType type,
                                   std::int64_t rows, std::int64_t in, void* dw, void* dbias, const GatherArgs& source,
                                   const FusedUpdate& update, const RowSums& sums, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((in + kWarpSize - 1) / kWarpSize + (sums.metrics != nullptr ? 1 : 0));
  constexpr int threads = kGradWarps * kWarpSize;
  switch (type) {
    case ElementType::kBF16:
      skinny_weight_grad_kernel<__nv_bfloat16, kC, kGathered, kUpdate><<<blocks, threads, 0, stream>>>(
          dlogits, classes, static_cast<const __nv_bfloat16*>(x), rows, in, static_cast<__nv_bfloat16*>(dw),
          static_cast<__nv_bfloat16*>(dbias), source, update, sums);
      break;
    case ElementType::kF16:
      skinny_weight_grad_kernel<__half, kC, kGathered, kUpdate><<<blocks, threads, 0, stream>>>(
          dlogits, classes, static_cast<const __half*>(x), rows, in, static_cast<__half*>(dw),
          static_cast<__half*>(dbias), source, update, sums);
      break;
    case ElementType::kF32:
      skinny_weight_grad_kernel<float, kC, kGathered, kUpdate><<<blocks, threads, 0, stream>>>(
          dlogits, classes, static_cast<const float*>(x), rows, in, static_cast<float*>(dw),
          static_cast<float*>(dbias), source, update, sums);
      break;
  }
  return cudaGetLastError();
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

// The same four elements a thread (rows of whole vectors): a quarter of the loads of w and of the
// ReLU output, the same sums in the same order as the scalar kernel.
template <typename T>
__global__ void skinny_input_grad_vec_kernel(const float* dlogits, int classes, const T* w, std::int64_t rows,
                                             std::int64_t in, const T* relu_out, T* dx) {
  const std::int64_t per_row = in / 4, count = rows * per_row;
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) {
    const std::int64_t r = i / per_row, f = (i % per_row) * 4;
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int c = 0; c < classes; ++c) {
      const float d = __ldg(dlogits + r * classes + c);
      float wv[4];
      load4(w + c * in + f, wv);
#pragma unroll
      for (int j = 0; j < 4; ++j) sum[j] += d * wv[j];
    }
    if (relu_out != nullptr) {
      float y[4];
      load4(relu_out + r * in + f, y);
#pragma unroll
      for (int j = 0; j < 4; ++j) sum[j] = y[j] > 0.0f ? sum[j] : 0.0f;
    }
    store4(dx + r * in + f, sum);
  }
}

// ---- the input gradient of a wide bf16 layer on the tensor cores: dX = dlogits W, K = the classes
// (at most 16, padded with zeros). The FMA kernel spends a load, a conversion and four multiplies
// on each class of every four outputs (~50 us for 4096 x 4096 on the H100, 2.7x its memory time).
// dlogits are fp32: each is split into a bf16 part and the bf16 of what that leaves (hi + lo carries
// 16 of its 24 bits, error 2^-17 relative, far below the bf16 output's 2^-9), and both go through
// the mma into fp32 sums. A warp owns 64 features (their W fragments: 8 tiles of 8) of a tile of 16
// rows (more in a grid-stride loop past 65535 tiles); the tile's 16 x 64 sums pass through the warp's
// own shared memory so every lane finishes 16 contiguous bytes of a row (mask, round, store).
constexpr int kIgWarps = 4;
constexpr int kIgFeatures = 64;
constexpr int kIgPad = 4;  // floats after each row of the staging tile, against bank conflicts

__device__ __forceinline__ std::uint32_t pack_bf16(float lo_half, float hi_half) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo_half, hi_half);  // .x (low 16 bits) = lo_half
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

__global__ void __launch_bounds__(kIgWarps * kWarpSize)
    skinny_input_grad_mma_kernel(const float* dlogits, int classes, const __nv_bfloat16* w, std::int64_t rows,
                                 std::int64_t in, const __nv_bfloat16* relu_out, __nv_bfloat16* dx) {
  __shared__ float tile[kIgWarps][kMmaRows][kIgFeatures + kIgPad];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const std::int64_t f0 = (static_cast<std::int64_t>(blockIdx.x) * kIgWarps + warp) * kIgFeatures;
  if (f0 >= in) return;  // the warps share no barrier
  // B(k, n) = W[k][f0 + 8j + n]: b0 holds classes 2t, 2t + 1 of feature g, b1 classes 2t + 8, 2t + 9.
  const auto weight = [&](int c, std::int64_t f) {
    return c < classes && f < in ? __bfloat162float(w[c * in + f]) : 0.0f;
  };
  std::uint32_t b[kIgFeatures / 8][2];
#pragma unroll
  for (int j = 0; j < kIgFeatures / 8; ++j) {
    const std::int64_t f = f0 + 8 * j + g;
    b[j][0] = pack_bf16(weight(2 * t, f), weight(2 * t + 1, f));
    b[j][1] = pack_bf16(weight(2 * t + 8, f), weight(2 * t + 9, f));
  }
  const auto grad = [&](std::int64_t r, int c) { return r < rows && c < classes ? __ldg(dlogits + r * classes + c) : 0.0f; };
  constexpr int kVectors = kMmaRows * (kIgFeatures / 8) / kWarpSize;  // 16-byte pieces a lane finishes
  for (std::int64_t first = static_cast<std::int64_t>(blockIdx.y) * kMmaRows; first < rows;
       first += static_cast<std::int64_t>(gridDim.y) * kMmaRows) {
    // The ReLU output this lane will need, loaded first: its latency hides behind the products.
    uint4 mask[kVectors];
#pragma unroll
    for (int i = 0; i < kVectors; ++i) {
      const int vec = lane + kWarpSize * i, r = vec / (kIgFeatures / 8), c = (vec % (kIgFeatures / 8)) * 8;
      const std::int64_t row = first + r, f = f0 + c;
      mask[i] = relu_out != nullptr && row < rows && f < in ? *reinterpret_cast<const uint4*>(relu_out + row * in + f)
                                                            : make_uint4(0u, 0u, 0u, 0u);
    }
    // A: a0 (row g, classes 2t, 2t + 1), a1 (row g + 8), a2 (row g, classes 2t + 8, 2t + 9), a3 (row g + 8).
    const float v[8] = {grad(first + g, 2 * t),         grad(first + g, 2 * t + 1),
                        grad(first + g + 8, 2 * t),     grad(first + g + 8, 2 * t + 1),
                        grad(first + g, 2 * t + 8),     grad(first + g, 2 * t + 9),
                        grad(first + g + 8, 2 * t + 8), grad(first + g + 8, 2 * t + 9)};
    std::uint32_t hi[4], lo[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float h0 = __bfloat162float(__float2bfloat16_rn(v[2 * i]));
      const float h1 = __bfloat162float(__float2bfloat16_rn(v[2 * i + 1]));
      hi[i] = pack_bf16(h0, h1);
      lo[i] = pack_bf16(v[2 * i] - h0, v[2 * i + 1] - h1);
    }
    __syncwarp();  // the previous tile's reads of the staging tile are done
#pragma unroll
    for (int j = 0; j < kIgFeatures / 8; ++j) {
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mma_16x8x16<__nv_bfloat16>(acc, hi[0], hi[1], hi[2], hi[3], b[j][0], b[j][1]);
      mma_16x8x16<__nv_bfloat16>(acc, lo[0], lo[1], lo[2], lo[3], b[j][0], b[j][1]);
      *reinterpret_cast<float2*>(&tile[warp][g][8 * j + 2 * t]) = make_float2(acc[0], acc[1]);
      *reinterpret_cast<float2*>(&tile[warp][g + 8][8 * j + 2 * t]) = make_float2(acc[2], acc[3]);
    }
    __syncwarp();
    // 16 rows x 8 pieces of 8 features: four a lane, eight lanes a row.
#pragma unroll
    for (int i = 0; i < kVectors; ++i) {
      const int vec = lane + kWarpSize * i, r = vec / (kIgFeatures / 8), c = (vec % (kIgFeatures / 8)) * 8;
      const std::int64_t row = first + r, f = f0 + c;
      if (row < rows && f < in) {
        const float4 s0 = *reinterpret_cast<const float4*>(&tile[warp][r][c]);
        const float4 s1 = *reinterpret_cast<const float4*>(&tile[warp][r][c + 4]);
        float sum[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
        if (relu_out != nullptr) {
          const __nv_bfloat16* y = reinterpret_cast<const __nv_bfloat16*>(&mask[i]);
#pragma unroll
          for (int e = 0; e < 8; ++e) sum[e] = __bfloat162float(y[e]) > 0.0f ? sum[e] : 0.0f;
        }
        const uint4 out = make_uint4(pack_bf16(sum[0], sum[1]), pack_bf16(sum[2], sum[3]),
                                     pack_bf16(sum[4], sum[5]), pack_bf16(sum[6], sum[7]));
        *reinterpret_cast<uint4*>(dx + row * in + f) = out;
      }
    }
  }
}

// ---- the weight gradient of a wide layer (no gather, no fused update; bf16 with up to 16 classes
// takes the tensor-core kernel below): a block owns 128 input features (four a lane) and one of
// `splits` slices of the rows; its 8 warps split the slice's rows,
// each thread keeping 4 x kC sums; the warps' sums are added in warp order in shared memory. With
// several slices each block stores its sums in scratch and the last block of its features (a
// counter) adds the slices in order: every sum has a fixed order. One more block adds the bias
// gradient (and the forward's row sums).
constexpr int kSplitFeatures = 4 * kWarpSize;

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

template <typename T, int kC>
__global__ void __launch_bounds__(kGradWarps * kWarpSize)
    skinny_weight_grad_split_kernel(const float* dlogits, int classes, const T* x, std::int64_t rows,
                                    std::int64_t in, T* dw, T* dbias, RowSums sums, SkinnyScratch scratch,
                                    int splits) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int groups = static_cast<int>((in + kSplitFeatures - 1) / kSplitFeatures);
  if (static_cast<int>(blockIdx.x) == groups * splits) {
    bias_grad_block(dlogits, classes, rows, dbias, sums);
    return;
  }
  const int group = static_cast<int>(blockIdx.x) % groups, split = static_cast<int>(blockIdx.x) / groups;
  const std::int64_t per_split = (rows + splits - 1) / splits;
  const std::int64_t first = split * per_split, last = first + per_split < rows ? first + per_split : rows;
  const std::int64_t f = static_cast<std::int64_t>(group) * kSplitFeatures + 4 * lane;
  const bool vec = vectorizable<T>(x, in);
  __shared__ float dz[kRowChunk * kSkinnyMaxOutputs];
  __shared__ float4 block_sum[kC][kWarpSize];  // the warps' sums, feature 4 lane + j in component j
  float acc[kC][4];
#pragma unroll
  for (int c = 0; c < kC; ++c) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[c][j] = 0.0f;
  }
  for (std::int64_t start = first; start < last; start += kRowChunk) {
    const int chunk = static_cast<int>(last - start < kRowChunk ? last - start : kRowChunk);
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.x); i < chunk * classes; i += kGradWarps * kWarpSize) {
      dz[i] = dlogits[start * classes + i];
    }
    __syncthreads();
    if (f < in) {
      for (int r = warp; r < chunk; r += kGradWarps) {
        const T* x_row = x + (start + r) * in + f;
        float xv[4];
        if (vec) {
          load4(x_row, xv);
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) xv[j] = f + j < in ? to_float(x_row[j]) : 0.0f;
        }
        const float* dz_row = dz + r * classes;
#pragma unroll
        for (int c = 0; c < kC; ++c) {
          if (c < classes) {
            const float d = dz_row[c];
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[c][j] += d * xv[j];
          }
        }
      }
    }
  }
  for (int i = 0; i < kGradWarps; ++i) {
    if (warp == i) {
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        if (c < classes) {
          const float4 before = i == 0 ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : block_sum[c][lane];
          block_sum[c][lane] = make_float4(before.x + acc[c][0], before.y + acc[c][1], before.z + acc[c][2],
                                           before.w + acc[c][3]);
        }
      }
    }
    __syncthreads();
  }
  store_weight_grad_block<T, kC>(block_sum, classes, in, group, split, splits, dw, scratch);
}

// ---- the weight gradient of a wide bf16 layer on the tensor cores: dW^T = X^T dlogits, M = the
// block's 128 features (a tile of 16 a warp), N = the classes (tiles of 8), K = its slice of rows.
// The FMA kernel above does a conversion and kC multiplies per input element and row; this one stages
// 64 rows of its features in shared memory (16 bytes a thread), reads them transposed into A
// fragments with ldmatrix.trans, and the chunk's dlogits split into bf16 hi + lo (as the input
// gradient, error 2^-17) and transposed into B fragments. The warps' tiles meet in the same
// block_sum layout as the FMA kernel's, and the same slices, counters and extra block follow.
// (H100, 4096 rows of 4096: 63 -> 39 us.)
constexpr int kWgChunk = 64;       // rows staged at a time
constexpr int kWgPad = 8;          // bf16 after each staged row (ldmatrix reads 8 rows without bank conflicts)
constexpr int kWgDPad = 8;         // bf16 after each class row of the transposed dlogits

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&a)[4], const void* p) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(address));
}

template <int kC>
__global__ void __launch_bounds__(kGradWarps * kWarpSize)
    skinny_weight_grad_mma_kernel(const float* dlogits, int classes, const __nv_bfloat16* x, std::int64_t rows,
                                  std::int64_t in, __nv_bfloat16* dw, __nv_bfloat16* dbias, RowSums sums,
                                  SkinnyScratch scratch, int splits) {
  constexpr int kTiles = kC / 8;
  __shared__ __align__(16) __nv_bfloat16 xs[kWgChunk][kSplitFeatures + kWgPad];
  __shared__ __align__(16) __nv_bfloat16 d_hi[kC][kWgChunk + kWgDPad];
  __shared__ __align__(16) __nv_bfloat16 d_lo[kC][kWgChunk + kWgDPad];
  __shared__ float4 block_sum[kC][kWarpSize];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int groups = static_cast<int>((in + kSplitFeatures - 1) / kSplitFeatures);
  if (static_cast<int>(blockIdx.x) == groups * splits) {
    bias_grad_block(dlogits, classes, rows, dbias, sums);
    return;
  }
  const int group = static_cast<int>(blockIdx.x) % groups, split = static_cast<int>(blockIdx.x) / groups;
  const std::int64_t per_split = (rows + splits - 1) / splits;
  const std::int64_t first = split * per_split, last = first + per_split < rows ? first + per_split : rows;
  const std::int64_t f0 = static_cast<std::int64_t>(group) * kSplitFeatures;
  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
  }
  for (std::int64_t start = first; start < last; start += kWgChunk) {
    __syncthreads();  // the previous chunk's fragments are read
    // X: 64 rows x 128 features, 16 bytes a thread a pass; rows past the slice and features past
    // `in` are zeros.
    for (int i = static_cast<int>(threadIdx.x); i < kWgChunk * (kSplitFeatures / 8); i += kGradWarps * kWarpSize) {
      const int r = i / (kSplitFeatures / 8), c = (i % (kSplitFeatures / 8)) * 8;
      const std::int64_t row = start + r, f = f0 + c;
      *reinterpret_cast<uint4*>(&xs[r][c]) = row < last && f < in
                                                 ? __ldg(reinterpret_cast<const uint4*>(x + row * in + f))
                                                 : make_uint4(0u, 0u, 0u, 0u);
    }
    // dlogits, transposed to [class][row], split into hi and lo.
    for (int i = static_cast<int>(threadIdx.x); i < kWgChunk * kC; i += kGradWarps * kWarpSize) {
      const int r = i / kC, c = i % kC;
      const std::int64_t row = start + r;
      const float v = row < last && c < classes ? dlogits[row * classes + c] : 0.0f;
      const __nv_bfloat16 hi = __float2bfloat16_rn(v);
      d_hi[c][r] = hi;
      d_lo[c][r] = __float2bfloat16_rn(v - __bfloat162float(hi));
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kWgChunk; k += 16) {
      // A(m, k) = X[k][m] for the warp's 16 features: matrices (m 0-7, k 0-7), (m 8-15, k 0-7),
      // (m 0-7, k 8-15), (m 8-15, k 8-15), lanes 8j..8j+7 giving matrix j's rows.
      const int j = lane / 8, r = lane % 8;
      std::uint32_t a[4];
      ldmatrix_x4_trans(a, &xs[k + (j >> 1) * 8 + r][warp * 16 + (j & 1) * 8]);
#pragma unroll
      for (int n = 0; n < kTiles; ++n) {
        // B(k, n) = dlogits[k][8 tile + n]: b0 rows 2t, 2t + 1 of class g, b1 rows 2t + 8, 2t + 9.
        const int c = 8 * n + g;
        const auto word = [&](const __nv_bfloat16 (*d)[kWgChunk + kWgDPad], int row) {
          return *reinterpret_cast<const std::uint32_t*>(&d[c][row]);
        };
        mma_16x8x16<__nv_bfloat16>(acc[n], a[0], a[1], a[2], a[3], word(d_hi, k + 2 * t), word(d_hi, k + 2 * t + 8));
        mma_16x8x16<__nv_bfloat16>(acc[n], a[0], a[1], a[2], a[3], word(d_lo, k + 2 * t), word(d_lo, k + 2 * t + 8));
      }
    }
  }
  // acc[n]: (feature 16 warp + g, classes 8n + 2t, 8n + 2t + 1), then feature + 8: into block_sum's
  // [class][feature] layout.
  float* sums_by_class = reinterpret_cast<float*>(block_sum);
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    const int c = 8 * n + 2 * t, m = warp * 16 + g;
    sums_by_class[c * kSplitFeatures + m] = acc[n][0];
    sums_by_class[(c + 1) * kSplitFeatures + m] = acc[n][1];
    sums_by_class[c * kSplitFeatures + m + 8] = acc[n][2];
    sums_by_class[(c + 1) * kSplitFeatures + m + 8] = acc[n][3];
  }
  __syncthreads();
  store_weight_grad_block<__nv_bfloat16, kC>(block_sum, classes, in, group, split, splits, dw, scratch);
}

}  // namespace

SkinnySplit skinny_weight_grad_split(std::int64_t rows, std::int64_t in) {
  SkinnySplit split;
  split.groups = (in + kSplitFeatures - 1) / kSplitFeatures;
  // About two blocks an SM of a 132-SM GPU, each warp keeping at least 8 rows.
  const std::int64_t wanted = std::max<std::int64_t>(1, 264 / split.groups);
  split.splits = wide(rows, in) ? std::max<std::int64_t>(1, std::min({wanted, std::int64_t{16}, rows / (8 * kGradWarps)}))
                                : 1;  // the narrow kernel takes no slices
  split.scratch_floats = split.splits > 1 ? split.splits * kSkinnyMaxOutputs * in : 0;
  return split;
}

std::int64_t skinny_forward_blocks(std::int64_t rows) { return rows; }

cudaError_t launch_skinny_forward_cross_entropy(const SkinnyForwardArgs& args, cudaStream_t stream) {
  if (args.classes < 1 || args.classes > kSkinnyMaxOutputs) return cudaErrorInvalidValue;
  if (args.rows == 0) return cudaSuccess;
  const NvtxRange range("skinny_forward_cross_entropy");
  if (args.gathered) {
    return args.classes <= 16 ? launch_forward_for<16, true>(args, stream) : launch_forward_for<32, true>(args, stream);
  }
  // The tensor cores from 64 blocks of 16 rows up (at 512 rows, 32 blocks, the FMA kernel's 512 were faster).
  if (args.type != ElementType::kF32 && wide(args.rows, args.in) && args.rows >= 64 * kMmaRows && args.in % 8 == 0 &&
      reinterpret_cast<std::uintptr_t>(args.x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(args.w) % 16 == 0 &&
      skinny_tensor_cores()) {
    return launch_forward_mma(args, stream);
  }
  if (wide(args.rows, args.in) && vectorizable_as(args.type, args.x, args.in) &&
      vectorizable_as(args.type, args.w, args.in)) {
    return args.classes <= 16 ? launch_forward_for<16, false, true>(args, stream)
                              : launch_forward_for<32, false, true>(args, stream);
  }
  return args.classes <= 16 ? launch_forward_for<16, false>(args, stream) : launch_forward_for<32, false>(args, stream);
}

cudaError_t launch_skinny_weight_grad(const float* dlogits, int classes, const void* x, ElementType type,
                                      std::int64_t rows, std::int64_t in, void* dw, void* dbias,
                                      cudaStream_t stream, const GatherArgs* source, const FusedUpdate* update,
                                      const RowSums* row_sums, SkinnyScratch scratch) {
  if (classes < 1 || classes > kSkinnyMaxOutputs) return cudaErrorInvalidValue;
  if (in == 0) return cudaSuccess;
  const NvtxRange range("skinny_weight_grad");
  const GatherArgs no_source{};
  const GatherArgs& src = source != nullptr ? *source : no_source;
  const FusedUpdate no_update{};
  const FusedUpdate& up = update != nullptr ? *update : no_update;
  const RowSums no_sums{};
  const RowSums& rs = row_sums != nullptr ? *row_sums : no_sums;
  if (source == nullptr && update == nullptr && wide(rows, in)) {
    // A stored input and a stored gradient: the wide kernel, its rows in slices where scratch is given.
    const SkinnySplit plan = skinny_weight_grad_split(rows, in);
    const int splits = scratch.partials != nullptr ? static_cast<int>(plan.splits) : 1;
    const auto blocks = static_cast<unsigned>(plan.groups * splits + 1);
    constexpr int threads = kGradWarps * kWarpSize;
    if (type == ElementType::kBF16 && classes <= 16 && in % 8 == 0 &&
        reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && skinny_tensor_cores()) {
      const auto launch_mma = [&](auto kc) {
        skinny_weight_grad_mma_kernel<decltype(kc)::value><<<blocks, threads, 0, stream>>>(
            dlogits, classes, static_cast<const __nv_bfloat16*>(x), rows, in, static_cast<__nv_bfloat16*>(dw),
            static_cast<__nv_bfloat16*>(dbias), rs, scratch, splits);
        return cudaGetLastError();
      };
      return classes <= 8 ? launch_mma(std::integral_constant<int, 8>{}) : launch_mma(std::integral_constant<int, 16>{});
    }
    const auto launch_sliced = [&](auto kc, auto* type_tag) {
      constexpr int kC = decltype(kc)::value;
      using T = std::remove_pointer_t<decltype(type_tag)>;
      skinny_weight_grad_split_kernel<T, kC><<<blocks, threads, 0, stream>>>(
          dlogits, classes, static_cast<const T*>(x), rows, in, static_cast<T*>(dw), static_cast<T*>(dbias), rs,
          scratch, splits);
      return cudaGetLastError();
    };
    const auto typed = [&](auto kc) {
      switch (type) {
        case ElementType::kBF16: return launch_sliced(kc, static_cast<__nv_bfloat16*>(nullptr));
        case ElementType::kF16: return launch_sliced(kc, static_cast<__half*>(nullptr));
        case ElementType::kF32: break;
      }
      return launch_sliced(kc, static_cast<float*>(nullptr));
    };
    if (classes <= 8) return typed(std::integral_constant<int, 8>{});
    return classes <= 16 ? typed(std::integral_constant<int, 16>{}) : typed(std::integral_constant<int, 32>{});
  }
  // Four variants per class bound: gathered or stored input, fused update or stored gradient.
  const auto launch = [&](auto kc) {
    constexpr int kC = decltype(kc)::value;
    if (source != nullptr && update != nullptr) {
      return launch_weight_grad_for<kC, true, true>(dlogits, classes, x, type, rows, in, dw, dbias, src, up, rs, stream);
    }
    if (source != nullptr) {
      return launch_weight_grad_for<kC, true, false>(dlogits, classes, x, type, rows, in, dw, dbias, src, up, rs, stream);
    }
    if (update != nullptr) {
      return launch_weight_grad_for<kC, false, true>(dlogits, classes, x, type, rows, in, dw, dbias, src, up, rs, stream);
    }
    return launch_weight_grad_for<kC, false, false>(dlogits, classes, x, type, rows, in, dw, dbias, src, up, rs, stream);
  };
  return classes <= 16 ? launch(std::integral_constant<int, 16>{}) : launch(std::integral_constant<int, 32>{});
}

cudaError_t launch_skinny_input_grad(const float* dlogits, int classes, const void* w, ElementType type,
                                     std::int64_t rows, std::int64_t in, const void* relu_out, void* dx,
                                     cudaStream_t stream) {
  if (classes < 1 || classes > kSkinnyMaxOutputs) return cudaErrorInvalidValue;
  if (rows * in == 0) return cudaSuccess;
  const NvtxRange range("skinny_input_grad");
  const auto vec = [&](auto* type_tag) {
    using T = std::remove_pointer_t<decltype(type_tag)>;
    if (!wide(rows, in) || !vectorizable<T>(w, in) || !vectorizable<T>(dx, in) ||
        (relu_out != nullptr && !vectorizable<T>(relu_out, in))) {
      return false;
    }
    skinny_input_grad_vec_kernel<T><<<elementwise_blocks(rows * in / 4), kElementwiseThreads, 0, stream>>>(
        dlogits, classes, static_cast<const T*>(w), rows, in, static_cast<const T*>(relu_out), static_cast<T*>(dx));
    return true;
  };
  const auto aligned16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  // From 2048 rows (the H100, per kernel: 4096 x 4096 54 -> 31 us, 4096 x 784 13.7 -> 11; at 1024 rows
  // no faster than the FMA kernel).
  if (type == ElementType::kBF16 && classes <= 16 && wide(rows, in) && rows >= 128 * kMmaRows && in % 8 == 0 &&
      aligned16(dx) && (relu_out == nullptr || aligned16(relu_out)) && skinny_tensor_cores()) {
    constexpr std::int64_t per_block = std::int64_t{kIgWarps} * kIgFeatures;
    const dim3 grid(static_cast<unsigned>((in + per_block - 1) / per_block),
                    static_cast<unsigned>(std::min<std::int64_t>((rows + kMmaRows - 1) / kMmaRows, 65535)));
    skinny_input_grad_mma_kernel<<<grid, kIgWarps * kWarpSize, 0, stream>>>(
        dlogits, classes, static_cast<const __nv_bfloat16*>(w), rows, in,
        static_cast<const __nv_bfloat16*>(relu_out), static_cast<__nv_bfloat16*>(dx));
    return cudaGetLastError();
  }
  const bool launched = type == ElementType::kBF16 ? vec(static_cast<__nv_bfloat16*>(nullptr))
                        : type == ElementType::kF16 ? vec(static_cast<__half*>(nullptr))
                                                    : vec(static_cast<float*>(nullptr));
  if (launched) return cudaGetLastError();
  skinny_input_grad_kernel<<<elementwise_blocks(rows * in), kElementwiseThreads, 0, stream>>>(
      dlogits, classes, w, type, rows, in, relu_out, dx);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
