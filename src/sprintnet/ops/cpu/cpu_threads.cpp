#include <sched.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "sprintnet/core/error.h"
#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/openblas_library.h"

namespace sprintnet {
namespace {
std::atomic<int> g_threads{0};  // atomic: a sweep's CPU runs set it from several threads
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int count = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  const int cores = count > 0 ? count : static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cores, 1, kMaxCpuThreads);
}

int default_cpu_threads() {
  // OMP_NUM_THREADS is a list, one count a nesting level: the first is ours, blanks around it allowed as
  // libgomp allows them. Malformed, it is ignored, as OpenMP itself ignores it.
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr) {
    const char* first = env + std::strspn(env, " \t");
    const char* end = first + std::strcspn(first, ", \t");
    const char* rest = end + std::strspn(end, " \t");
    int value = 0;
    const auto [last, error] = std::from_chars(first, end, value);
    if (error == std::errc() && last == end && (*rest == '\0' || *rest == ',') && value > 0) {
      return std::min(value, kMaxCpuThreads);
    }
  }
  return usable_cores();
}

void set_cpu_threads(int threads) {
  SN_CHECK(threads >= 0 && threads <= kMaxCpuThreads, "thread count must be in [0, {}], got {}", kMaxCpuThreads, threads);
  const int count = threads > 0 ? threads : default_cpu_threads();
  g_threads = count;
  cpu::openblas_threads_changed(count);
  omp_set_num_threads(count);
}

int cpu_threads() {
  if (g_threads == 0) set_cpu_threads(0);
  return g_threads;
}

}  // namespace sprintnet
