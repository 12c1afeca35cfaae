#pragma once
// The optimizer step the fused kernels apply to a parameter held in registers, chosen at compile
// time. Their updates sit on each step's critical path and are issue-bound, so the general SGD
// form's selects and products (weight decay, dampening, Nesterov, the loss scale) cost real time:
// ~0.6 us a backward stage on the split kernel, 11 % of the cluster kernel's instructions (ncu,
// docs/FUSED.md). The plain form does the same arithmetic in three multiply-adds.
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

// One parameter w with its state m (SGD's momentum, Adam's first moment) and v (Adam's second
// moment; unused by SGD) stepped by gradient `grad`; `momentum`: whether SGD keeps a buffer.
template <UpdateForm kUpdate>
__device__ __forceinline__ void fused_step(const FlatOptimizerArgs& o, const BlockScalars& s, float& w, float& m,
                                           float& v, float grad, bool momentum) {
  if constexpr (kUpdate == UpdateForm::kPlainSgd) {
    const float d = fmaf(o.weight_decay, w, grad);
    m = s.first_update ? d : fmaf(o.momentum, m, d);  // torch's first update: buf = d
    w = fmaf(-s.lr, m, w);
  } else if constexpr (kUpdate == UpdateForm::kSgd) {
    sgd_update_value(o, s, w, grad, m, momentum);
  } else {
    adam_update_fast(o, s, w, grad, m, v);
  }
}

}  // namespace sprintnet::cuda
