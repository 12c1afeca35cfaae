# Every dependency comes from Debian's packages (scripts/install-deps installs them).
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(tomlplusplus 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(GTest REQUIRED)
find_package(OpenMP REQUIRED)

# OpenBLAS (pthread flavour) for sgemm/dgemm. Linked directly rather than via
# the libblas alternative so that openblas_set_num_threads() is available.
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES x86_64-linux-gnu/openblas-pthread openblas)
find_library(OPENBLAS_LIBRARY NAMES openblas)
if(NOT OPENBLAS_INCLUDE_DIR OR NOT OPENBLAS_LIBRARY)
  message(FATAL_ERROR "OpenBLAS not found: run scripts/install-deps (Debian package libopenblas-dev)")
endif()
add_library(sprintnet_blas INTERFACE)
target_include_directories(sprintnet_blas INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(sprintnet_blas INTERFACE ${OPENBLAS_LIBRARY})

find_package(benchmark QUIET)

if(SPRINTNET_CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
