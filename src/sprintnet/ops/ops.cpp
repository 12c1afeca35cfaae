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

// An operand as messages name it: "the input x", "the output exp_avg".
struct Named {
  const Tensor& tensor;
  std::string_view name;
};

// Whether an elementwise op may write its output over the very elements it reads (torch's rule: exact aliasing).
enum class InPlace : bool { kRefused, kAllowed };

// Refuses an output that shares memory with another operand: the op would read elements it has already
// overwritten (or write one element twice), a silent wrong result; PyTorch refuses it too. kAllowed lets an
// elementwise op run in place (the same first element, shape and dtype: each element is read before it is
// written), and refuses only a partial overlap.
void check_no_overlap(std::string_view op, Named out, std::initializer_list<Named> others,
                      InPlace in_place = InPlace::kRefused) {
  for (const Named& other : others) {
    if (!out.tensor.overlaps(other.tensor)) continue;
    const bool same = out.tensor.raw_data() == other.tensor.raw_data() && out.tensor.shape() == other.tensor.shape() &&
                      out.tensor.dtype() == other.tensor.dtype();
    if (in_place == InPlace::kAllowed) {
      SN_CHECK(same, "{}: {} partially overlaps {} in memory (in place, the output must be the very tensor it reads); "
               "write to another tensor", op, out.name, other.name);
    } else {
      SN_FAIL("{}: {} overlaps {} in memory; write to another tensor", op, out.name, other.name);
    }
  }
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  check_defined(dst, "copy", "dst");
  check_defined(src, "copy", "src");
  // Shapes, not only element counts: a [3, 2] copied into [2, 3] is a mistake; a reshaping copy views one side.
  SN_CHECK(dst.dtype() == src.dtype() && dst.shape() == src.shape(), "copy: {} {} into {} {}: dtypes and shapes must "
           "match", dtype_name(src.dtype()), shape_str(src.shape()), dtype_name(dst.dtype()), shape_str(dst.shape()));
  check_no_overlap("copy", {dst, "the output dst"}, {{src, "the input src"}}, InPlace::kAllowed);
  if (dst.overlaps(src)) return;  // onto itself: nothing to do (torch's copy_ returns early too)
  backend_for(dst.device().is_cpu() ? src.device() : dst.device()).copy(dst, src);
  dst.mark_modified();
}

void fill(const Tensor& t, double value) {
  check_defined(t, "fill", "tensor");
  check_fill_value(t.dtype(), value, "fill");
  backend_for(t.device()).fill(t, value);
  t.mark_modified();
}

void axpy(const Tensor& y, const Tensor& x, double alpha) {
  Backend& backend = common_backend("axpy", {&y, &x});
  check_float(y, "axpy", "y");
  check_same_dtype(y, x, "axpy");
  check_shape(x, y.shape(), "axpy: x");
  check_no_overlap("axpy", {y, "the output y"}, {{x, "the input x"}}, InPlace::kAllowed);
  backend.axpy(y, x, alpha);
  y.mark_modified();
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
  // Each element of c reads a row of a and a column of b: not even an exact alias is safe.
  check_no_overlap("gemm", {c, "the output c"}, {{a, "the input a"}, {b, "the input b"}});
  backend.gemm(a, trans_a, b, trans_b, c, alpha, beta);
  c.mark_modified();
}

void add_bias(const Tensor& y, const Tensor& bias) {
  Backend& backend = common_backend("add_bias", {&y, &bias});
  check_matrix(y, "add_bias", "y");
  check_float(y, "add_bias", "y");
  check_same_dtype(y, bias, "add_bias");
  check_shape(bias, {y.size(1)}, "add_bias: bias");
  check_no_overlap("add_bias", {y, "the output y"}, {{bias, "the input bias"}});
  backend.add_bias(y, bias);
  y.mark_modified();
}

void sum_rows(const Tensor& x, const Tensor& out, double beta) {
  Backend& backend = common_backend("sum_rows", {&x, &out});
  check_matrix(x, "sum_rows", "x");
  check_float(x, "sum_rows", "x");
  check_same_dtype(x, out, "sum_rows");
  check_shape(out, {x.size(1)}, "sum_rows: out");
  check_no_overlap("sum_rows", {out, "the output out"}, {{x, "the input x"}});
  backend.sum_rows(x, out, beta);
  out.mark_modified();
}

void activation_forward(Activation act, const Tensor& x, const Tensor& y) {
  Backend& backend = common_backend("activation_forward", {&x, &y});
  check_float(x, "activation_forward", "x");
  check_same_dtype(x, y, "activation_forward");
  check_shape(y, x.shape(), "activation_forward: y");
  check_no_overlap("activation_forward", {y, "the output y"}, {{x, "the input x"}}, InPlace::kAllowed);
  backend.activation_forward(act, x, y);
  y.mark_modified();
}

void activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dx) {
  Backend& backend = common_backend("activation_backward", {&x, &y, &dy, &dx});
  check_float(x, "activation_backward", "x");
  for (const Tensor* t : {&y, &dy, &dx}) {
    check_same_dtype(x, *t, "activation_backward");
    check_shape(*t, x.shape(), "activation_backward: operand");
  }
  check_no_overlap("activation_backward", {dx, "the output dx"},
                   {{x, "the input x"}, {y, "the input y"}, {dy, "the input dy"}}, InPlace::kAllowed);
  backend.activation_backward(act, x, y, dy, dx);
  dx.mark_modified();
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
    // Reductions over rows, not elementwise: no in-place.
    check_no_overlap("cross_entropy", {*dlogits, "the output dlogits"},
                     {{logits, "the input logits"}, {labels, "the input labels"}, {loss_sum, "the output loss_sum"}});
  }
  check_no_overlap("cross_entropy", {loss_sum, "the output loss_sum"},
                   {{logits, "the input logits"}, {labels, "the input labels"}});
  backend.cross_entropy(logits, labels, label_smoothing, loss_sum, loss_scale, dlogits, grad_scale);
  loss_sum.mark_modified();
  if (dlogits != nullptr) dlogits->mark_modified();
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
    check_no_overlap("mse", {*dpred, "the output dpred"},
                     {{pred, "the input pred"}, {labels, "the input labels"}, {loss_sum, "the output loss_sum"}});
  }
  check_no_overlap("mse", {loss_sum, "the output loss_sum"}, {{pred, "the input pred"}, {labels, "the input labels"}});
  backend.mse_one_hot(pred, labels, loss_sum, loss_scale, dpred, grad_scale);
  loss_sum.mark_modified();
  if (dpred != nullptr) dpred->mark_modified();
}

void count_correct(const Tensor& logits, const Tensor& labels, const Tensor& correct) {
  Backend& backend = common_backend("count_correct", {&logits, &labels, &correct});
  check_labels(logits, labels, "count_correct");
  check_float(logits, "count_correct", "logits");
  SN_CHECK(correct.dtype() == DType::kI32, "count_correct: counter must be int32");
  check_shape(correct, {1}, "count_correct: counter");
  check_no_overlap("count_correct", {correct, "the counter"},
                   {{logits, "the input logits"}, {labels, "the input labels"}});
  backend.count_correct(logits, labels, correct);
  correct.mark_modified();
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
    check_no_overlap("sgd_step", {*momentum_buf, "the output momentum buffer"},
                     {{param, "the output param"}, {grad, "the input grad"}});
  }
  // No in-place: the CPU kernels take restrict pointers (any aliasing is undefined behaviour), and Adam's
  // reads grad after it has shrunk param.
  check_no_overlap("sgd_step", {param, "the output param"}, {{grad, "the input grad"}});
  backend.sgd_step(param, grad, momentum_buf, h);
  param.mark_modified();
  if (momentum_buf != nullptr) momentum_buf->mark_modified();
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
  // As sgd_step: no in-place, and each state a tensor of its own.
  check_no_overlap("adam_step", {param, "the output param"},
                   {{grad, "the input grad"}, {exp_avg, "the output exp_avg"}, {exp_avg_sq, "the output exp_avg_sq"}});
  check_no_overlap("adam_step", {exp_avg, "the output exp_avg"},
                   {{grad, "the input grad"}, {exp_avg_sq, "the output exp_avg_sq"}});
  check_no_overlap("adam_step", {exp_avg_sq, "the output exp_avg_sq"}, {{grad, "the input grad"}});
  backend.adam_step(param, grad, exp_avg, exp_avg_sq, h);
  for (const Tensor* t : {&param, &exp_avg, &exp_avg_sq}) t->mark_modified();
}

void gather_rows_u8(const Tensor& src, const Tensor& indices, const Tensor& dst, double scale, double shift) {
  Backend& backend = common_backend("gather_rows_u8", {&src, &indices, &dst});
  SN_CHECK(src.dtype() == DType::kU8 && src.dim() == 2, "gather_rows_u8: src must be uint8 [N, D]");
  SN_CHECK(indices.dtype() == DType::kI32 && indices.dim() == 1, "gather_rows_u8: indices must be int32 [B]");
  check_float(dst, "gather_rows_u8", "dst");
  check_shape(dst, {indices.size(0), src.size(1)}, "gather_rows_u8: dst");
  check_no_overlap("gather_rows_u8", {dst, "the output dst"}, {{src, "the input src"}, {indices, "the input indices"}});
  backend.gather_rows_u8(src, indices, dst, scale, shift);
  dst.mark_modified();
}

void gather_labels(const Tensor& labels, const Tensor& indices, const Tensor& dst) {
  Backend& backend = common_backend("gather_labels", {&labels, &indices, &dst});
  SN_CHECK(labels.dtype() == DType::kI32 && indices.dtype() == DType::kI32 && dst.dtype() == DType::kI32,
           "gather_labels: labels, indices and dst must be int32");
  SN_CHECK(labels.dim() == 1 && indices.dim() == 1, "gather_labels: labels and indices must be vectors, have shapes {} "
           "and {}", shape_str(labels.shape()), shape_str(indices.shape()));
  check_shape(dst, indices.shape(), "gather_labels: dst");
  // Not elementwise: no in-place (torch's index_select refuses it too).
  check_no_overlap("gather_labels", {dst, "the output dst"},
                   {{labels, "the input labels"}, {indices, "the input indices"}});
  backend.gather_labels(labels, indices, dst);
  dst.mark_modified();
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
