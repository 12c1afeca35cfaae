#pragma once
// OpenBLAS, opened on the first product that needs it (fp64, or fp32 under the SPRINTNET_EAGER_GEMM lab switch)
// instead of linked: linked, its initialiser runs before main() in every process, allocates a buffer per thread,
// and where the address space is capped (ulimit -v, a batch system's virtual-memory limit) below what that needs
// beside CUDA's libraries it retries for ever, so even `sprintnet --help` hung. Training runs fp32 on oneDNN and
// never opens it.
#include <cblas.h>

namespace sprintnet::cpu {

struct OpenBlas {
  decltype(&cblas_sgemm) sgemm;
  decltype(&cblas_dgemm) dgemm;
  decltype(&openblas_set_num_threads) set_num_threads;
  decltype(&openblas_get_corename) get_corename;
};

// The library, opened once (its thread count set to the CPU ops' count); throws, naming what it tried, if it
// cannot be opened.
const OpenBlas& openblas();

// The CPU ops' thread count changed: passed on now if the library is open, else when it opens.
void openblas_threads_changed(int count);

}  // namespace sprintnet::cpu
