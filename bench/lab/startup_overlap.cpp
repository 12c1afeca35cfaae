// Kernel-lab probe for issue 13 (docs/PERFORMANCE.md, "Start-up"): does cuBLASLt's first heuristic
// query (~0.1 s in a run's plan) overlap the CUDA context's creation (~0.22 s) when a helper thread
// starts it at once? Modes, each in a fresh process: `sequential` (context, then cuBLASLt) and
// `overlapped` (both started together on two threads). Prints seconds.
//   g++ -O2 -std=c++17 bench/lab/startup_overlap.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 \
//     -lcublasLt -lcudart -lpthread -o startup_overlap && ./startup_overlap sequential
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// A bf16 product's heuristic query, as the compiled step's plan makes one.
void first_heuristic() {
  cublasLtHandle_t handle;
  cublasLtCreate(&handle);
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, 784, 128, 784);
  cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, 784, 256, 784);
  cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, 128, 256, 128);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, pref, 1, &result, &found);
  std::printf("  heuristic found %d\n", found);
}
}  // namespace

int main(int argc, char** argv) {
  const bool overlapped = argc > 1 && std::strcmp(argv[1], "overlapped") == 0;
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
