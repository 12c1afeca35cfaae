#include "sprintnet/ops/cpu/openblas_library.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>

#include "sprintnet/core/error.h"
#include "sprintnet/ops/cpu/cpu_backend.h"

namespace sprintnet::cpu {
namespace {

std::mutex g_mutex;                      // guards the opening and the thread count passed to it
std::atomic<const OpenBlas*> g_open{nullptr};

// The OpenMP flavour found at configure time first (its thread pool is ours; Dependencies.cmake says why), then
// the same soname on the loader's path (the GPU bundle's lib folder carries that flavour).
void* open_library(std::string& tried) {
  for (const char* name : {SPRINTNET_OPENBLAS_PATH, "libopenblas.so.0"}) {
    if (void* handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL); handle != nullptr) return handle;
    tried += fmt::format("\n  {}: {}", name, ::dlerror());
  }
  return nullptr;
}

template <typename Function>
void resolve(void* handle, const char* symbol, Function& out) {
  out = reinterpret_cast<Function>(::dlsym(handle, symbol));
  SN_CHECK(out != nullptr, "OpenBLAS: the library has no {} ({})", symbol, ::dlerror());
}

}  // namespace

const OpenBlas& openblas() {
  if (const OpenBlas* open = g_open.load(std::memory_order_acquire)) return *open;
  cpu_threads();  // fixes the count first, outside the lock: the first call passes it to openblas_threads_changed
  const std::lock_guard lock(g_mutex);
  if (const OpenBlas* open = g_open.load(std::memory_order_acquire)) return *open;
  std::string tried;
  void* handle = open_library(tried);
  SN_CHECK(handle != nullptr,
           "OpenBLAS (the fp64 matrix products) could not be opened: install Debian's libopenblas0-openmp "
           "(scripts/install-deps). Tried:{}", tried);
  static OpenBlas library;  // the handle stays open for the process
  resolve(handle, "cblas_sgemm", library.sgemm);
  resolve(handle, "cblas_dgemm", library.dgemm);
  resolve(handle, "openblas_set_num_threads", library.set_num_threads);
  resolve(handle, "openblas_get_corename", library.get_corename);
  library.set_num_threads(cpu_threads());  // under the lock: a later change waits for it, then passes its own
  g_open.store(&library, std::memory_order_release);
  return library;
}

void openblas_threads_changed(int count) {
  const std::lock_guard lock(g_mutex);
  if (const OpenBlas* open = g_open.load(std::memory_order_acquire)) open->set_num_threads(count);
}

}  // namespace sprintnet::cpu
