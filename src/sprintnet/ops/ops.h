#pragma once
// Public entry points of every op: check devices, dtypes and shapes with
// messages that name the operand, then run the op on the tensors' backend.
// Modules, losses and optimizers call these, never a backend directly. Each
// counts a write into every tensor it writes (Tensor::mark_modified): modules
// refuse a backward whose saved tensors were written since their forward.
#include "sprintnet/ops/backend.h"

namespace sprintnet::ops {

void copy(const Tensor& dst, const Tensor& src);
void fill(const Tensor& t, double value);
// y += alpha * x
void axpy(const Tensor& y, const Tensor& x, double alpha = 1.0);
// c = alpha * op(a) @ op(b) + beta * c
void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, double alpha = 1.0,
          double beta = 0.0);
void add_bias(const Tensor& y, const Tensor& bias);
void sum_rows(const Tensor& x, const Tensor& out, double beta = 0.0);
void activation_forward(Activation act, const Tensor& x, const Tensor& y);
void activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dx);
void cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing, const Tensor& loss_sum,
                   double loss_scale, const Tensor* dlogits, double grad_scale);
void mse_one_hot(const Tensor& pred, const Tensor& labels, const Tensor& loss_sum, double loss_scale,
                 const Tensor* dpred, double grad_scale);
// Adds to `correct` the rows whose argmax (first on ties) is their label. A label outside [0, classes) is a miss,
// as `(logits.argmax(1) == y).sum()` counts it: the losses, not the counter, check labels. (Rows holding a NaN are not
// counted as torch.argmax would, which takes the NaN: their logits come from a diverged run, which the Trainer stops.)
void count_correct(const Tensor& logits, const Tensor& labels, const Tensor& correct);
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor* momentum_buf, const SgdHyper& h);
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const AdamHyper& h);
void gather_rows_u8(const Tensor& src, const Tensor& indices, const Tensor& dst, double scale, double shift);
void gather_labels(const Tensor& labels, const Tensor& indices, const Tensor& dst);

std::string_view activation_name(Activation act);
// "identity", "relu", "gelu", "tanh", "sigmoid", "silu"; throws on anything else.
Activation parse_activation(std::string_view name);

}  // namespace sprintnet::ops
