#pragma once
// Launchers of the CUDA kernels: one per op, each in its own .cu file, each
// enqueueing on the given stream and returning cudaGetLastError() so that the
// caller (the CudaBackend method, which checks dtypes first) can SN_CUDA_CHECK it.
//
// This header is deliberately free of sprintnet's core headers: nvcc compiles
// the .cu files, and fmt's compile-time format checks (consteval in C++20) do
// not compile under nvcc. Pointers are raw device pointers; sizes are element
// counts; a launch with nothing to do returns cudaSuccess without launching.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "sprintnet/ops/cuda/device_error.h"

namespace sprintnet::cuda {

// Mirrors sprintnet::Activation (mapped explicitly in backend_ops.cpp).
enum class ActivationKind : int { kIdentity, kReLU, kGELU, kTanh, kSigmoid, kSiLU };

// fill.cu: every element (of 1, 2, 4 or 8 bytes) set to the low `element_bytes` bytes of `pattern`.
cudaError_t launch_fill(void* data, std::int64_t count, int element_bytes, std::uint64_t pattern, cudaStream_t stream);
// fill.cu: y = beta * y; beta == 0 writes zeros (NaN in y does not survive).
cudaError_t launch_scale(float* y, std::int64_t count, float beta, cudaStream_t stream);

// axpy.cu: y += alpha * x
cudaError_t launch_axpy(float* y, const float* x, std::int64_t count, float alpha, cudaStream_t stream);

// bias.cu: y[r, c] += bias[c]
cudaError_t launch_add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t cols, cudaStream_t stream);

// activation.cu (declared in step_launch.h, with the element type): y = f(x); dx = f'(x) * dy.

// cross_entropy.cu: row_loss[r] = -sum_c target_c log softmax(x[r])_c; dlogits (may be null) = grad_scale * (softmax - target).
cudaError_t launch_cross_entropy(const float* logits, const std::int32_t* labels, std::int64_t rows,
                                 std::int64_t classes, float label_smoothing, double* row_loss, float* dlogits,
                                 float grad_scale, DeviceError* error, cudaStream_t stream);
// mse.cu: row_loss[r] = sum_c (pred - onehot)^2; dpred (may be null) = grad_scale * 2 * (pred - onehot).
cudaError_t launch_mse_one_hot(const float* pred, const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                               double* row_loss, float* dpred, float grad_scale, DeviceError* error,
                               cudaStream_t stream);
// reduce.cu: sum[0] += scale * sum_i values[i], summed in a fixed order by one block (deterministic).
// sum is float (sum_is_double false) or double.
cudaError_t launch_accumulate_sum(const double* values, std::int64_t count, void* sum, bool sum_is_double,
                                  double scale, cudaStream_t stream);
// count_correct.cu: correct[0] += #rows whose first maximum is at the label.
cudaError_t launch_count_correct(const float* logits, const std::int32_t* labels, std::int64_t rows,
                                 std::int64_t classes, std::int32_t* correct, cudaStream_t stream);

// optimizer.cu: the scalars are the ones the CPU backend derives from SgdHyper / AdamHyper.
struct SgdScalars {
  float lr, weight_decay, momentum, keep;  // keep = 1 - dampening
  bool use_momentum, nesterov, first_step;
};
cudaError_t launch_sgd_step(float* param, const float* grad, float* momentum_buf, std::int64_t count,
                            const SgdScalars& s, cudaStream_t stream);
struct AdamScalars {
  float step_size;       // lr / (1 - beta1^step)
  float bias2_sqrt;      // sqrt(1 - beta2^step)
  float beta1, beta2, eps;
  float one_minus_beta1, one_minus_beta2;  // computed in double: 1 - float(0.999) is 1.3e-5 relative off
  float weight_decay;    // Adam: added to the gradient
  float decoupled_keep;  // AdamW: 1 - lr * weight_decay
  bool decoupled;
};
cudaError_t launch_adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::int64_t count,
                             const AdamScalars& s, cudaStream_t stream);


}  // namespace sprintnet::cuda
