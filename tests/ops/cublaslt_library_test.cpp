// cuBLASLt is loaded with dlopen (ops/cuda/cublaslt_library.h): every function the products call
// must resolve. Needs the library, not a GPU, so it runs in CI too.
#include <gtest/gtest.h>

#include "sprintnet/ops/cuda/cublaslt_library.h"

namespace sprintnet {
namespace {

TEST(CublasLtLibrary, LoadsEveryFunctionTheProductsCall) {
  cuda::start_loading_cublaslt();
  cuda::start_loading_cublaslt();  // a second start is a no-op
  const cuda::CublasLtApi& lt = cuda::cublaslt();
  EXPECT_EQ(&lt, &cuda::cublaslt()) << "loaded once";
  const void* functions[] = {
      reinterpret_cast<const void*>(lt.create), reinterpret_cast<const void*>(lt.destroy),
      reinterpret_cast<const void*>(lt.status_name), reinterpret_cast<const void*>(lt.status_string),
      reinterpret_cast<const void*>(lt.matmul), reinterpret_cast<const void*>(lt.algo_get_heuristic),
      reinterpret_cast<const void*>(lt.desc_create), reinterpret_cast<const void*>(lt.desc_destroy),
      reinterpret_cast<const void*>(lt.desc_set_attribute), reinterpret_cast<const void*>(lt.preference_create),
      reinterpret_cast<const void*>(lt.preference_destroy), reinterpret_cast<const void*>(lt.preference_set_attribute),
      reinterpret_cast<const void*>(lt.layout_create), reinterpret_cast<const void*>(lt.layout_destroy)};
  for (std::size_t i = 0; i < std::size(functions); ++i) EXPECT_NE(functions[i], nullptr) << "function " << i;
  // A call that needs no GPU: the library answers with its own status names.
  EXPECT_STREQ(lt.status_name(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
}

}  // namespace
}  // namespace sprintnet
