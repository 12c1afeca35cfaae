# Every dependency comes from Debian's packages (scripts/install-deps installs them).
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(tomlplusplus 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(GTest REQUIRED)
find_package(OpenMP REQUIRED)
find_package(Protobuf REQUIRED)  # TensorBoard event messages
find_package(Boost REQUIRED)     # header-only: Boost.CRC's CRC-32C for TensorBoard's records

# OpenBLAS, OpenMP flavour (Debian's libopenblas-openmp-dev): BLAS and our own
# OpenMP loops then share one thread pool. With the pthread flavour the two
# pools spin against each other and a 2-core step ran 2-6x slower. Opened by
# path rather than through the libblas alternative so openblas_set_num_threads()
# is there and the flavour cannot change under us.
set(OPENBLAS_OPENMP_DIR /usr/lib/x86_64-linux-gnu/openblas-openmp)
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATHS /usr/include/x86_64-linux-gnu/openblas-openmp NO_DEFAULT_PATH)
find_library(OPENBLAS_LIBRARY NAMES openblas PATHS ${OPENBLAS_OPENMP_DIR} NO_DEFAULT_PATH)
if(NOT OPENBLAS_INCLUDE_DIR OR NOT OPENBLAS_LIBRARY)
  message(FATAL_ERROR "OpenBLAS (OpenMP flavour) not found: run scripts/install-deps (Debian package libopenblas-openmp-dev)")
endif()
# The library opens it at run time, on the first fp64 product (ops/cpu/openblas_library.h says why): it needs
# the header and the path; benchmarks that call it directly link sprintnet_blas_linked.
add_library(sprintnet_blas INTERFACE)
target_include_directories(sprintnet_blas INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_compile_definitions(sprintnet_blas INTERFACE SPRINTNET_OPENBLAS_PATH="${OPENBLAS_OPENMP_DIR}/libopenblas.so.0")
target_link_libraries(sprintnet_blas INTERFACE ${CMAKE_DL_LIBS})
add_library(sprintnet_blas_linked INTERFACE)
target_link_libraries(sprintnet_blas_linked INTERFACE sprintnet_blas ${OPENBLAS_LIBRARY})

# oneDNN (Debian's libdnnl-dev, OpenMP runtime): the compiled CPU step's matrix products, with the
# bias and activation fused as post-ops and bf16 on AVX512-BF16/AMX (docs/PERFORMANCE.md says why).
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(DNNL_LIBRARY NAMES dnnl)
if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
  message(FATAL_ERROR "oneDNN not found: run scripts/install-deps (Debian package libdnnl-dev)")
endif()
add_library(sprintnet_dnnl INTERFACE)
target_include_directories(sprintnet_dnnl INTERFACE ${DNNL_INCLUDE_DIR})
target_link_libraries(sprintnet_dnnl INTERFACE ${DNNL_LIBRARY})

find_package(benchmark QUIET)

if(SPRINTNET_CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
