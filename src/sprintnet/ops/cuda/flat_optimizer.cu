// The optimizer of the compiled training step: every parameter of the model in
// one launch, over flat fp32 buffers (master weights, gradients, state), four
// elements per thread with 16-byte loads. The algebra is ops/cpu/optimizer.cpp's
// (torch.optim's SGD, Adam, AdamW). The learning rate comes from a table indexed
// by the device step counter, the bias corrections are computed per block in
// double from the device update counter, and the block that finishes last
// advances the counters: the captured launch is correct on every replay.
#include <cmath>

#include "sprintnet/ops/cuda/element_access.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

struct BlockScalars {
  float lr, inv_scale, step_size, bias2_sqrt, decoupled_keep, one_minus_beta1, one_minus_beta2;
  bool first_update, skip;
};

__device__ BlockScalars block_scalars(const FlatOptimizerArgs& a) {
  BlockScalars s{};
  const std::int64_t step = a.state->step;
  const std::int64_t index = step < a.lr_table_size ? step : a.lr_table_size - 1;
  const double lr = a.lr_table[index];
  s.lr = static_cast<float>(lr);
  s.skip = a.check_finite && a.state->found_inf != 0;
  s.inv_scale = a.check_finite ? 1.0f / a.state->loss_scale : 1.0f;
  s.first_update = a.state->opt_steps == 0;
  const double t = static_cast<double>(a.state->opt_steps + 1);
  s.step_size = static_cast<float>(lr / (1.0 - pow(a.beta1_d, t)));
  s.bias2_sqrt = static_cast<float>(sqrt(1.0 - pow(a.beta2_d, t)));
  s.decoupled_keep = static_cast<float>(1.0 - lr * a.weight_decay_d);
  s.one_minus_beta1 = static_cast<float>(1.0 - a.beta1_d);
  s.one_minus_beta2 = static_cast<float>(1.0 - a.beta2_d);
  return s;
}

__device__ inline void sgd_update(const FlatOptimizerArgs& a, const BlockScalars& s, float& p, float g, float* buf) {
  float d = g * s.inv_scale + a.weight_decay * p;
  if (buf != nullptr) {
    const float b = s.first_update ? d : a.momentum * *buf + a.keep * d;  // first update: buf = g
    *buf = b;
    d = a.nesterov ? d + a.momentum * b : b;
  }
  p -= s.lr * d;
}

__device__ inline void adam_update(const FlatOptimizerArgs& a, const BlockScalars& s, float& p, float g, float& m,
                                   float& v) {
  g *= s.inv_scale;
  if (a.kind == FlatOptimizerKind::kAdamW) {
    p *= s.decoupled_keep;  // decay the weight, not the gradient
  } else {
    g += a.weight_decay * p;
  }
  m = a.beta1 * m + s.one_minus_beta1 * g;
  v = a.beta2 * v + s.one_minus_beta2 * g * g;
  p = p - s.step_size * m / (sqrtf(v) / s.bias2_sqrt + a.eps);
}

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
  if (type == ElementType::kF32) return reinterpret_cast<const float4*>(grad)[vector];
  const uint2 packed = reinterpret_cast<const uint2*>(grad)[vector];
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
    for (std::int64_t i = first_vector + global_thread(); i < end_vector; i += grid_threads()) {
      float4 p = reinterpret_cast<float4*>(a.master)[i];
      const float4 g = load_grad4(a.grad, a.grad_type, i);
      if (a.kind == FlatOptimizerKind::kSgd) {
        if (a.state1 != nullptr) {
          float4 b = reinterpret_cast<float4*>(a.state1)[i];
          sgd_update(a, s, p.x, g.x, &b.x);
          sgd_update(a, s, p.y, g.y, &b.y);
          sgd_update(a, s, p.z, g.z, &b.z);
          sgd_update(a, s, p.w, g.w, &b.w);
          reinterpret_cast<float4*>(a.state1)[i] = b;
        } else {
          sgd_update(a, s, p.x, g.x, nullptr);
          sgd_update(a, s, p.y, g.y, nullptr);
          sgd_update(a, s, p.z, g.z, nullptr);
          sgd_update(a, s, p.w, g.w, nullptr);
        }
      } else {
        float4 m = reinterpret_cast<float4*>(a.state1)[i];
        float4 v = reinterpret_cast<float4*>(a.state2)[i];
        adam_update(a, s, p.x, g.x, m.x, v.x);
        adam_update(a, s, p.y, g.y, m.y, v.y);
        adam_update(a, s, p.z, g.z, m.z, v.z);
        adam_update(a, s, p.w, g.w, m.w, v.w);
        reinterpret_cast<float4*>(a.state1)[i] = m;
        reinterpret_cast<float4*>(a.state2)[i] = v;
      }
      reinterpret_cast<float4*>(a.master)[i] = p;
      if (a.copy != nullptr) store_copy4(a.copy, a.copy_type, i, p);
    }
  }
  // Every block has read the counters above; the last one to arrive advances them.
  if (!advance) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const unsigned arrived = atomicAdd(&a.state->blocks_done, 1u);
    if (arrived == gridDim.x - 1) {
      StepState* st = a.state;
      if (a.check_finite) {
        if (s.skip) {
          st->loss_scale *= 0.5f;
          st->good_steps = 0;
          if (a.metrics != nullptr) a.metrics->skipped += 1;
        } else if (++st->good_steps == 2000) {  // torch.amp.GradScaler's growth interval and factors
          st->loss_scale *= 2.0f;
          st->good_steps = 0;
        }
        st->found_inf = 0;
      }
      if (!s.skip) st->opt_steps += 1;
      st->step += 1;
      st->blocks_done = 0;
    }
  }
}

__global__ void check_finite_kernel(const void* grad, ElementType type, std::int64_t count, StepState* state) {
  bool bad = false;
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) bad |= !isfinite(load_element(grad, type, i));
  if (__syncthreads_or(bad) && threadIdx.x == 0) state->found_inf = 1;
}

}  // namespace

cudaError_t launch_flat_optimizer_range(const FlatOptimizerArgs& args, std::int64_t begin, std::int64_t end,
                                        bool advance, cudaStream_t stream) {
  if (begin % 4 != 0 || end % 4 != 0 || begin > end || end > args.count) return cudaErrorInvalidValue;
  const NvtxRange range("flat_optimizer");
  // At least one block even for an empty range: with advance it moves the counters on.
  const std::int64_t vectors = (end - begin) / 4;
  const unsigned blocks = vectors == 0 ? 1u : elementwise_blocks(vectors);
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
