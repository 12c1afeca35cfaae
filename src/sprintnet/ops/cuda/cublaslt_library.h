#pragma once
// cuBLASLt, loaded with dlopen rather than linked. Its static initialisers cost every process that
// links it ~50 ms and ~100 MB of touched memory before main (perf on `sprintnet --version`: 0.06 s,
// nine tenths of it in libcublasLt's initialisers), which runs that make no product on the GPU
// (the fused engine, the CPU) never needed. The CUDA backend starts the load on a helper thread when
// it is created, beside the CUDA context's creation; the first product waits for it.
#include <cublasLt.h>

namespace sprintnet::cuda {

// The cuBLASLt functions the products use (gemm.cpp).
struct CublasLtApi {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtDestroy) destroy;
  decltype(&cublasLtGetStatusName) status_name;
  decltype(&cublasLtGetStatusString) status_string;
  decltype(&cublasLtMatmul) matmul;
  decltype(&cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic;
  decltype(&cublasLtMatmulDescCreate) desc_create;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set_attribute;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set_attribute;
  decltype(&cublasLtMatrixLayoutCreate) layout_create;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
};

// Starts loading the library on a helper thread (once; later calls do nothing).
void start_loading_cublaslt();
// The loaded library, waiting for the load (starting it if nobody has). Throws, naming the library
// and the loader's message, when it cannot be loaded.
const CublasLtApi& cublaslt();

}  // namespace sprintnet::cuda
