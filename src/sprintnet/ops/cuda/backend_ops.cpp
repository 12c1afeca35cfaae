// The CUDA backend's compute ops: check what ops.cpp does not (fp32 only, the
// operand is on this device), derive the kernel's scalars, and launch on the
// backend's stream. Shapes were checked by the public entry points (ops.cpp).
#include <cmath>

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/ops/cuda/cuda_backend.h"
#include "sprintnet/ops/cuda/device_guard.h"
#include "sprintnet/ops/cuda/gemm.h"
#include "sprintnet/ops/cuda/launch.h"
#include "sprintnet/ops/cuda/step_launch.h"
#include "sprintnet/ops/cuda/stream_scope.h"

namespace sprintnet::cuda {
namespace {

void check_operand(const Tensor& t, DType dtype, Device device, std::string_view op, std::string_view what) {
  SN_CHECK(t.device() == device, "{} on {}: {} is on {}", op, device.str(), what, t.device().str());
  SN_CHECK(t.dtype() == dtype, "{} on {}: {} is {}, expected {}{}", op, device.str(), what, dtype_name(t.dtype()),
           dtype_name(dtype),
           t.dtype() == DType::kF64 ? " (the CUDA backend computes in fp32; fp64 runs on the CPU backend)" : "");
}

void check_loss_sum(const Tensor& t, Device device, std::string_view op) {
  SN_CHECK(t.device() == device && (t.dtype() == DType::kF32 || t.dtype() == DType::kF64),
           "{} on {}: loss_sum must be an fp32 or fp64 tensor on this device, is {} on {}", op, device.str(),
           dtype_name(t.dtype()), t.device().str());
}

ActivationKind kernel_kind(Activation act) {
  switch (act) {
    case Activation::kIdentity: return ActivationKind::kIdentity;
    case Activation::kReLU: return ActivationKind::kReLU;
    case Activation::kGELU: return ActivationKind::kGELU;
    case Activation::kTanh: return ActivationKind::kTanh;
    case Activation::kSigmoid: return ActivationKind::kSigmoid;
    case Activation::kSiLU: return ActivationKind::kSiLU;
  }
  SN_FAIL("unknown activation {}", static_cast<int>(act));
}

}  // namespace

void CudaBackend::axpy(const Tensor& y, const Tensor& x, double alpha) {
  check_operand(y, DType::kF32, device(), "axpy", "y");
  check_operand(x, DType::kF32, device(), "axpy", "x");
  const DeviceGuard guard(index_);
  SN_CUDA_CHECK(launch_axpy(y.data<float>(), x.data<float>(), y.numel(), static_cast<float>(alpha), stream()));
}

void CudaBackend::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, double alpha,
                       double beta) {
  check_operand(a, DType::kF32, device(), "gemm", "a");
  check_operand(b, DType::kF32, device(), "gemm", "b");
  check_operand(c, DType::kF32, device(), "gemm", "c");
  const DeviceGuard guard(index_);
  const std::int64_t m = c.size(0), n = c.size(1), k = a.size(trans_a ? 0 : 1);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = beta * C (cuBLASLt does not take k = 0)
    SN_CUDA_CHECK(launch_scale(c.data<float>(), c.numel(), static_cast<float>(beta), stream()));
    return;
  }
  const GemmDesc desc{.m = m,
                      .n = n,
                      .k = k,
                      .trans_a = trans_a,
                      .trans_b = trans_b,
                      .precision = GemmPrecision::kF32,
                      .epilogue = GemmEpilogue::kNone,
                      .align_a = pointer_alignment(a.raw_data()),
                      .align_b = pointer_alignment(b.raw_data()),
                      .align_c = pointer_alignment(c.raw_data())};
  resources().gemm->run(desc, a.data<float>(), b.data<float>(), c.data<float>(), static_cast<float>(alpha),
                        static_cast<float>(beta), stream());
}

void CudaBackend::add_bias(const Tensor& y, const Tensor& bias) {
  check_operand(y, DType::kF32, device(), "add_bias", "y");
  check_operand(bias, DType::kF32, device(), "add_bias", "bias");
  const DeviceGuard guard(index_);
  SN_CUDA_CHECK(launch_add_bias(y.data<float>(), bias.data<float>(), y.size(0), y.size(1), stream()));
}

void CudaBackend::sum_rows(const Tensor& x, const Tensor& out, double beta) {
  check_operand(x, DType::kF32, device(), "sum_rows", "x");
  check_operand(out, DType::kF32, device(), "sum_rows", "out");
  const DeviceGuard guard(index_);
  SN_CUDA_CHECK(launch_sum_rows(x.data<float>(), ElementType::kF32, x.size(0), x.size(1), static_cast<float>(beta),
                                out.data<float>(), stream()));
}

void CudaBackend::activation_forward(Activation act, const Tensor& x, const Tensor& y) {
  check_operand(x, DType::kF32, device(), "activation_forward", "x");
  check_operand(y, DType::kF32, device(), "activation_forward", "y");
  const DeviceGuard guard(index_);
  SN_CUDA_CHECK(
      launch_activation_forward(kernel_kind(act), ElementType::kF32, x.data<float>(), y.data<float>(), x.numel(), stream()));
}

void CudaBackend::activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy,
                                      const Tensor& dx) {
  check_operand(x, DType::kF32, device(), "activation_backward", "x");
  check_operand(y, DType::kF32, device(), "activation_backward", "y");
  check_operand(dy, DType::kF32, device(), "activation_backward", "dy");
  check_operand(dx, DType::kF32, device(), "activation_backward", "dx");
  const DeviceGuard guard(index_);
  SN_CUDA_CHECK(launch_activation_backward(kernel_kind(act), ElementType::kF32, x.data<float>(), y.data<float>(),
                                           dy.data<float>(), dx.data<float>(), x.numel(), stream()));
}

void CudaBackend::cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing,
                                const Tensor& loss_sum, double loss_scale, const Tensor* dlogits, double grad_scale) {
  check_operand(logits, DType::kF32, device(), "cross_entropy", "logits");
  check_operand(labels, DType::kI32, device(), "cross_entropy", "labels");
  check_loss_sum(loss_sum, device(), "cross_entropy");
  if (dlogits != nullptr) check_operand(*dlogits, DType::kF32, device(), "cross_entropy", "dlogits");
  const std::int64_t rows = logits.size(0), classes = logits.size(1);
  if (rows == 0) return;
  SN_CHECK(classes >= 1, "cross_entropy: logits {} have no classes", shape_str(logits.shape()));
  const DeviceGuard guard(index_);
  // Per-row losses, summed afterwards in a fixed order (deterministic). Freed at the end of this call:
  // the allocator is stream-ordered, so the memory is reused only by work queued after the sum.
  const Tensor row_loss = Tensor::empty({rows}, DType::kF64, device());
  SN_CUDA_CHECK(launch_cross_entropy(logits.data<float>(), labels.data<std::int32_t>(), rows, classes,
                                     static_cast<float>(label_smoothing), row_loss.data<double>(),
                                     dlogits != nullptr ? dlogits->data<float>() : nullptr,
                                     static_cast<float>(grad_scale), resources().device_error, stream()));
  SN_CUDA_CHECK(launch_accumulate_sum(row_loss.data<double>(), rows, loss_sum.raw_data(),
                                      loss_sum.dtype() == DType::kF64, loss_scale, stream()));
}

void CudaBackend::mse_one_hot(const Tensor& pred, const Tensor& labels, const Tensor& loss_sum, double loss_scale,
                              const Tensor* dpred, double grad_scale) {
  check_operand(pred, DType::kF32, device(), "mse", "pred");
  check_operand(labels, DType::kI32, device(), "mse", "labels");
  check_loss_sum(loss_sum, device(), "mse");
  if (dpred != nullptr) check_operand(*dpred, DType::kF32, device(), "mse", "dpred");
  const std::int64_t rows = pred.size(0), classes = pred.size(1);
  if (rows == 0) return;
  SN_CHECK(classes >= 1, "mse: pred {} has no classes", shape_str(pred.shape()));
  const DeviceGuard guard(index_);
  const Tensor row_loss = Tensor::empty({rows}, DType::kF64, device());  // as in cross_entropy
  SN_CUDA_CHECK(launch_mse_one_hot(pred.data<float>(), labels.data<std::int32_t>(), rows, classes,
                                   row_loss.data<double>(), dpred != nullptr ? dpred->data<float>() : nullptr,
                                   static_cast<float>(grad_scale), resources().device_error, stream()));
  SN_CUDA_CHECK(launch_accumulate_sum(row_loss.data<double>(), rows, loss_sum.raw_data(),
                                      loss_sum.dtype() == DType::kF64, loss_scale, stream()));
}

void CudaBackend::count_correct(const Tensor& logits, const Tensor& labels, const Tensor& correct) {
  check_operand(logits, DType::kF32, device(), "count_correct", "logits");
  check_operand(labels, DType::kI32, device(), "count_correct", "labels");
  check_operand(correct, DType::kI32, device(), "count_correct", "counter");
  const DeviceGuard guard(index_);
  SN_CUDA_CHECK(launch_count_correct(logits.data<float>(), labels.data<std::int32_t>(), logits.size(0),
                                     logits.size(1), correct.data<std::int32_t>(), stream()));
}

void CudaBackend::sgd_step(const Tensor& param, const Tensor& grad, const Tensor* momentum_buf, const SgdHyper& h) {
  check_operand(param, DType::kF32, device(), "sgd_step", "param");
  check_operand(grad, DType::kF32, device(), "sgd_step", "grad");
  const bool use_momentum = h.momentum != 0.0;
  SN_CHECK(!use_momentum || momentum_buf != nullptr, "sgd_step: momentum {} needs a momentum buffer", h.momentum);
  if (momentum_buf != nullptr) check_operand(*momentum_buf, DType::kF32, device(), "sgd_step", "momentum buffer");
  const SgdScalars s{.lr = static_cast<float>(h.lr),
                     .weight_decay = static_cast<float>(h.weight_decay),
                     .momentum = static_cast<float>(h.momentum),
                     .keep = static_cast<float>(1.0 - h.dampening),
                     .use_momentum = use_momentum,
                     .nesterov = h.nesterov,
                     .first_step = h.first_step};
  const DeviceGuard guard(index_);
  SN_CUDA_CHECK(launch_sgd_step(param.data<float>(), grad.data<float>(),
                                use_momentum ? momentum_buf->data<float>() : nullptr, param.numel(), s, stream()));
}

void CudaBackend::adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                            const AdamHyper& h) {
  check_operand(param, DType::kF32, device(), "adam_step", "param");
  check_operand(grad, DType::kF32, device(), "adam_step", "grad");
  check_operand(exp_avg, DType::kF32, device(), "adam_step", "exp_avg");
  check_operand(exp_avg_sq, DType::kF32, device(), "adam_step", "exp_avg_sq");
  // The same scalars as the CPU backend: step = lr / (1 - beta1^t), denom = sqrt(v) / sqrt(1 - beta2^t) + eps.
  const double bias1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bias2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  const AdamScalars s{.step_size = static_cast<float>(h.lr / bias1),
                      .bias2_sqrt = static_cast<float>(std::sqrt(bias2)),
                      .beta1 = static_cast<float>(h.beta1),
                      .beta2 = static_cast<float>(h.beta2),
                      .eps = static_cast<float>(h.eps),
                      .one_minus_beta1 = static_cast<float>(1.0 - h.beta1),
                      .one_minus_beta2 = static_cast<float>(1.0 - h.beta2),
                      .weight_decay = static_cast<float>(h.weight_decay),
                      .decoupled_keep = static_cast<float>(1.0 - h.lr * h.weight_decay),
                      .decoupled = h.decoupled};
  const DeviceGuard guard(index_);
  SN_CUDA_CHECK(launch_adam_step(param.data<float>(), grad.data<float>(), exp_avg.data<float>(),
                                 exp_avg_sq.data<float>(), param.numel(), s, stream()));
}

void CudaBackend::gather_rows_u8(const Tensor& src, const Tensor& indices, const Tensor& dst, double scale,
                                 double shift) {
  check_operand(src, DType::kU8, device(), "gather_rows_u8", "src");
  check_operand(indices, DType::kI32, device(), "gather_rows_u8", "indices");
  check_operand(dst, DType::kF32, device(), "gather_rows_u8", "dst");
  const std::int64_t count = indices.numel(), src_rows = src.size(0), cols = src.size(1);
  if (count == 0 || cols == 0) return;
  SN_CHECK(src_rows >= 1, "gather_rows_u8: src {} has no rows to gather", shape_str(src.shape()));
  const DeviceGuard guard(index_);
  GatherArgs args{};  // batch_gather.cu, the compiled step's gather, with the caller's indices checked
  args.images = src.data<std::uint8_t>();
  args.features = cols;
  args.order = indices.data<std::int32_t>();
  args.rows = count;
  args.scale = static_cast<float>(scale);
  args.shift = static_cast<float>(shift);
  args.dst = dst.data<float>();
  args.dst_type = ElementType::kF32;
  args.error = resources().device_error;
  args.samples = src_rows;
  SN_CUDA_CHECK(launch_gather_batch(args, stream()));
}

void CudaBackend::gather_labels(const Tensor& labels, const Tensor& indices, const Tensor& dst) {
  check_operand(labels, DType::kI32, device(), "gather_labels", "labels");
  check_operand(indices, DType::kI32, device(), "gather_labels", "indices");
  check_operand(dst, DType::kI32, device(), "gather_labels", "dst");
  const std::int64_t count = indices.numel();
  if (count == 0) return;
  SN_CHECK(labels.numel() >= 1, "gather_labels: labels are empty, nothing to gather");
  const DeviceGuard guard(index_);
  GatherArgs args{};  // batch_gather.cu with labels only
  args.labels = labels.data<std::int32_t>();
  args.order = indices.data<std::int32_t>();
  args.rows = count;
  args.dst_labels = dst.data<std::int32_t>();
  args.error = resources().device_error;
  args.samples = labels.numel();
  SN_CUDA_CHECK(launch_gather_batch(args, stream()));
}

}  // namespace sprintnet::cuda
