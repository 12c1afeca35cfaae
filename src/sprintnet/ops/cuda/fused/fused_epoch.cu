// The fused engine's kernel: a whole epoch (or evaluation) in one persistent,
// cooperatively launched kernel (docs/FUSED.md). Each step is a fixed sequence
// of stages separated by grid barriers; in each stage the blocks take the
// stage's tile jobs round-robin:
//
//   forward l     X_l = act(X_{l-1} · W_lᵀ + b_l)                  32x32 tiles
//   loss          logits, softmax cross-entropy (or MSE), dlogits, 16-row tiles
//                 per-row loss and hit
//   backward l    dZ_{l-1} = (dZ_l · W_l) ⊙ act'   and   dW_l = dZ_lᵀ · X_{l-1}
//                 applied at once by the optimizer (bf16), 32x64 tiles
//   last          dW_1 applied, and the next step's batch gathered
//
// Weights are double-buffered in the compute type (a step reads copies[step % 2],
// its updates write the other), so an update can share a stage with the products
// that still read the old weights: 2 L barriers a step for L layers. fp16 stores
// the gradients and applies them in one more stage, once it knows whether any is
// not finite (dynamic loss scaling). Every sum has a fixed order: reruns are
// bit-identical.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "sprintnet/ops/cuda/activation_math.cuh"
#include "sprintnet/ops/cuda/flat_update.cuh"
#include "sprintnet/ops/cuda/fused/fused_epoch.h"
#include "sprintnet/ops/cuda/fused/grid_barrier.cuh"
#include "sprintnet/ops/cuda/fused/progress_record.cuh"
#include "sprintnet/ops/cuda/fused/row_loss.cuh"
#include "sprintnet/ops/cuda/fused/tile_product.cuh"
#include "sprintnet/ops/cuda/launch_config.cuh"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

using fused::Matrix;
using fused::tile_product;
using fused::TileShape;

static_assert(fused::kThreads == kFusedThreads);
constexpr int kTile = 32;                  // forward and input-gradient tiles: 32 x 32
constexpr int kLossRows = 16;              // loss tiles: 16 rows x all classes
constexpr int kWgradRows = 32, kWgradCols = 64;  // weight-gradient tiles

template <typename T>
__device__ __forceinline__ T to_t(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 to_t<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half to_t<__half>(float v) { return __float2half_rn(v); }
__device__ __forceinline__ float from_t(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float from_t(__half v) { return __half2float(v); }

__device__ __forceinline__ std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

__device__ float activation(ActivationKind kind, float x) {
  switch (kind) {
    case ActivationKind::kIdentity: return activate<ActivationKind::kIdentity>(x);
    case ActivationKind::kReLU: return activate<ActivationKind::kReLU>(x);
    case ActivationKind::kGELU: return activate<ActivationKind::kGELU>(x);
    case ActivationKind::kTanh: return activate<ActivationKind::kTanh>(x);
    case ActivationKind::kSigmoid: return activate<ActivationKind::kSigmoid>(x);
    case ActivationKind::kSiLU: return activate<ActivationKind::kSiLU>(x);
  }
  return x;
}

// f'(x) from the stored pre-activation x (GELU, tanh, sigmoid, SiLU) or output y (ReLU).
__device__ float activation_slope(ActivationKind kind, float x, float y) {
  switch (kind) {
    case ActivationKind::kIdentity: return 1.0f;
    case ActivationKind::kReLU: return y > 0.0f ? 1.0f : 0.0f;
    case ActivationKind::kGELU: return activate_derivative<ActivationKind::kGELU>(x, 0.0f);
    case ActivationKind::kTanh: return activate_derivative<ActivationKind::kTanh>(x, activation(kind, x));
    case ActivationKind::kSigmoid: return activate_derivative<ActivationKind::kSigmoid>(x, activation(kind, x));
    case ActivationKind::kSiLU: return activate_derivative<ActivationKind::kSiLU>(x, 0.0f);
  }
  return 1.0f;
}


// What every block knows about the step it is in (all blocks advance it identically).
struct Run {
  StepState state;
  const void* copy;  // the weights this step reads
  void* next;        // where its updates write them
  BlockScalars scalars;
};

template <typename T>
struct Kernel {
  const FusedEpochArgs& a;
  unsigned char* smem;

  __device__ int last() const { return a.num_layers - 1; }
  __device__ const FusedLayer& layer(int l) const { return a.layers[l]; }

  __device__ Matrix<T> input(int l, const T* x0) const {
    if (l == 0) return {x0, layer(0).in_pad, a.rows_alloc, layer(0).in_pad};
    const FusedLayer& below = layer(l - 1);
    return {static_cast<const T*>(below.act), below.out_pad, a.rows_alloc, below.out_pad};
  }
  __device__ Matrix<T> weights(int l, const void* copy) const {
    const FusedLayer& L = layer(l);
    return {static_cast<const T*>(copy) + L.weight_offset, L.in_pad, L.out, L.in_pad};
  }
  __device__ Matrix<T> gradient(int l, std::int64_t rows) const {
    const FusedLayer& L = layer(l);
    return {static_cast<const T*>(L.dz), L.out_pad, rows, L.out_pad};
  }

  // ---- gather: rows [first, first + rows) of the data set (through `order`), zeros up to the tile.
  __device__ void gather(T* dst, std::int32_t* dst_labels, std::int64_t first, std::int64_t rows, const std::int32_t* order) {
    const std::int64_t in_pad = layer(0).in_pad, features = layer(0).in;
    const std::int64_t count = cdiv(rows, kTile) * kTile * in_pad;
    if (features % 8 == 0) {
      // Eight pixels a thread: one 8-byte load, one 16-byte store (rows are 16-byte aligned).
      for (std::int64_t i = global_thread() * 8; i < count; i += grid_threads() * 8) {
        const std::int64_t r = i / in_pad, f = i % in_pad;
        alignas(16) T out[8];
        if (r < rows && f < features) {
          const std::int64_t sample = order != nullptr ? order[first + r] : first + r;
          const uint2 packed = *reinterpret_cast<const uint2*>(a.images + sample * features + f);
          const auto* px = reinterpret_cast<const std::uint8_t*>(&packed);
          for (int j = 0; j < 8; ++j) out[j] = to_t<T>(static_cast<float>(px[j]) * a.scale + a.shift);
        } else {
          // The bias column (f == features, a multiple of 8 here) holds 1 on the batch's rows.
          const bool ones = layer(0).bias != 0 && r < rows && f == features;
          for (int j = 0; j < 8; ++j) out[j] = to_t<T>(ones && j == 0 ? 1.0f : 0.0f);
        }
        *reinterpret_cast<uint4*>(dst + i) = *reinterpret_cast<const uint4*>(out);
      }
    } else {
      gather_scalar(dst, first, rows, order, count);
    }
    for (std::int64_t r = global_thread(); r < rows; r += grid_threads()) {
      dst_labels[r] = a.labels[order != nullptr ? order[first + r] : first + r];
    }
  }
  __device__ void gather_scalar(T* dst, std::int64_t first, std::int64_t rows, const std::int32_t* order,
                                std::int64_t count) {
    const std::int64_t in_pad = layer(0).in_pad, features = layer(0).in;
    for (std::int64_t i = global_thread(); i < count; i += grid_threads()) {
      const std::int64_t r = i / in_pad, f = i % in_pad;
      float v = 0.0f;
      if (r < rows && f < features) {
        const std::int64_t sample = order != nullptr ? order[first + r] : first + r;
        v = static_cast<float>(a.images[sample * features + f]) * a.scale + a.shift;
      } else if (layer(0).bias != 0 && r < rows && f == features) {
        v = 1.0f;  // the bias column
      }
      dst[i] = to_t<T>(v);
    }
  }

  // ---- forward of hidden layer l: one 32x32 tile of X_l.
  __device__ std::int64_t forward_jobs(int l, std::int64_t rows) const { return cdiv(rows, kTile) * cdiv(layer(l).out_pad, kTile); }
  __device__ void forward_job(int l, const T* x0, const void* copy, std::int64_t rows, std::int64_t job) {
    const FusedLayer& L = layer(l);
    const std::int64_t n_tiles = cdiv(L.out_pad, kTile);
    const std::int64_t m0 = job / n_tiles * kTile, n0 = job % n_tiles * kTile;
    const float* c = tile_product<kTile, kTile, false, false>(input(l, x0), m0, weights(l, copy), n0, L.in_pad, smem);
    constexpr int ldc = TileShape<kTile, kTile, false, false>::kLdC;
    T* act = static_cast<T*>(L.act);
    T* pre = static_cast<T*>(L.pre);
    // A thread keeps one column (kFusedThreads is a multiple of the tile width).
    const int n = static_cast<int>(threadIdx.x) % kTile;
    const std::int64_t col = n0 + n;
    if (col >= L.out_pad) return;
    const bool ones = L.bias != 0 && col == L.out;  // the next layer's bias column
    for (int r = static_cast<int>(threadIdx.x) / kTile; r < kTile; r += kFusedThreads / kTile) {
      const std::int64_t row = m0 + r;
      float z = 0.0f, y = 0.0f;
      if (row < rows && col < L.out) {
        z = c[r * ldc + n];  // the bias is in the product
        y = activation(a.activation, z);
      } else if (row < rows && ones) {
        y = 1.0f;
      }
      act[row * L.out_pad + col] = to_t<T>(y);
      if (pre != nullptr) pre[row * L.out_pad + col] = to_t<T>(z);
    }
  }

  // ---- loss: 16 rows of logits, their loss, hit and (training) gradient.
  __device__ std::int64_t loss_jobs(std::int64_t rows) const { return cdiv(rows, kLossRows); }
  template <int TN>
  __device__ void loss_job(const T* x0, const Run& run, std::int64_t rows, std::int64_t row_base, const std::int32_t* labels,
                std::int64_t job) {
    const int l = last();
    const FusedLayer& L = layer(l);
    const std::int64_t m0 = job * kLossRows;
    const float* c = tile_product<kLossRows, TN, false, false>(input(l, x0), m0, weights(l, run.copy), 0, L.in_pad, smem);
    constexpr int ldc = TileShape<kLossRows, TN, false, false>::kLdC;
    const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
    const int classes = L.out;
    const bool mse = a.loss == FusedLoss::kMse;
    const float smoothing = a.train ? a.smoothing : 0.0f;
    const float grad_scale = (mse ? 2.0f / static_cast<float>(rows * classes) : 1.0f / static_cast<float>(rows)) *
                             run.state.loss_scale;
    T* dz = static_cast<T*>(L.dz);
    for (int r = warp; r < kLossRows; r += kFusedThreads / kWarpSize) {
      const std::int64_t row = m0 + r;
      const bool valid = row < rows;
      const int label = valid ? labels[row] : 0;
      float v[2];
      for (int j = 0; j < 2; ++j) {
        const int cls = lane + 32 * j;
        v[j] = cls < classes ? c[r * ldc + cls] : -INFINITY;  // the bias is in the product
      }
      const auto r_loss = fused::row_loss<fused::SpreadRow<kWarpSize>>(v, classes, label, mse, smoothing, grad_scale);
      double loss = r_loss.loss;
      if (mse && !a.train) loss /= classes;  // evaluation: the mean over classes, per sample
      const float(&grad)[2] = r_loss.grad;
      const int best_index = r_loss.best_index;
      if (a.train) {
        for (int j = 0; j < 2; ++j) {
          const int cls = lane + 32 * j;
          if (cls < L.out_pad) dz[row * L.out_pad + cls] = to_t<T>(valid ? grad[j] : 0.0f);
        }
      }
      if (valid && lane == 0) {
        a.row_loss[row_base + row] = loss;
        a.row_correct[row_base + row] = best_index == label ? 1 : 0;
      }
    }
  }

  __device__ void loss_stage(const T* x0, const Run& run, std::int64_t rows, std::int64_t row_base, const std::int32_t* labels) {
    const int out_pad = layer(last()).out_pad;
    for (std::int64_t job = blockIdx.x; job < loss_jobs(rows); job += gridDim.x) {
      if (out_pad <= 16) {
        loss_job<16>(x0, run, rows, row_base, labels, job);
      } else if (out_pad <= 32) {
        loss_job<32>(x0, run, rows, row_base, labels, job);
      } else {
        loss_job<64>(x0, run, rows, row_base, labels, job);
      }
    }
  }

  // ---- backward of layer l >= 1: one 32x32 tile of dZ_{l-1}.
  __device__ std::int64_t input_grad_jobs(int l, std::int64_t rows) const {
    return cdiv(rows, kTile) * cdiv(layer(l - 1).out_pad, kTile);
  }
  __device__ void input_grad_job(int l, const Run& run, std::int64_t rows, std::int64_t job) {
    const FusedLayer& L = layer(l);
    const FusedLayer& below = layer(l - 1);
    const std::int64_t n_tiles = cdiv(below.out_pad, kTile);
    const std::int64_t m0 = job / n_tiles * kTile, n0 = job % n_tiles * kTile;
    const Matrix<T> w_down{static_cast<const T*>(run.copy) + L.weight_offset, L.in_pad, L.out, L.in_pad};
    const float* c = tile_product<kTile, kTile, false, true>(gradient(l, a.rows_alloc), m0, w_down, n0, L.out_pad, smem);
    constexpr int ldc = TileShape<kTile, kTile, false, true>::kLdC;
    const T* act = static_cast<const T*>(below.act);
    const T* pre = static_cast<const T*>(below.pre);
    T* dz = static_cast<T*>(below.dz);
    // One column a thread; the activations it needs are loaded before anything is stored.
    constexpr int kRowsPerThread = kTile * kTile / kFusedThreads;
    const int n = static_cast<int>(threadIdx.x) % kTile;
    const int r0 = static_cast<int>(threadIdx.x) / kTile;
    const std::int64_t col = n0 + n;
    if (col >= below.out_pad) return;
    float x[kRowsPerThread], y[kRowsPerThread];
    for (int j = 0; j < kRowsPerThread; ++j) {
      const std::int64_t row = m0 + r0 + j * (kFusedThreads / kTile);
      const std::int64_t at = row * below.out_pad + col;
      const bool valid = row < rows && col < below.out;
      x[j] = valid && pre != nullptr ? from_t(pre[at]) : 0.0f;
      y[j] = valid ? from_t(act[at]) : 0.0f;
    }
    for (int j = 0; j < kRowsPerThread; ++j) {
      const int r = r0 + j * (kFusedThreads / kTile);
      const std::int64_t row = m0 + r;
      const bool valid = row < rows && col < below.out;
      const float g = valid ? c[r * ldc + n] * activation_slope(a.activation, x[j], y[j]) : 0.0f;
      dz[row * below.out_pad + col] = to_t<T>(g);
    }
  }

  // ---- dW_l (its column `in` is the bias gradient): one 32x64 tile, applied by the optimizer (or
  // stored, fp16). bf16 issues the update's loads of master weights and state before the product,
  // so they arrive while it runs.
  __device__ std::int64_t weight_grad_jobs(int l) const {
    return cdiv(layer(l).out, kWgradRows) * cdiv(layer(l).in + layer(l).bias, kWgradCols);
  }
  __device__ void store_gradient(const Run& run, std::int64_t index, float g) {
    a.grads[index] = g;
    if (!isfinite(g)) *reinterpret_cast<volatile std::int32_t*>(&a.found_inf[run.state.step & 1]) = 1;
  }
  __device__ void weight_grad_job(int l, const T* x0, const Run& run, std::int64_t rows, std::int64_t job) {
    const FusedLayer& L = layer(l);
    const std::int64_t n_tiles = cdiv(L.in + L.bias, kWgradCols);
    const std::int64_t o0 = job / n_tiles * kWgradRows, i0 = job % n_tiles * kWgradCols;
    constexpr int kPerThread = kWgradRows * kWgradCols / kFusedThreads;
    std::int64_t index[kPerThread];
    bool valid[kPerThread];
    for (int j = 0; j < kPerThread; ++j) {
      const int i = static_cast<int>(threadIdx.x) + j * kFusedThreads;
      const std::int64_t o = o0 + i / kWgradCols, in = i0 + i % kWgradCols;
      valid[j] = o < L.out && in < L.in + L.bias;
      index[j] = L.weight_offset + o * L.in_pad + in;
    }
    const bool fp16 = a.grads != nullptr;
    ParameterBatch<kPerThread> params;
    if (!fp16) load_parameters(a.optimizer, index, valid, params);

    const std::int64_t k = cdiv(rows, 16) * 16;  // rows past `rows` hold zeros
    const Matrix<T> x = input(l, x0);
    const Matrix<T> x_rows{x.data, x.ld, k, x.cols};
    const float* c = tile_product<kWgradRows, kWgradCols, true, true>(gradient(l, k), o0, x_rows, i0, k, smem);
    constexpr int ldc = TileShape<kWgradRows, kWgradCols, true, true>::kLdC;
    float g[kPerThread];
    for (int j = 0; j < kPerThread; ++j) {
      const int i = static_cast<int>(threadIdx.x) + j * kFusedThreads;
      g[j] = c[(i / kWgradCols) * ldc + i % kWgradCols];
    }
    if (fp16) {
      for (int j = 0; j < kPerThread; ++j) {
        if (valid[j]) store_gradient(run, index[j], g[j]);
      }
    } else {
      update_parameters(a.optimizer, run.scalars, index, g, valid, params, run.next);
    }
  }

  // Block 0, warp 0: the step's row losses and hits into the metrics, in a fixed order.
  __device__ void add_metrics(std::int64_t rows, double weight, std::int64_t steps_done) {
    if (blockIdx.x != 0 || threadIdx.x >= kWarpSize) return;
    double loss = 0.0, correct = 0.0;
    for (std::int64_t r = threadIdx.x; r < rows; r += kWarpSize) {
      loss += a.row_loss[r];
      correct += a.row_correct[r];
    }
    loss = fused::group_sum<kWarpSize>(loss);
    correct = fused::group_sum<kWarpSize>(correct);
    if (threadIdx.x == 0) {
      a.metrics->loss_sum += weight * loss;
      a.metrics->correct += static_cast<std::int64_t>(correct);
      fused::write_progress(a.progress, steps_done, a.metrics->loss_sum);
    }
  }

  __device__ void train(GridBarrier& barrier) {
    Run run{};
    run.state = *a.state;
    const bool fp16 = a.grads != nullptr;
    int parity = static_cast<int>(run.state.step & 1);  // which copy holds the current weights
    int batch_slot = 0;
    const auto rows_of = [&](std::int64_t s) {
      const std::int64_t left = a.samples - s * a.batch;
      return left < a.batch ? left : a.batch;
    };
    gather(static_cast<T*>(a.inputs[0]), a.batch_labels[0], 0, rows_of(0), a.order);
    barrier.sync();
    for (std::int64_t s = 0; s < a.steps; ++s) {
      const std::int64_t rows = rows_of(s);
      const T* x0 = static_cast<const T*>(a.inputs[batch_slot]);
      run.copy = a.copies[parity];
      run.next = a.copies[fp16 ? parity : parity ^ 1];
      run.scalars = step_scalars(a.optimizer, run.state.step, run.state.opt_steps, run.state.loss_scale, false);
      for (int l = 0; l < last(); ++l) {
        for (std::int64_t job = blockIdx.x; job < forward_jobs(l, rows); job += gridDim.x) {
          forward_job(l, x0, run.copy, rows, job);
        }
        barrier.sync();
      }
      loss_stage(x0, run, rows, 0, a.batch_labels[batch_slot]);
      barrier.sync();
      const double loss_weight = 1.0 / static_cast<double>(a.loss == FusedLoss::kMse ? rows * layer(last()).out : rows);
      add_metrics(rows, loss_weight, s + 1);
      for (int l = last(); l >= 0; --l) {
        const std::int64_t dx_jobs = l > 0 ? input_grad_jobs(l, rows) : 0;
        const std::int64_t jobs = dx_jobs + weight_grad_jobs(l);
        for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
          if (job < dx_jobs) {
            input_grad_job(l, run, rows, job);
          } else {
            weight_grad_job(l, x0, run, rows, job - dx_jobs);
          }
        }
        if (l == 0 && s + 1 < a.steps) {
          gather(static_cast<T*>(a.inputs[batch_slot ^ 1]), a.batch_labels[batch_slot ^ 1], (s + 1) * a.batch,
                 rows_of(s + 1), a.order);
        }
        barrier.sync();
      }
      bool skip = false;
      if (fp16) {
        skip = *reinterpret_cast<volatile std::int32_t*>(&a.found_inf[s & 1]) != 0;
        if (!skip) {
          for (std::int64_t i = global_thread(); i < a.params; i += grid_threads()) {
            update_element_into(a.optimizer, run.scalars, i, a.grads[i], run.next);
          }
        }
        if (blockIdx.x == 0 && threadIdx.x == 0) a.found_inf[(s + 1) & 1] = 0;
        barrier.sync();
      }
      advance_step_state(run.state, fp16, skip, blockIdx.x == 0 && threadIdx.x == 0 ? a.metrics : nullptr);
      parity ^= fp16 ? 0 : 1;
      batch_slot ^= 1;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      run.state.found_inf = 0;
      run.state.blocks_done = 0;
      *a.state = run.state;
    }
  }

  __device__ void evaluate(GridBarrier& barrier) {
    Run run{};
    run.state = *a.state;
    run.state.loss_scale = 1.0f;
    run.copy = a.copies[run.state.step & 1];
    T* x0 = static_cast<T*>(a.inputs[0]);
    for (std::int64_t b = 0; b < a.steps; ++b) {
      const std::int64_t first = b * a.batch;
      const std::int64_t left = a.samples - first;
      const std::int64_t rows = left < a.batch ? left : a.batch;
      gather(x0, a.batch_labels[0], first, rows, nullptr);
      barrier.sync();
      for (int l = 0; l < last(); ++l) {
        for (std::int64_t job = blockIdx.x; job < forward_jobs(l, rows); job += gridDim.x) {
          forward_job(l, x0, run.copy, rows, job);
        }
        barrier.sync();
      }
      loss_stage(x0, run, rows, first, a.batch_labels[0]);
      barrier.sync();
    }
    add_metrics(a.samples, 1.0, a.steps);
  }
};

template <typename T>
// __grid_constant__: the arguments stay in the constant bank even though Kernel keeps a reference
// to them (without it every thread copies the 1 KB struct to local memory and reads it from there).
__global__ void __launch_bounds__(kFusedThreads, 1) fused_epoch_kernel(const __grid_constant__ FusedEpochArgs args) {
  extern __shared__ __align__(128) unsigned char smem[];
  GridBarrier barrier(args.barrier, args.stage_clock, args.stage_clock_capacity);
  Kernel<T> kernel{args, smem};
  if (args.train) {
    kernel.train(barrier);
  } else {
    kernel.evaluate(barrier);
  }
}

constexpr std::size_t max_size(std::size_t a, std::size_t b) { return a > b ? a : b; }

}  // namespace

std::size_t fused_epoch_shared_bytes() {
  return max_size(max_size(TileShape<kTile, kTile, false, false>::kBytes, TileShape<kTile, kTile, false, true>::kBytes),
                  max_size(TileShape<kWgradRows, kWgradCols, true, true>::kBytes,
                           max_size(TileShape<kLossRows, 64, false, false>::kBytes,
                                    TileShape<kLossRows, 16, false, false>::kBytes)));
}

cudaError_t fused_epoch_max_blocks(int device, int* blocks) {
  int sms = 0, per_sm = 0;
  cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  const auto bytes = static_cast<int>(fused_epoch_shared_bytes());
  for (auto kernel : {fused_epoch_kernel<__nv_bfloat16>, fused_epoch_kernel<__half>}) {
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e != cudaSuccess) return e;
  }
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_epoch_kernel<__nv_bfloat16>, kFusedThreads,
                                                    fused_epoch_shared_bytes());
  if (e != cudaSuccess) return e;
  *blocks = sms * (per_sm < 1 ? 1 : per_sm);
  return cudaSuccess;
}

cudaError_t launch_fused_epoch(const FusedEpochArgs& args, int blocks, cudaStream_t stream) {
  const NvtxRange range(args.train ? "fused_epoch" : "fused_evaluate");
  FusedEpochArgs copy = args;
  void* params[] = {&copy};
  const void* kernel = args.type == ElementType::kF16 ? reinterpret_cast<const void*>(fused_epoch_kernel<__half>)
                                                      : reinterpret_cast<const void*>(fused_epoch_kernel<__nv_bfloat16>);
  return cudaLaunchCooperativeKernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kFusedThreads), params,
                                     fused_epoch_shared_bytes(), stream);
}

}  // namespace sprintnet::cuda
