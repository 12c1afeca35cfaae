#pragma once
// The CUDA backend: every op of ops/backend.h for fp32 tensors on one device.
// (fp64 ops are an Error here: the CPU backend is the fp64 reference.)
//
// Execution model: one non-blocking stream per device (or per worker thread
// inside a StreamScope, stream_scope.h); every kernel, cuBLASLt call, fill and
// device-to-device copy is enqueued on it, and the host never waits except in
// synchronize() and in copies that involve host memory. A
// kernel that finds a bad label or index records it in a small device buffer
// (device_error.h); synchronize() and copies to the host report it as an Error.
//
// Kernels live one op per .cu file (kernel and launcher, declared in launch.h);
// the methods here (cuda_backend.cpp, backend_ops.cpp) check operands and launch.
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "sprintnet/ops/backend.h"

namespace sprintnet::cuda {

// Number of CUDA devices; 0 when there is no driver or no device. Never throws.
int device_count();
// Why CUDA cannot be used (the CUDA runtime's error), or "" when it can.
std::string unavailable_reason();
// The backend of device `index`, created on first use and never destroyed.
Backend& backend(int index);

struct StreamResources;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  // This thread's stream: its StreamScope's on this device, else the backend's.
  cudaStream_t stream() const;

  Device device() const override { return Device::cuda(index_); }
  Allocator& allocator() override;
  void synchronize() override;

  void copy(const Tensor& dst, const Tensor& src) override;
  void fill(const Tensor& t, double value) override;
  void axpy(const Tensor& y, const Tensor& x, double alpha) override;
  void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, double alpha,
            double beta) override;
  void add_bias(const Tensor& y, const Tensor& bias) override;
  void sum_rows(const Tensor& x, const Tensor& out, double beta) override;
  void activation_forward(Activation act, const Tensor& x, const Tensor& y) override;
  void activation_backward(Activation act, const Tensor& x, const Tensor& y, const Tensor& dy,
                           const Tensor& dx) override;
  void cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing, const Tensor& loss_sum,
                     double loss_scale, const Tensor* dlogits, double grad_scale) override;
  void mse_one_hot(const Tensor& pred, const Tensor& labels, const Tensor& loss_sum, double loss_scale,
                   const Tensor* dpred, double grad_scale) override;
  void count_correct(const Tensor& logits, const Tensor& labels, const Tensor& correct) override;
  void sgd_step(const Tensor& param, const Tensor& grad, const Tensor* momentum_buf, const SgdHyper& h) override;
  void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamHyper& h) override;
  void gather_rows_u8(const Tensor& src, const Tensor& indices, const Tensor& dst, double scale,
                      double shift) override;
  void gather_labels(const Tensor& labels, const Tensor& indices, const Tensor& dst) override;

 private:
  // This thread's stream, error record and GEMM workspace (see stream()).
  StreamResources& resources() const;
  // Waits for the stream (having queued a copy of the error record), then throws if a kernel recorded an error.
  void wait_and_check_device_errors();

  int index_;
  std::unique_ptr<StreamResources> shared_;  // threads without a StreamScope
};

}  // namespace sprintnet::cuda
