// The output layer of a classifier, when it has few outputs (MNIST's 10): a
// product with 10 columns is too thin for cuBLAS's tiles (its kernels wait on
// latency, and its epilogues run as extra kernels), so these kernels fuse the
// product with its neighbours. Deterministic: every sum has a fixed order. This
// file: the FMA kernels and the launchers that choose; skinny_mma.cu: the
// tensor-core kernels for wide 16-bit layers; skinny_kernels.cuh: what both share.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"
#include "sprintnet/ops/cuda/skinny_kernels.cuh"
#include "sprintnet/ops/cuda/skinny_mma.h"

namespace sprintnet::cuda {
namespace {

using namespace skinny_detail;

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
        update_element(update.args, scalars, update.weight_offset + c * in + f, round_to<T>(sum));
      } else {
        dw[c * in + f] = from_float<T>(sum);
      }
    }
  }
  if (bias_thread) {
    if constexpr (kUpdate) {
      update_element(update.args, scalars, update.bias_offset + lane, round_to<T>(bias_acc));
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

// The tensor-core kernels (skinny_mma.cu: the forward, the bf16 input and weight gradients), unless
// SPRINTNET_SKINNY_MMA=0 (kernel lab: the FMA kernels they replaced).
bool skinny_tensor_cores() {
  static const bool on = [] {
    const char* v = std::getenv("SPRINTNET_SKINNY_MMA");
    return v == nullptr || std::string_view(v) != "0";
  }();
  return on;
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

// ---- the weight gradient of a wide layer (no gather, no fused update; bf16 with up to 16 classes
// takes the tensor-core kernel below): a block owns 128 input features (four a lane) and one of
// `splits` slices of the rows; its 8 warps split the slice's rows,
// each thread keeping 4 x kC sums; the warps' sums are added in warp order in shared memory. With
// several slices each block stores its sums in scratch and the last block of its features (a
// counter) adds the slices in order: every sum has a fixed order. One more block adds the bias
// gradient (and the forward's row sums).
template <typename T, int kC>
__global__ void __launch_bounds__(kGradWarps * kWarpSize)
    skinny_weight_grad_split_kernel(const float* dlogits, int classes, const T* x, std::int64_t rows,
                                    std::int64_t in, T* dw, T* dbias, RowSums sums, SkinnyScratch scratch,
                                    int splits) {
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  if (is_bias_block(in, splits)) {
    bias_grad_block(dlogits, classes, rows, dbias, sums);
    return;
  }
  const auto [group, split, first, last] = weight_grad_slice(rows, in, splits);
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
    return launch_skinny_forward_mma(args, stream);
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
      return launch_skinny_weight_grad_mma(dlogits, classes, static_cast<const __nv_bfloat16*>(x), rows, in,
                                           static_cast<__nv_bfloat16*>(dw), static_cast<__nv_bfloat16*>(dbias), rs,
                                           scratch, splits, stream);
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
    return launch_skinny_input_grad_mma(dlogits, classes, static_cast<const __nv_bfloat16*>(w), rows, in,
                                        static_cast<const __nv_bfloat16*>(relu_out), static_cast<__nv_bfloat16*>(dx),
                                        stream);
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
