#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "sprintnet/core/error.h"
#include "sprintnet/ops/cpu/cpu_backend.h"

namespace sprintnet {
namespace {
std::atomic<int> g_threads{0};  // atomic: a sweep's CPU runs set it from several threads
}

int default_cpu_threads() {
  // OMP_NUM_THREADS is a list, one count a nesting level: the first is ours. Malformed, it is ignored, as
  // OpenMP itself ignores it.
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr) {
    const char* end = env + std::strcspn(env, ",");
    int value = 0;
    const auto [last, error] = std::from_chars(env, end, value);
    if (error == std::errc() && last == end && value > 0) return std::min(value, kMaxCpuThreads);
  }
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, static_cast<unsigned>(kMaxCpuThreads)));
}

void set_cpu_threads(int threads) {
  SN_CHECK(threads >= 0 && threads <= kMaxCpuThreads, "thread count must be in [0, {}], got {}", kMaxCpuThreads, threads);
  const int count = threads > 0 ? threads : default_cpu_threads();
  g_threads = count;
  openblas_set_num_threads(count);
  omp_set_num_threads(count);
}

int cpu_threads() {
  if (g_threads == 0) set_cpu_threads(0);
  return g_threads;
}

}  // namespace sprintnet
