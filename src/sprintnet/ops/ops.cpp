#include "sprintnet/ops/ops.h"

#include <initializer_list>

namespace sprintnet::ops {
namespace {

void check_defined(const Tensor& t, std::string_view op, std::string_view what) {
  SN_CHECK(t.defined(), "{}: {} is undefined", op, what);
}

// All operands on one device; returns its backend.
Backend& common_backend(std::string_view op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = *tensors.begin();
  for (const Tensor* t : tensors) {
    SN_CHECK(t->device() == first->device(), "{}: operands on different devices ({} and {})", op,
             first->device().str(), t->device().str());
  }
  return backend_for(first->device());
}

void check_float(const Tensor& t, std::string_view op, std::string_view what) {
  SN_CHECK(t.dtype() == DType::kF32 || t.dtype() == DType::kF64, "{}: {} must be fp32 or fp64, is {}", op, what,
           dtype_name(t.dtype()));
}

void check_same_dtype(const Tensor& a, const Tensor& b, std::string_view op) {
  SN_CHECK(a.dtype() == b.dtype(), "{}: dtypes differ ({} and {})", op, dtype_name(a.dtype()), dtype_name(b.dtype()));
}

void check_matrix(const Tensor& t, std::string_view op, std::string_view what) {
  SN_CHECK(t.dim() == 2, "{}: {} must be a matrix, has shape {}", op, what, shape_str(t.shape()));
}

// `what`: the scores' name in messages (MSE's are predictions, not logits).
void check_labels(const Tensor& logits, const Tensor& labels, std::string_view op, std::string_view what = "logits") {
  check_matrix(logits, op, what);
  SN_CHECK(labels.dtype() == DType::kI32, "{}: labels must be int32, are {}", op, dtype_name(labels.dtype()));
  check_shape(labels, {logits.size(0)}, fmt::format("{}: labels", op));
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  check_defined(dst, "copy", "dst");
  check_defined(src, "copy", "src");
  SN_CHECK(dst.dtype() == src.dtype() && dst.numel() == src.numel(), "copy: {} {} into {} {}", dtype_name(src.dtype()),
           shape_str(src.shape()), dtype_name(dst.dtype()), shape_str(dst.shape()));
  backend_for(dst.device().is_cpu() ? src.device() : dst.device()).copy(dst, src);
}

void fill(const Tensor& t, double value) {
  check_defined(t, "fill", "tensor");
  check_fill_value(t.dtype(), value, "fill");
  backend_for(t.device()).fill(t, value);
}

void axpy(const Tensor& y, const Tensor& x, double alpha) {
  Backend& backend = common_backend("axpy", {&y, &x});
  check_float(y, "axpy", "y");
  check_same_dtype(y, x, "axpy");
  check_shape(x, y.shape(), "axpy: x");
  backend.axpy(y, x, alpha);
}

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, double alpha, double beta) {
  Backend& backend = common_backend("gemm", {&a, &b, &c});
  check_matrix(a, "gemm", "a");
  check_matrix(b, "gemm", "b");
  check_matrix(c, "gemm", "c");
  check_float(a, "gemm", "a");
  check_same_dtype(a, b, "gemm");
  check_same_dtype(a, c, "gemm");
  const auto m = a.size(trans_a ? 1 : 0), k = a.size(trans_a ? 0 : 1);
  const auto kb = b.size(trans_b ? 1 : 0), n = b.size(trans_b ? 0 : 1);
  SN_CHECK(k == kb, "gemm: inner dimensions differ: op(a) is [{}, {}], op(b) is [{}, {}]", m, k, kb, n);
  check_shape(c, {m, n}, "gemm: c");
  // The product reads a and b while it writes c: an overlap gives garbage (PyTorch refuses it too).
  const auto overlaps = [&](const Tensor& x) {
    const auto* begin = static_cast<const char*>(x.raw_data());
    const auto* c_begin = static_cast<const char*>(c.raw_data());
    return begin < c_begin + c.nbytes() && c_begin < begin + x.nbytes();
  };
  SN_CHECK(!overlaps(a) && !overlaps(b), "gemm: the output c overlaps the input {} in memory; write to another tensor",
           overlaps(a) ? "a" : "b");
  backend.gemm(a, trans_a, b, trans_b, c, alpha, beta);
}

void add_bias(const Tensor& y, const Tensor& bias) {
  Backend& backend = common_backend("add_bias", {&y, &bias});
  check_matrix(y, "add_bias", "y");
  check_float(y, "add_bias", "y");
  check_same_dtype(y, bias, "add_bias");
  check_shape(bias, {y.size(1)}, "add_bias: bias");
  backend.add_bias(y, bias);
}

void sum_rows(const Tensor& x, const Tensor& out, double beta) {
  Backend& backend = common_backend("sum_rows", {&x, &out});
  check_matrix(x, "sum_rows", "x");
  check_float(x, "sum_rows", "x");
  check_same_dtype(x, out, "sum_rows");
  check_shape(out, {x.size(1)}, "sum_rows: out");
  backend.sum_rows(x, out, beta);
}

void activation_forward(Activation act, const Tensor& x, const Tensor& y) {
  Backend& backend = common_backend("activation_forward", {&x, &y});
  check_float(x, "activation_forward", "x");
  check_same_dtype(x, y, "activation_forward");
  check_shape(y, x.shape(), "activation_forward: y");
  backend.activation_forward(act, x, y);
}

void activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dx) {
  Backend& backend = common_backend("activation_backward", {&x, &y, &dy, &dx});
  check_float(x, "activation_backward", "x");
  for (const Tensor* t : {&y, &dy, &dx}) {
    check_same_dtype(x, *t, "activation_backward");
    check_shape(*t, x.shape(), "activation_backward: operand");
  }
  backend.activation_backward(act, x, y, dy, dx);
}

void cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing, const Tensor& loss_sum,
                   double loss_scale, const Tensor* dlogits, double grad_scale) {
  Backend& backend = common_backend("cross_entropy", {&logits, &labels, &loss_sum});
  check_labels(logits, labels, "cross_entropy");
  check_float(logits, "cross_entropy", "logits");
  check_float(loss_sum, "cross_entropy", "loss_sum");
  check_shape(loss_sum, {1}, "cross_entropy: loss_sum");
  SN_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, "cross_entropy: label_smoothing {} not in [0, 1]",
           label_smoothing);
  if (dlogits != nullptr) {
    common_backend("cross_entropy", {&logits, dlogits});
    check_same_dtype(logits, *dlogits, "cross_entropy");
    check_shape(*dlogits, logits.shape(), "cross_entropy: dlogits");
  }
  backend.cross_entropy(logits, labels, label_smoothing, loss_sum, loss_scale, dlogits, grad_scale);
}

void mse_one_hot(const Tensor& pred, const Tensor& labels, const Tensor& loss_sum, double loss_scale,
                 const Tensor* dpred, double grad_scale) {
  Backend& backend = common_backend("mse", {&pred, &labels, &loss_sum});
  check_labels(pred, labels, "mse", "pred");
  check_float(pred, "mse", "pred");
  check_float(loss_sum, "mse", "loss_sum");
  check_shape(loss_sum, {1}, "mse: loss_sum");
  if (dpred != nullptr) {
    common_backend("mse", {&pred, dpred});
    check_same_dtype(pred, *dpred, "mse");
    check_shape(*dpred, pred.shape(), "mse: dpred");
  }
  backend.mse_one_hot(pred, labels, loss_sum, loss_scale, dpred, grad_scale);
}

void count_correct(const Tensor& logits, const Tensor& labels, const Tensor& correct) {
  Backend& backend = common_backend("count_correct", {&logits, &labels, &correct});
  check_labels(logits, labels, "count_correct");
  check_float(logits, "count_correct", "logits");
  SN_CHECK(correct.dtype() == DType::kI32, "count_correct: counter must be int32");
  check_shape(correct, {1}, "count_correct: counter");
  backend.count_correct(logits, labels, correct);
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor* momentum_buf, const SgdHyper& h) {
  Backend& backend = common_backend("sgd_step", {&param, &grad});
  check_float(param, "sgd_step", "param");
  check_same_dtype(param, grad, "sgd_step");
  check_shape(grad, param.shape(), "sgd_step: grad");
  SN_CHECK(h.momentum == 0.0 || momentum_buf != nullptr, "sgd_step: momentum {} needs a momentum buffer", h.momentum);
  if (momentum_buf != nullptr) {
    common_backend("sgd_step", {&param, momentum_buf});
    check_same_dtype(param, *momentum_buf, "sgd_step");
    check_shape(*momentum_buf, param.shape(), "sgd_step: momentum buffer");
  }
  backend.sgd_step(param, grad, momentum_buf, h);
}

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const AdamHyper& h) {
  Backend& backend = common_backend("adam_step", {&param, &grad, &exp_avg, &exp_avg_sq});
  check_float(param, "adam_step", "param");
  for (const Tensor* t : {&grad, &exp_avg, &exp_avg_sq}) {
    check_same_dtype(param, *t, "adam_step");
    check_shape(*t, param.shape(), "adam_step: operand");
  }
  SN_CHECK(h.step >= 1, "adam_step: step counts from 1, got {}", h.step);
  backend.adam_step(param, grad, exp_avg, exp_avg_sq, h);
}

void gather_rows_u8(const Tensor& src, const Tensor& indices, const Tensor& dst, double scale, double shift) {
  Backend& backend = common_backend("gather_rows_u8", {&src, &indices, &dst});
  SN_CHECK(src.dtype() == DType::kU8 && src.dim() == 2, "gather_rows_u8: src must be uint8 [N, D]");
  SN_CHECK(indices.dtype() == DType::kI32 && indices.dim() == 1, "gather_rows_u8: indices must be int32 [B]");
  check_float(dst, "gather_rows_u8", "dst");
  check_shape(dst, {indices.size(0), src.size(1)}, "gather_rows_u8: dst");
  backend.gather_rows_u8(src, indices, dst, scale, shift);
}

void gather_labels(const Tensor& labels, const Tensor& indices, const Tensor& dst) {
  Backend& backend = common_backend("gather_labels", {&labels, &indices, &dst});
  SN_CHECK(labels.dtype() == DType::kI32 && indices.dtype() == DType::kI32 && dst.dtype() == DType::kI32,
           "gather_labels: labels, indices and dst must be int32");
  SN_CHECK(labels.dim() == 1 && indices.dim() == 1, "gather_labels: labels and indices must be vectors, have shapes {} "
           "and {}", shape_str(labels.shape()), shape_str(indices.shape()));
  check_shape(dst, indices.shape(), "gather_labels: dst");
  backend.gather_labels(labels, indices, dst);
}

std::string_view activation_name(Activation act) {
  switch (act) {
    case Activation::kIdentity: return "identity";
    case Activation::kReLU: return "relu";
    case Activation::kGELU: return "gelu";
    case Activation::kTanh: return "tanh";
    case Activation::kSigmoid: return "sigmoid";
    case Activation::kSiLU: return "silu";
  }
  return "?";
}

Activation parse_activation(std::string_view name) {
  for (Activation a : {Activation::kIdentity, Activation::kReLU, Activation::kGELU, Activation::kTanh,
                       Activation::kSigmoid, Activation::kSiLU}) {
    if (activation_name(a) == name) return a;
  }
  SN_FAIL("unknown activation '{}' (expected identity, relu, gelu, tanh, sigmoid or silu)", name);
}

}  // namespace sprintnet::ops
