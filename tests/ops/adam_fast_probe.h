#pragma once
// The test's handle on flat_update.cuh's adam_update_fast, a device function the fused kernels
// inline: one thread an element over device arrays.
#include "sprintnet/ops/cuda/step_launch.h"

namespace sprintnet::test {

// p, m and v updated in place from g (n elements each, device memory), with the scalars of an
// update at learning rate lr and Adam's beta^t (t: the update's count, from 1).
void adam_update_fast_on_gpu(const cuda::FlatOptimizerArgs& args, double lr, double beta1_t, double beta2_t, float* p,
                             const float* g, float* m, float* v, int n);

}  // namespace sprintnet::test
