#pragma once
// The per-element algebra of the flat optimizer (ops/cpu/optimizer.cpp's, torch.optim's SGD,
// Adam and AdamW), shared by flat_optimizer.cu and the output-layer kernels that apply it
// directly to the gradient they compute (skinny_layer.cu).
#include <cmath>

#include "sprintnet/ops/cuda/element_access.cuh"

namespace sprintnet::cuda {

// The step's scalars, computed once per block from the device state.
struct BlockScalars {
  float lr, inv_scale, step_size, bias2_sqrt, inv_bias2_sqrt, decoupled_keep, one_minus_beta1, one_minus_beta2;
  bool first_update, skip;
};

// The scalars of an update with learning rate `lr`, Adam's beta1^t and beta2^t for its count t
// (callers that step through updates keep running products instead of calling pow each time).
__device__ inline BlockScalars update_scalars(const FlatOptimizerArgs& a, double lr, double beta1_t, double beta2_t,
                                              bool first_update, float loss_scale, bool skip) {
  BlockScalars s{};
  s.lr = static_cast<float>(lr);
  s.skip = skip;
  s.inv_scale = a.check_finite ? 1.0f / loss_scale : 1.0f;
  s.first_update = first_update;
  s.step_size = static_cast<float>(lr / (1.0 - beta1_t));
  s.bias2_sqrt = static_cast<float>(sqrt(1.0 - beta2_t));
  s.inv_bias2_sqrt = static_cast<float>(1.0 / sqrt(1.0 - beta2_t));
  s.decoupled_keep = static_cast<float>(1.0 - lr * a.weight_decay_d);
  s.one_minus_beta1 = static_cast<float>(1.0 - a.beta1_d);
  s.one_minus_beta2 = static_cast<float>(1.0 - a.beta2_d);
  return s;
}

// The learning rate of run step `step` (steps past the table's end use its last entry).
__device__ inline double step_lr(const FlatOptimizerArgs& a, std::int64_t step) {
  return a.lr_table[step < a.lr_table_size ? step : a.lr_table_size - 1];
}

// The scalars of the update at run step `step` after `opt_steps` applied updates (the fused
// engine tracks these in registers; the graph kernels read them from StepState).
__device__ inline BlockScalars step_scalars(const FlatOptimizerArgs& a, std::int64_t step, std::int64_t opt_steps,
                                            float loss_scale, bool skip) {
  const double t = static_cast<double>(opt_steps + 1);
  return update_scalars(a, step_lr(a, step), pow(a.beta1_d, t), pow(a.beta2_d, t), opt_steps == 0, loss_scale, skip);
}

__device__ inline BlockScalars block_scalars(const FlatOptimizerArgs& a) {
  return step_scalars(a, a.state->step, a.state->opt_steps, a.state->loss_scale,
                      a.check_finite && a.state->found_inf != 0);
}

// SGD on a parameter p with its momentum buffer `buf` in a register (`momentum`: whether the
// optimizer keeps one). Callers holding buf in a register use this form: taking its address
// would put it in local memory.
__device__ inline void sgd_update_value(const FlatOptimizerArgs& a, const BlockScalars& s, float& p, float g,
                                        float& buf, bool momentum) {
  float d = g * s.inv_scale + a.weight_decay * p;
  if (momentum) {
    const float b = s.first_update ? d : a.momentum * buf + a.keep * d;  // first update: buf = g
    buf = b;
    d = a.nesterov ? d + a.momentum * b : b;
  }
  p -= s.lr * d;
}

__device__ inline void sgd_update(const FlatOptimizerArgs& a, const BlockScalars& s, float& p, float g, float* buf) {
  float b = buf != nullptr ? *buf : 0.0f;
  sgd_update_value(a, s, p, g, b, buf != nullptr);
  if (buf != nullptr) *buf = b;
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

// The hardware's approximate square root and reciprocal (one MUFU instruction each, relative error
// below 2^-22; denormal inputs read as zero), branch-free.
__device__ __forceinline__ float sqrt_approx(float x) {
  float y;
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// adam_update's step for the fused kernels, where the update sits on the step's critical path and is
// issue-bound: the same formula with sqrt_approx and rcp_approx for the IEEE square root and two
// divisions. Those compile to branches with slow paths taken for v = 0 or denormal, which Adam meets
// on every weight that never gets a gradient (the always-blank pixels' first-layer weights, dead
// ReLU units): the slow paths cost the split kernel ~5 us of its first layer's backward stage (H100,
// docs/FUSED.md). The update differs from adam_update's by a few ulp of the step (lr-sized), far
// below the bf16 rounding of the weights the products read; NaN and infinity propagate as there.
__device__ inline void adam_update_fast(const FlatOptimizerArgs& a, const BlockScalars& s, float& p, float g, float& m,
                                        float& v) {
  g *= s.inv_scale;
  if (a.kind == FlatOptimizerKind::kAdamW) {
    p *= s.decoupled_keep;
  } else {
    g = fmaf(a.weight_decay, p, g);
  }
  m = fmaf(a.beta1, m, s.one_minus_beta1 * g);
  v = fmaf(a.beta2, v, s.one_minus_beta2 * g * g);
  const float denom = fmaf(sqrt_approx(v), s.inv_bias2_sqrt, a.eps);
  p = fmaf(-s.step_size * m, rcp_approx(denom), p);
}

// One parameter: master[i] (and its state, and element i of `copy`, in a.copy_type, when not null)
// updated with gradient g. The fused engine writes the copy the next step reads (it double-buffers).
__device__ inline void update_element_into(const FlatOptimizerArgs& a, const BlockScalars& s, std::int64_t i, float g,
                                           void* copy) {
  float p = a.master[i];
  if (a.kind == FlatOptimizerKind::kSgd) {
    sgd_update(a, s, p, g, a.state1 != nullptr ? a.state1 + i : nullptr);
  } else {
    float m = a.state1[i], v = a.state2[i];
    adam_update(a, s, p, g, m, v);
    a.state1[i] = m;
    a.state2[i] = v;
  }
  a.master[i] = p;
  if (copy != nullptr) store_element(copy, a.copy_type, i, p);
}

// N parameters at once: every load issued before any store, so their latencies overlap (the
// compiler cannot reorder a load past a store that may alias it). The fused engine issues the
// loads (load_parameters) before computing the gradients, so they arrive while it does.
// Entries with valid[j] false are left alone.
template <int N>
struct ParameterBatch {
  float p[N], m[N], v[N];
};

template <int N>
__device__ inline void load_parameters(const FlatOptimizerArgs& a, const std::int64_t (&i)[N], const bool (&valid)[N],
                                       ParameterBatch<N>& b) {
  for (int j = 0; j < N; ++j) {
    if (!valid[j]) continue;
    b.p[j] = a.master[i[j]];
    b.m[j] = a.state1 != nullptr ? a.state1[i[j]] : 0.0f;
    b.v[j] = a.state2 != nullptr ? a.state2[i[j]] : 0.0f;
  }
}

template <int N>
__device__ inline void update_parameters(const FlatOptimizerArgs& a, const BlockScalars scalars,
                                         const std::int64_t (&i)[N], const float (&g)[N], const bool (&valid)[N],
                                         ParameterBatch<N>& b, void* copy) {
  const BlockScalars& s = scalars;  // a copy in registers, read between the stores below
  float* p = b.p;
  float* m = b.m;
  float* v = b.v;
  for (int j = 0; j < N; ++j) {
    if (!valid[j]) continue;
    if (a.kind == FlatOptimizerKind::kSgd) {
      sgd_update_value(a, s, p[j], g[j], m[j], a.state1 != nullptr);  // by value: no address, no local memory
    } else {
      adam_update(a, s, p[j], g[j], m[j], v[j]);
    }
  }
  for (int j = 0; j < N; ++j) {
    if (!valid[j]) continue;
    a.master[i[j]] = p[j];
    if (a.state1 != nullptr) a.state1[i[j]] = m[j];
    if (a.state2 != nullptr) a.state2[i[j]] = v[j];
    if (copy != nullptr) store_element(copy, a.copy_type, i[j], p[j]);
  }
}

template <int N>
__device__ inline void update_elements_into(const FlatOptimizerArgs& a, const BlockScalars scalars,
                                            const std::int64_t (&i)[N], const float (&g)[N], const bool (&valid)[N],
                                            void* copy) {
  ParameterBatch<N> b;
  load_parameters(a, i, valid, b);
  update_parameters(a, scalars, i, g, valid, b, copy);
}

__device__ inline void update_element(const FlatOptimizerArgs& a, const BlockScalars& s, std::int64_t i, float g) {
  update_element_into(a, s, i, g, a.copy);
}

// The state after one step: the fp16 loss scale grows or shrinks as torch.amp.GradScaler's does
// (growth interval 2000, factors 2 and 1/2), the update count advances unless the update was skipped.
__device__ inline void advance_step_state(StepState& st, bool check_finite, bool skip, StepMetrics* metrics) {
  if (check_finite) {
    if (skip) {
      st.loss_scale *= 0.5f;
      st.good_steps = 0;
      if (metrics != nullptr) metrics->skipped += 1;
    } else if (++st.good_steps == 2000) {
      st.loss_scale *= 2.0f;
      st.good_steps = 0;
    }
    st.found_inf = 0;
  }
  if (!skip) st.opt_steps += 1;
  st.step += 1;
}

// Called by thread 0 of every block after its updates: the last block to arrive advances the state
// (step, update count, fp16 loss scale), so the next replay of the graph sees the next step.
__device__ inline void finish_update_block(const FlatOptimizerArgs& a, const BlockScalars& s) {
  __threadfence();
  const unsigned arrived = atomicAdd(&a.state->blocks_done, 1u);
  if (arrived != gridDim.x - 1) return;
  advance_step_state(*a.state, a.check_finite, s.skip, a.metrics);
  a.state->blocks_done = 0;
}

}  // namespace sprintnet::cuda
