// The optimizer of the compiled training step: every parameter of the model in
// one launch, over flat fp32 buffers (master weights, gradients, state), four
// elements per thread with 16-byte loads. The algebra is ops/cpu/optimizer.cpp's
// (torch.optim's SGD, Adam, AdamW). The learning rate comes from a table indexed
// by the device step counter, the bias corrections are computed per block in
// double from the device update counter, and the block that finishes last
// advances the counters: the captured launch is correct on every replay.
#include <cmath>

#include "sprintnet/ops/cuda/element_access.cuh"
#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

// Four compute-type copies in one store (8 bytes for 16-bit types).
__device__ inline void store_copy4(void* copy, ElementType type, std::int64_t vector, float4 p) {
  if (type == ElementType::kBF16) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(p.x, p.y), hi = __floats2bfloat162_rn(p.z, p.w);
    uint2 packed;
    packed.x = *reinterpret_cast<const unsigned*>(&lo);
    packed.y = *reinterpret_cast<const unsigned*>(&hi);
    reinterpret_cast<uint2*>(copy)[vector] = packed;
  } else if (type == ElementType::kF16) {
    const __half2 lo = __floats2half2_rn(p.x, p.y), hi = __floats2half2_rn(p.z, p.w);
    uint2 packed;
    packed.x = *reinterpret_cast<const unsigned*>(&lo);
    packed.y = *reinterpret_cast<const unsigned*>(&hi);
    reinterpret_cast<uint2*>(copy)[vector] = packed;
  } else {
    reinterpret_cast<float4*>(copy)[vector] = p;
  }
}

// Four gradients in one load (16 bytes in fp32, 8 in 16-bit types).
__device__ inline float4 load_grad4(const void* grad, ElementType type, std::int64_t vector) {
  if (type == ElementType::kF32) return __ldcs(reinterpret_cast<const float4*>(grad) + vector);
  const uint2 packed = __ldcs(reinterpret_cast<const uint2*>(grad) + vector);
  if (type == ElementType::kBF16) {
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&packed.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&packed.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
  }
  const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&packed.x));
  const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&packed.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

__global__ void flat_optimizer_kernel(FlatOptimizerArgs a, std::int64_t first_vector, std::int64_t end_vector,
                                      bool advance) {
  __shared__ BlockScalars shared;
  if (threadIdx.x == 0) shared = block_scalars(a);
  __syncthreads();
  const BlockScalars s = shared;
  if (!s.skip) {
    // Two vectors per thread per iteration, all loads issued before any arithmetic: more bytes in
    // flight per thread for this memory-bound loop. Loads and stores stream (each byte is touched once).
    const std::int64_t stride = grid_threads();
    for (std::int64_t i0 = first_vector + global_thread(); i0 < end_vector; i0 += 2 * stride) {
      constexpr int kUnroll = 2;
      std::int64_t idx[kUnroll];
      bool live[kUnroll];
      float4 p[kUnroll], g[kUnroll], m[kUnroll], v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        idx[u] = i0 + u * stride;
        live[u] = idx[u] < end_vector;
        if (!live[u]) continue;
        p[u] = __ldcs(reinterpret_cast<const float4*>(a.master) + idx[u]);
        g[u] = load_grad4(a.grad, a.grad_type, idx[u]);
        if (a.state1 != nullptr) m[u] = __ldcs(reinterpret_cast<const float4*>(a.state1) + idx[u]);
        if (a.state2 != nullptr) v[u] = __ldcs(reinterpret_cast<const float4*>(a.state2) + idx[u]);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (!live[u]) continue;
        if (a.kind == FlatOptimizerKind::kSgd) {
          float* b = a.state1 != nullptr ? &m[u].x : nullptr;
          sgd_update(a, s, p[u].x, g[u].x, b);
          sgd_update(a, s, p[u].y, g[u].y, b != nullptr ? &m[u].y : nullptr);
          sgd_update(a, s, p[u].z, g[u].z, b != nullptr ? &m[u].z : nullptr);
          sgd_update(a, s, p[u].w, g[u].w, b != nullptr ? &m[u].w : nullptr);
        } else {
          adam_update(a, s, p[u].x, g[u].x, m[u].x, v[u].x);
          adam_update(a, s, p[u].y, g[u].y, m[u].y, v[u].y);
          adam_update(a, s, p[u].z, g[u].z, m[u].z, v[u].z);
          adam_update(a, s, p[u].w, g[u].w, m[u].w, v[u].w);
        }
        __stcs(reinterpret_cast<float4*>(a.master) + idx[u], p[u]);
        if (a.state1 != nullptr) __stcs(reinterpret_cast<float4*>(a.state1) + idx[u], m[u]);
        if (a.state2 != nullptr) __stcs(reinterpret_cast<float4*>(a.state2) + idx[u], v[u]);
        if (a.copy != nullptr) store_copy4(a.copy, a.copy_type, idx[u], p[u]);
      }
    }
  }
  // Every block has read the counters above; the last one to arrive advances them.
  if (!advance) return;
  __syncthreads();
  if (threadIdx.x == 0) finish_update_block(a, s);
}

__global__ void check_finite_kernel(const void* grad, ElementType type, std::int64_t count, StepState* state) {
  bool bad = false;
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) bad |= !isfinite(load_element(grad, type, i));
  if (__syncthreads_or(bad) && threadIdx.x == 0) state->found_inf = 1;
}

}  // namespace

cudaError_t launch_flat_optimizer_range(const FlatOptimizerArgs& args, std::int64_t begin, std::int64_t end,
                                        bool advance, cudaStream_t stream) {
  if (begin < 0 || begin % 4 != 0 || end % 4 != 0 || begin > end || end > args.count) return cudaErrorInvalidValue;
  const NvtxRange range("flat_optimizer");
  // At least one block even for an empty range: with advance it moves the counters on.
  const std::int64_t vectors = (end - begin) / 4;
  const unsigned blocks = vectors == 0 ? 1u : elementwise_blocks((vectors + 1) / 2);  // two vectors a thread
  flat_optimizer_kernel<<<blocks, kElementwiseThreads, 0, stream>>>(args, begin / 4, end / 4, advance);
  return cudaGetLastError();
}

cudaError_t launch_flat_optimizer(const FlatOptimizerArgs& args, cudaStream_t stream) {
  if (args.count % 4 != 0) return cudaErrorInvalidValue;
  return launch_flat_optimizer_range(args, 0, args.count, true, stream);
}

cudaError_t launch_check_finite(const void* grad, ElementType type, std::int64_t count, StepState* state,
                                cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const NvtxRange range("check_finite");
  check_finite_kernel<<<elementwise_blocks(count), kElementwiseThreads, 0, stream>>>(grad, type, count, state);
  return cudaGetLastError();
}

}  // namespace sprintnet::cuda
