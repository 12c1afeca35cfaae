// Kernel-lab probe for issue 13 (docs/PERFORMANCE.md, "Start-up"): does cuBLASLt's first heuristic
// query (~0.1 s in a run's plan) overlap the CUDA context's creation (~0.22 s) when a helper thread
// starts it at once? Modes, each in a fresh process: `sequential` (context, then cuBLASLt) and
// `overlapped` (both started together on two threads); `epilogues` as a second argument adds the
// plan's epilogues and workspace. Prints seconds.
//   g++ -O2 -std=c++17 bench/lab/startup_overlap.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 \
//     -lcublasLt -lcudart -lpthread -o startup_overlap && ./startup_overlap sequential [epilogues]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
bool with_epilogues = false;
// A bf16 product's heuristic query, as the compiled step's plan makes one (with `with_epilogues`:
// the plan's epilogues, bias + ReLU with its mask, the ReLU mask's gradient, the bias gradient,
// and a 32 MiB workspace).
void first_heuristic() {
  const double t0 = now();
  cublasLtHandle_t handle;
  cublasLtCreate(&handle);
  void* workspace = nullptr;
  const std::size_t workspace_bytes = std::size_t{32} << 20;
  if (with_epilogues) cudaMalloc(&workspace, workspace_bytes);
  const double t1 = now();
  const cublasLtEpilogue_t epilogues[] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_RELU_AUX_BIAS,
                                          CUBLASLT_EPILOGUE_DRELU, CUBLASLT_EPILOGUE_BGRADB};
  for (const cublasLtEpilogue_t epilogue : epilogues) {
    if (!with_epilogues && epilogue != CUBLASLT_EPILOGUE_DEFAULT) continue;
    const double e0 = now();
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      const std::int64_t ld = 256;
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld));
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &workspace, sizeof(workspace));
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &workspace, sizeof(workspace));
    }
    cublasLtMatrixLayout_t a, b, c;
    // D (256 x 128) = W (256 x 784) · Xᵀ (784 x 128), column-major: a layer's forward.
    cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, 256, 784, 256);
    cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, 784, 128, 784);
    cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, 256, 128, 256);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    if (with_epilogues) {
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                           sizeof(workspace_bytes));
    }
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, pref, 1, &result, &found);
    std::printf("  epilogue %d: found %d in %.3f s\n", static_cast<int>(epilogue), found, now() - e0);
  }
  std::printf("  handle and workspace %.3f s\n", t1 - t0);
}
}  // namespace

int main(int argc, char** argv) {
  const bool overlapped = argc > 1 && std::strcmp(argv[1], "overlapped") == 0;
  with_epilogues = argc > 2 && std::strcmp(argv[2], "epilogues") == 0;
  const double t0 = now();
  double context_done = 0, lt_done = 0;
  if (overlapped) {
    std::thread lt([&] {
      first_heuristic();
      lt_done = now();
    });
    cudaFree(nullptr);
    context_done = now();
    lt.join();
  } else {
    cudaFree(nullptr);
    context_done = now();
    first_heuristic();
    lt_done = now();
  }
  std::printf("%s: context %.3f s, cuBLASLt's first heuristic done at %.3f s\n", overlapped ? "overlapped" : "sequential",
              context_done - t0, lt_done - t0);
  return 0;
}
