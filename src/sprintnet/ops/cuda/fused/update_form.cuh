#pragma once
// The optimizer step the fused kernels apply to a parameter held in registers, chosen at compile
// time. Their updates sit on each step's critical path and are issue-bound, so the general SGD
// form's selects and products (weight decay, dampening, Nesterov, the loss scale) cost real time:
// ~0.6 us a backward stage on the split kernel, 11 % of the cluster kernel's instructions (ncu,
// docs/FUSED.md). The plain form does the same arithmetic in three multiply-adds.
#include <type_traits>

#include "sprintnet/ops/cuda/flat_update.cuh"

namespace sprintnet::cuda {

// kPlainSgd: SGD with momentum and neither dampening nor Nesterov (weight decay or not), no loss
// scale (bf16); kSgd: every other SGD setting; kAdam: Adam and AdamW (adam_update_fast).
enum class UpdateForm { kPlainSgd, kSgd, kAdam };

// The form a run's optimizer takes (fp16's loss scale needs the general SGD form).
inline UpdateForm update_form_of(const FlatOptimizerArgs& o) {
  if (o.kind != FlatOptimizerKind::kSgd) return UpdateForm::kAdam;
  const bool plain = o.state1 != nullptr && o.keep == 1.0f && !o.nesterov && !o.check_finite;
  return plain ? UpdateForm::kPlainSgd : UpdateForm::kSgd;
}

// `pick(std::integral_constant<UpdateForm, F>{})` for the form F the run's optimizer takes: how a kernel's
// launcher picks its instantiation (kernel_for). Every form's pick returns the same type.
template <class Pick>
auto for_update_form(const FlatOptimizerArgs& o, Pick pick) {
  switch (update_form_of(o)) {
    case UpdateForm::kPlainSgd: return pick(std::integral_constant<UpdateForm, UpdateForm::kPlainSgd>{});
    case UpdateForm::kSgd: return pick(std::integral_constant<UpdateForm, UpdateForm::kSgd>{});
    case UpdateForm::kAdam: break;
  }
  return pick(std::integral_constant<UpdateForm, UpdateForm::kAdam>{});
}

// Plain SGD's momentum factor this step. torch's first update sets buf = d: the factor is 0 there (the
// buffer starts at zero), one select a step rather than a select and a predicated load of the factor a
// parameter (v16b, ncu: ~30 loads of it in the rows kernel's B0).
__device__ __forceinline__ float plain_sgd_factor(const FlatOptimizerArgs& o, const BlockScalars& s) {
  return s.first_update ? 0.0f : o.momentum;
}
// Plain SGD's two halves: the momentum m takes the gradient (decayed by `factor`, with the weight-decay
// term), then the weight steps along it. The update is linear in the gradient, so a kernel that gets a
// gradient in parts (the quads kernel's first layer, half the batch at a time) passes the first part to the
// first half, adds the others to m, and then takes the second half.
__device__ __forceinline__ void plain_sgd_momentum(float factor, float weight_decay, float w, float& m, float grad) {
  m = fmaf(factor, m, fmaf(weight_decay, w, grad));
}
__device__ __forceinline__ void plain_sgd_apply(const BlockScalars& s, float& w, float m) { w = fmaf(-s.lr, m, w); }

// One parameter w with its state m (SGD's momentum, Adam's first moment) and v (Adam's second
// moment; unused by SGD) stepped by gradient `grad`; `momentum`: whether SGD keeps a buffer.
template <UpdateForm kUpdate>
__device__ __forceinline__ void fused_step(const FlatOptimizerArgs& o, const BlockScalars& s, float& w, float& m,
                                           float& v, float grad, bool momentum) {
  if constexpr (kUpdate == UpdateForm::kPlainSgd) {
    plain_sgd_momentum(plain_sgd_factor(o, s), o.weight_decay, w, m, grad);
    plain_sgd_apply(s, w, m);
  } else if constexpr (kUpdate == UpdateForm::kSgd) {
    sgd_update_value(o, s, w, grad, m, momentum);
  } else {
    adam_update_fast(o, s, w, grad, m, v);
  }
}

// A fused kernel's update scalars, step after step, without pow: Adam's beta^t as running products (pow in
// double twice a step was ~1 us on the rows kernel's path), SGD's three fields only (all its forms read).
template <UpdateForm kUpdate>
class RunningScalars {
 public:
  __device__ RunningScalars(const FlatOptimizerArgs& o, std::int64_t opt_steps) {
    if constexpr (kUpdate == UpdateForm::kAdam) {
      beta1_t_ = pow(o.beta1_d, static_cast<double>(opt_steps + 1));
      beta2_t_ = pow(o.beta2_d, static_cast<double>(opt_steps + 1));
    }
  }
  // The scalars of the update with learning rate `lr` after `opt_steps` updates, the first of which this
  // object was made for or follows; advances to the next update.
  __device__ BlockScalars next(const FlatOptimizerArgs& o, double lr, std::int64_t opt_steps) {
    BlockScalars s{};
    if constexpr (kUpdate == UpdateForm::kAdam) {
      s = update_scalars(o, lr, beta1_t_, beta2_t_, opt_steps == 0, 1.0f, false);
      beta1_t_ *= o.beta1_d;
      beta2_t_ *= o.beta2_d;
    } else {
      s.lr = static_cast<float>(lr);
      s.inv_scale = 1.0f;
      s.first_update = opt_steps == 0;
    }
    return s;
  }

 private:
  double beta1_t_ = 0.0, beta2_t_ = 0.0;
};

}  // namespace sprintnet::cuda
