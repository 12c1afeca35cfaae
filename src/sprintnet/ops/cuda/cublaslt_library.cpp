#include "sprintnet/ops/cuda/cublaslt_library.h"

#include <dlfcn.h>

#include <future>
#include <mutex>
#include <string>

#include "sprintnet/core/error.h"

namespace sprintnet::cuda {
namespace {

// What the load found: the functions, or why there are none.
struct Loaded {
  CublasLtApi api{};
  std::string error;
};

template <typename F>
bool resolve(void* library, const char* name, F& slot, std::string& error) {
  slot = reinterpret_cast<F>(dlsym(library, name));
  if (slot == nullptr && error.empty()) error = fmt::format("{} has no symbol {}", SPRINTNET_CUBLASLT_SONAME, name);
  return slot != nullptr;
}

Loaded load() {
  Loaded out;
  // The soname through the loader's search path (the executable's RUNPATH, LD_LIBRARY_PATH, ld.so.cache),
  // then the toolkit's directory this build was configured with. Never closed: the process keeps it.
  void* library = dlopen(SPRINTNET_CUBLASLT_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const std::string first = dlerror();
    library = dlopen(SPRINTNET_CUBLASLT_PATH, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      out.error = fmt::format("cannot load cuBLASLt ({}: {}; {}: {}); the CUDA toolkit's libraries must be on the "
                              "library path (LD_LIBRARY_PATH)",
                              SPRINTNET_CUBLASLT_SONAME, first, SPRINTNET_CUBLASLT_PATH, dlerror());
      return out;
    }
  }
  CublasLtApi& a = out.api;
  std::string& e = out.error;
  resolve(library, "cublasLtCreate", a.create, e);
  resolve(library, "cublasLtDestroy", a.destroy, e);
  resolve(library, "cublasLtGetStatusName", a.status_name, e);
  resolve(library, "cublasLtGetStatusString", a.status_string, e);
  resolve(library, "cublasLtMatmul", a.matmul, e);
  resolve(library, "cublasLtMatmulAlgoGetHeuristic", a.algo_get_heuristic, e);
  resolve(library, "cublasLtMatmulDescCreate", a.desc_create, e);
  resolve(library, "cublasLtMatmulDescDestroy", a.desc_destroy, e);
  resolve(library, "cublasLtMatmulDescSetAttribute", a.desc_set_attribute, e);
  resolve(library, "cublasLtMatmulPreferenceCreate", a.preference_create, e);
  resolve(library, "cublasLtMatmulPreferenceDestroy", a.preference_destroy, e);
  resolve(library, "cublasLtMatmulPreferenceSetAttribute", a.preference_set_attribute, e);
  resolve(library, "cublasLtMatrixLayoutCreate", a.layout_create, e);
  resolve(library, "cublasLtMatrixLayoutDestroy", a.layout_destroy, e);
  return out;
}

std::mutex loading_mutex;
std::shared_future<Loaded>& loading() {
  static std::shared_future<Loaded> future;
  return future;
}

}  // namespace

void start_loading_cublaslt() {
  const std::lock_guard lock(loading_mutex);
  if (!loading().valid()) loading() = std::async(std::launch::async, load).share();
}

const CublasLtApi& cublaslt() {
  start_loading_cublaslt();
  const Loaded& loaded = loading().get();  // the future outlives every caller: a function-local static
  SN_CHECK(loaded.error.empty(), "{}", loaded.error);
  return loaded.api;
}

}  // namespace sprintnet::cuda
