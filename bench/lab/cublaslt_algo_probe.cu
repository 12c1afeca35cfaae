// The kernel lab's probe of cuBLASLt's algorithm choice and epilogues (docs/PERFORMANCE.md, "ReLU's
// gradient by a kernel, not cuBLASLt's DRELU epilogue"): for the compiled step's products of a wide model, the
// time of the heuristic's first algorithm (what ops/cuda/gemm.cpp runs) against the fastest of the
// first N it returns, and whether that one's output equals the first's bit for bit.
//
// The products are the compiled step's, with its epilogues and row-major-to-column-major mapping
// (ops/cuda/gemm.h), in bf16 with fp32 accumulation, for each hidden layer in -> out at batch B:
//   forward  Y[B, out] = X[B, in] W[out, in]^T, bias + ReLU with the mask (RELU_AUX_BIAS)
//   dW       dW[out, in] = dZ[B, out]^T X[B, in], the bias gradient fused (BGRADB)
//   dX       dX[B, in] = dZ[B, out] W[out, in], times the layer below's mask (DRELU), not for layer 0
// The output layer (10 wide) runs skinny kernels in the step and is left out. Standalone on purpose:
//   nvcc -std=c++17 -O2 -gencode arch=compute_90a,code=sm_90a bench/lab/cublaslt_algo_probe.cu -lcublasLt -o probe
//   ./probe 4x8192x4096 4x4096x4096 [--candidates 16] [--reps 20] [--variants]
// --variants adds the forward without its mask, dW without its bias gradient and, for each dX, the product
// without its epilogue and from a transposed copy of W.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check_cuda.h"

#define CHECK_LT(x)                                                               \
  do {                                                                            \
    cublasStatus_t s_ = (x);                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                            \
      std::fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #x, s_); \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;  // ops/cuda/gemm.cpp's

struct Product {
  std::string name;
  std::int64_t m, n, k;
  bool trans_a, trans_b;
  cublasLtEpilogue_t epilogue;
  std::int64_t aux_ld = 0;  // bits a row of C's mask (DRELU and RELU_AUX_BIAS)
  bool variant = false;     // a variant of the step's product, left out of the step's sums
};

std::int64_t mask_ld(std::int64_t n) { return (n + 127) / 128 * 128; }

std::vector<Product> step_products(std::int64_t layers, std::int64_t width, std::int64_t batch, bool variants) {
  std::vector<Product> products;
  std::int64_t in = 784;
  for (std::int64_t l = 0; l + 1 < layers; ++l) {
    const std::int64_t out = width;
    const std::string at = std::to_string(in) + "->" + std::to_string(out);
    products.push_back({"forward " + at, batch, out, in, false, true, CUBLASLT_EPILOGUE_RELU_AUX_BIAS, mask_ld(out)});
    if (variants) {
      products.push_back(
          {"(forward, no mask) " + at, batch, out, in, false, true, CUBLASLT_EPILOGUE_RELU_BIAS, 0, true});
    }
    products.push_back({"dW " + at, out, in, batch, true, false, CUBLASLT_EPILOGUE_BGRADB});
    if (variants) {
      products.push_back({"(dW, no epilogue) " + at, out, in, batch, true, false, CUBLASLT_EPILOGUE_DEFAULT, 0, true});
    }
    if (l > 0) {
      products.push_back({"dX " + at, batch, in, out, false, false, CUBLASLT_EPILOGUE_DRELU, mask_ld(in)});
      if (variants) {  // not in the step's sum: the epilogue's cost, and W read K-major from a transposed copy
        products.push_back(
            {"(dX, no epilogue) " + at, batch, in, out, false, false, CUBLASLT_EPILOGUE_DEFAULT, 0, true});
        products.push_back({"(dX from W^T [in, out]) " + at, batch, in, out, false, true, CUBLASLT_EPILOGUE_DRELU,
                            mask_ld(in), true});
        products.push_back({"(dX from W^T, no epilogue) " + at, batch, in, out, false, true, CUBLASLT_EPILOGUE_DEFAULT,
                            0, true});
      }
    }
    in = out;
  }
  return products;
}

__global__ void fill_random(__nv_bfloat16* p, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xffff) / 65535.0f - 0.5f) * 0.1f);
  }
}

struct Buffers {
  void *a, *b, *c, *bias, *aux, *workspace;
};

struct Timed {
  float ms = 0;
  bool same_bits = false;
  int splitk = 0, tile = 0, stages = 0;
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times the first `candidates` algorithms of the heuristic on product p; slot 0 is the heuristic's first.
std::vector<Timed> time_product(cublasLtHandle_t handle, const Product& p, const Buffers& buf, int candidates,
                                int reps, cudaStream_t stream) {
  cublasLtMatmulDesc_t op;
  CHECK_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_first = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &p.epilogue, sizeof(p.epilogue)));
  if (p.epilogue == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || p.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
      p.epilogue == CUBLASLT_EPILOGUE_BGRADB) {
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &buf.bias, sizeof(buf.bias)));
  }
  if (p.aux_ld > 0) {
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &p.aux_ld, sizeof(p.aux_ld)));
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &buf.aux, sizeof(buf.aux)));
  }
  const auto m = static_cast<std::uint64_t>(p.m), n = static_cast<std::uint64_t>(p.n),
             k = static_cast<std::uint64_t>(p.k);
  const std::uint64_t first_rows = p.trans_b ? k : n, first_cols = p.trans_b ? n : k;
  const std::uint64_t second_rows = p.trans_a ? m : k, second_cols = p.trans_a ? k : m;
  cublasLtMatrixLayout_t first, second, out;
  CHECK_LT(cublasLtMatrixLayoutCreate(&first, CUDA_R_16BF, first_rows, first_cols,
                                      static_cast<std::int64_t>(first_rows)));
  CHECK_LT(cublasLtMatrixLayoutCreate(&second, CUDA_R_16BF, second_rows, second_cols,
                                      static_cast<std::int64_t>(second_rows)));
  CHECK_LT(cublasLtMatrixLayoutCreate(&out, CUDA_R_16BF, n, m, static_cast<std::int64_t>(n)));
  cublasLtMatmulPreference_t pref;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  const std::uint64_t workspace = kWorkspaceBytes;
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                sizeof(workspace)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(candidates);
  int returned = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(handle, op, first, second, out, out, pref, candidates, results.data(),
                                          &returned));

  const std::size_t c_bytes = static_cast<std::size_t>(m * n) * 2;
  std::vector<unsigned char> reference(c_bytes), got(c_bytes);
  std::vector<Timed> timed;
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  const float alpha = 1.0f, beta = 0.0f;
  for (int r = 0; r < returned; ++r) {
    if (results[r].state != CUBLAS_STATUS_SUCCESS) continue;
    const auto run = [&] {
      return cublasLtMatmul(handle, op, &alpha, buf.b, first, buf.a, second, &beta, buf.c, out, buf.c, out,
                            &results[r].algo, buf.workspace, kWorkspaceBytes, stream);
    };
    // The DRELU epilogue reads C's mask only; poison C so a stale result cannot pass as the same bits.
    CHECK_CUDA(cudaMemsetAsync(buf.c, 0xff, c_bytes, stream));
    if (run() != CUBLAS_STATUS_SUCCESS) continue;
    CHECK_CUDA(cudaMemcpyAsync(r == 0 ? reference.data() : got.data(), buf.c, c_bytes, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    Timed t;
    t.same_bits = r == 0 || std::memcmp(reference.data(), got.data(), c_bytes) == 0;
    std::vector<float> times;
    for (int i = 0; i < 3; ++i) CHECK_LT(run());
    for (int i = 0; i < reps; ++i) {
      CHECK_CUDA(cudaEventRecord(start, stream));
      CHECK_LT(run());
      CHECK_CUDA(cudaEventRecord(stop, stream));
      CHECK_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      times.push_back(ms);
    }
    t.ms = median(times);
    std::size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&results[r].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &t.splitk,
                                         sizeof(t.splitk), &written);
    cublasLtMatmulAlgoConfigGetAttribute(&results[r].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &t.tile, sizeof(t.tile),
                                         &written);
    cublasLtMatmulAlgoConfigGetAttribute(&results[r].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &t.stages,
                                         sizeof(t.stages), &written);
    timed.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(first);
  cublasLtMatrixLayoutDestroy(second);
  cublasLtMatrixLayoutDestroy(out);
  cublasLtMatmulDescDestroy(op);
  return timed;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> configs;
  int candidates = 16, reps = 20;
  bool variants = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--candidates") && i + 1 < argc) {
      candidates = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--variants")) {
      variants = true;
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      configs.emplace_back(argv[i]);
    }
  }
  if (configs.empty()) configs = {"4x8192x4096", "4x4096x4096"};
  cublasLtHandle_t handle;
  CHECK_LT(cublasLtCreate(&handle));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, cuBLASLt %zu, %d candidates, median of %d\n", prop.name, cublasLtGetVersion(), candidates,
              reps);
  for (const std::string& config : configs) {
    long layers = 0, width = 0, batch = 0;
    if (std::sscanf(config.c_str(), "%ldx%ldx%ld", &layers, &width, &batch) != 3) {
      std::fprintf(stderr, "config %s: want LxHxB\n", config.c_str());
      return 2;
    }
    const std::int64_t widest = std::max<std::int64_t>(width, 784);
    const std::size_t elements = static_cast<std::size_t>(std::max<std::int64_t>(batch, widest) * widest);
    Buffers buf{};
    CHECK_CUDA(cudaMalloc(&buf.a, elements * 2));
    CHECK_CUDA(cudaMalloc(&buf.b, elements * 2));
    CHECK_CUDA(cudaMalloc(&buf.c, elements * 2));
    CHECK_CUDA(cudaMalloc(&buf.bias, static_cast<std::size_t>(widest) * 2));
    CHECK_CUDA(cudaMalloc(&buf.aux, static_cast<std::size_t>(batch) * mask_ld(widest) / 8 + 256));
    CHECK_CUDA(cudaMalloc(&buf.workspace, kWorkspaceBytes));
    fill_random<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(buf.a), elements, 1);
    fill_random<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(buf.b), elements, 2);
    fill_random<<<4, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(buf.bias), static_cast<std::size_t>(widest), 3);
    CHECK_CUDA(cudaMemsetAsync(buf.aux, 0x5a, static_cast<std::size_t>(batch) * mask_ld(widest) / 8 + 256, stream));
    std::printf("\n%s\n| product | m n k | first: ms (TFLOP/s) | best: ms (TFLOP/s), index | same bits as first "
                "| split-k, tile, stages of first / best | candidates within 1 %% of best, same bits |\n"
                "|---|---|---|---|---|---|---|\n",
                config.c_str());
    double first_sum = 0, best_sum = 0, best_same_sum = 0;
    for (const Product& p : step_products(layers, width, batch, variants)) {
      const std::vector<Timed> t = time_product(handle, p, buf, candidates, reps, stream);
      if (t.empty()) {
        std::printf("| %s | no algorithm |\n", p.name.c_str());
        continue;
      }
      std::size_t best = 0, best_same = 0;
      for (std::size_t i = 1; i < t.size(); ++i) {
        if (t[i].ms < t[best].ms) best = i;
        if (t[i].same_bits && t[i].ms < t[best_same].ms) best_same = i;
      }
      int close = 0, close_same = 0;
      for (const Timed& x : t) {
        if (x.ms <= t[best].ms * 1.01f) {
          ++close;
          close_same += x.same_bits;
        }
      }
      const double flop = 2.0 * p.m * p.n * p.k;
      std::printf("| %s | %ld %ld %ld | %.3f (%.0f) | %.3f (%.0f), %zu | %s | %d,%d,%d / %d,%d,%d | %d, %d |\n",
                  p.name.c_str(), static_cast<long>(p.m), static_cast<long>(p.n), static_cast<long>(p.k), t[0].ms,
                  flop / t[0].ms / 1e9, t[best].ms, flop / t[best].ms / 1e9, best, t[best].same_bits ? "yes" : "no",
                  t[0].splitk, t[0].tile, t[0].stages, t[best].splitk, t[best].tile, t[best].stages, close, close_same);
      if (p.variant) continue;
      first_sum += t[0].ms;
      best_sum += t[best].ms;
      best_same_sum += t[best_same].ms;
    }
    std::printf("\n%s: the step's products %.3f ms with the first algorithm, %.3f with the best (%.1f %%), %.3f with "
                "the best of the same bits (%.1f %%)\n",
                config.c_str(), first_sum, best_sum, 100.0 * (1 - best_sum / first_sum), best_same_sum,
                100.0 * (1 - best_same_sum / first_sum));
    cudaFree(buf.a);
    cudaFree(buf.b);
    cudaFree(buf.c);
    cudaFree(buf.bias);
    cudaFree(buf.aux);
    cudaFree(buf.workspace);
  }
  cublasLtDestroy(handle);
  return 0;
}
