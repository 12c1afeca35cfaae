#pragma once
// The tensor-core kernels of the output layer (skinny_mma.cu), launched by skinny_layer.cu's
// launchers where they apply (16-bit types, wide shapes, 16-byte aligned rows of whole vectors).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "sprintnet/ops/cuda/step_launch.h"

namespace sprintnet::cuda {

// The forward fused with softmax cross-entropy (bf16 or fp16; classes <= 32; in % 8 == 0).
cudaError_t launch_skinny_forward_mma(const SkinnyForwardArgs& args, cudaStream_t stream);
// dx = (dlogits w) * relu'(relu_out) (relu_out may be null), bf16; classes <= 16; in % 8 == 0.
cudaError_t launch_skinny_input_grad_mma(const float* dlogits, int classes, const __nv_bfloat16* w, std::int64_t rows,
                                         std::int64_t in, const __nv_bfloat16* relu_out, __nv_bfloat16* dx,
                                         cudaStream_t stream);
// dw = dlogits^T x and dbias = sum(dlogits), bf16, in `splits` slices of the rows (skinny_weight_grad_split);
// classes <= 16; in % 8 == 0.
cudaError_t launch_skinny_weight_grad_mma(const float* dlogits, int classes, const __nv_bfloat16* x, std::int64_t rows,
                                          std::int64_t in, __nv_bfloat16* dw, __nv_bfloat16* dbias,
                                          const RowSums& sums, SkinnyScratch scratch, int splits,
                                          cudaStream_t stream);

}  // namespace sprintnet::cuda
