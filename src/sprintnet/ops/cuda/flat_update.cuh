#pragma once
// The per-element algebra of the flat optimizer (ops/cpu/optimizer.cpp's, torch.optim's SGD,
// Adam and AdamW), shared by flat_optimizer.cu and the output-layer kernels that apply it
// directly to the gradient they compute (skinny_layer.cu).
#include <cmath>

#include "sprintnet/ops/cuda/element_access.cuh"

namespace sprintnet::cuda {

// The step's scalars, computed once per block from the device state.
struct BlockScalars {
  float lr, inv_scale, step_size, bias2_sqrt, decoupled_keep, one_minus_beta1, one_minus_beta2;
  bool first_update, skip;
};

__device__ inline BlockScalars block_scalars(const FlatOptimizerArgs& a) {
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

// One parameter: master[i] (and its state, and the compute-type copy) updated with gradient g.
__device__ inline void update_element(const FlatOptimizerArgs& a, const BlockScalars& s, std::int64_t i, float g) {
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
  if (a.copy != nullptr) store_element(a.copy, a.copy_type, i, p);
}

// Called by thread 0 of every block after its updates: the last block to arrive advances the state
// (step, update count, fp16 loss scale), so the next replay of the graph sees the next step.
__device__ inline void finish_update_block(const FlatOptimizerArgs& a, const BlockScalars& s) {
  __threadfence();
  const unsigned arrived = atomicAdd(&a.state->blocks_done, 1u);
  if (arrived != gridDim.x - 1) return;
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

}  // namespace sprintnet::cuda
