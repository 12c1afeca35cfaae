#pragma once
// The one interface both backends implement. Every op here has a CPU version
// (ops/cpu/, the reference) and a CUDA version (ops/cuda/); the public entry
// points in ops/ops.h check shapes and dtypes, then call the tensor's backend.
//
// Conventions: tensors are contiguous and row-major; matrices are [rows, cols];
// a batch is the first axis. Floating ops run in the tensors' own dtype (fp32,
// and fp64 on the CPU for gradient checks). Ops never synchronise the host with
// a device: results that are reduced (loss, accuracy) are written into tensors.
#include <cstdint>
#include <memory>
#include <string>

#include "sprintnet/core/device.h"
#include "sprintnet/core/tensor.h"

namespace sprintnet {

class Allocator;

enum class Activation { kIdentity, kReLU, kGELU, kTanh, kSigmoid, kSiLU };

// torch.optim.SGD semantics: g = grad + wd*p; buf = momentum*buf + (1-dampening)*g
// (buf = g on the first step); g = nesterov ? g + momentum*buf : buf; p -= lr*g.
struct SgdHyper {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool first_step = true;  // momentum buffer starts as the gradient
};

// torch.optim.Adam / AdamW semantics. decoupled: p *= 1 - lr*wd (AdamW);
// otherwise g += wd*p (Adam). step counts from 1 (bias correction).
struct AdamHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;
  std::int64_t step = 1;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual Allocator& allocator() = 0;
  virtual void synchronize() = 0;

  // dst and src have the same dtype and byte size; one of them lives on this backend's device.
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  virtual void fill(const Tensor& t, double value) = 0;
  // y += alpha * x, elementwise (same shape and floating dtype).
  virtual void axpy(const Tensor& y, const Tensor& x, double alpha) = 0;

  // c = alpha * op(a) @ op(b) + beta * c, op(x) = trans ? x^T : x. beta = 0 ignores c's contents.
  virtual void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, double alpha,
                    double beta) = 0;
  // y[n, :] += bias
  virtual void add_bias(const Tensor& y, const Tensor& bias) = 0;
  // out[j] = sum_n x[n, j] + beta * out[j]
  virtual void sum_rows(const Tensor& x, const Tensor& out, double beta) = 0;
  // y = f(x), elementwise; may run in place (y aliases x).
  virtual void activation_forward(Activation act, const Tensor& x, const Tensor& y) = 0;
  // dx = f'(x) * dy; x is the input and y the output of the forward pass (each op reads what it needs).
  virtual void activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy,
                                   const Tensor& dx) = 0;

  // Softmax cross-entropy over logits [N, C] with int32 labels [N], fused with log-sum-exp.
  // loss_sum[0] += loss_scale * sum_n loss_n (loss_sum fp32 or fp64 [1]). With label smoothing s the
  // target is (1-s)*onehot + s/C, as in torch.nn.CrossEntropyLoss.
  // When dlogits is given: dlogits = grad_scale * (softmax - target).
  virtual void cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing,
                             const Tensor& loss_sum, double loss_scale, const Tensor* dlogits, double grad_scale) = 0;
  // Squared error against one-hot labels: loss_sum[0] += loss_scale * sum (pred - onehot)^2;
  // dpred = grad_scale * 2 * (pred - onehot).
  virtual void mse_one_hot(const Tensor& pred, const Tensor& labels, const Tensor& loss_sum, double loss_scale,
                           const Tensor* dpred, double grad_scale) = 0;
  // correct[0] (int32 [1]) += number of rows whose argmax equals the label (first maximum wins).
  virtual void count_correct(const Tensor& logits, const Tensor& labels, const Tensor& correct) = 0;

  // In-place parameter updates; momentum_buf may be null when momentum == 0.
  virtual void sgd_step(const Tensor& param, const Tensor& grad, const Tensor* momentum_buf, const SgdHyper& h) = 0;
  virtual void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                         const AdamHyper& h) = 0;

  // dst[i, :] = float(src[indices[i], :]) * scale + shift; src uint8 [N, D], indices int32 [B], dst [B, D].
  virtual void gather_rows_u8(const Tensor& src, const Tensor& indices, const Tensor& dst, double scale,
                              double shift) = 0;
  // dst[i] = labels[indices[i]]; labels and dst int32.
  virtual void gather_labels(const Tensor& labels, const Tensor& indices, const Tensor& dst) = 0;
};

Backend& backend_for(Device device);
Backend& cpu_backend();
// Number of usable CUDA devices; 0 in a CPU-only build or when no driver/GPU is present.
int cuda_device_count();
// Why CUDA is unavailable, for messages ("built without CUDA", "no CUDA device: ...").
std::string cuda_unavailable_reason();

// While the returned object lives, this thread's work on CUDA device `index` runs on a stream of its
// own (cuda::StreamScope, ops/cuda/stream_scope.h): training runs in worker threads of one process
// then share the GPU side by side. Throws in a build without CUDA.
class ThreadStream {
 public:
  virtual ~ThreadStream() = default;
};
std::unique_ptr<ThreadStream> open_thread_stream(int index);

}  // namespace sprintnet
