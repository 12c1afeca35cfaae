#pragma once
// The CPU backend: oneDNN (fp32) and OpenBLAS (fp64) for matrix products, OpenMP loops for the rest.
// It is also the reference every CUDA op is tested against, so it favours
// plain, obviously-correct loops and a fixed reduction order (results are
// identical run to run for a fixed thread count).
#include "sprintnet/ops/backend.h"

namespace sprintnet {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu(); }
  Allocator& allocator() override;
  void synchronize() override {}

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
};

// The CPU threads of the products and loops (OpenMP, OpenBLAS, oneDNN): what torch.set_num_threads sets. It sets
// OpenMP's thread count for the calling thread (omp_set_num_threads), so the program's own parallel regions on
// that thread get as many. 0 means default_cpu_threads(). At most kMaxCpuThreads (device.threads' bound in
// io/config_schema.cpp): OpenMP asked for more threads than the system allows crashes instead of failing.
inline constexpr int kMaxCpuThreads = 1024;
void set_cpu_threads(int threads);
// The count in force; the first CPU op sets the default when nothing was set before.
int cpu_threads();
// OMP_NUM_THREADS's first count when it is set (as PyTorch reads it), else usable_cores().
int default_cpu_threads();
// The cores this process may run on: its CPU affinity (what a Slurm job's or a container's cpuset allows).
int usable_cores();
// The eager CPU ops' fp32 matrix product, for a run's banner: "oneDNN 2.6.3 sgemm (avx512_core_amx)".
std::string eager_gemm_description();

}  // namespace sprintnet
