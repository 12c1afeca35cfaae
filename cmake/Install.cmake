# `cmake --install`: headers, the static library and what it links, a CMake package
# (find_package(sprintnet) -> sprintnet::sprintnet) and a pkg-config file (sprintnet.pc).
# docs/INSTALL.md shows both from another project; .ci/run builds examples/ against an install.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/sprintnet DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
# The static library's private link dependencies travel with it: our interface targets (OpenBLAS's header and path,
# stb, the warning flags, which consumers only link, never compile with) go into the same export.
install(TARGETS sprintnet sprintnet_blas sprintnet_dnnl sprintnet_stb sprintnet_warnings EXPORT sprintnetTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(SPRINTNET_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/sprintnet)
install(EXPORT sprintnetTargets NAMESPACE sprintnet:: DESTINATION ${SPRINTNET_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/sprintnetConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/sprintnetConfig.cmake INSTALL_DESTINATION ${SPRINTNET_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sprintnetConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sprintnetConfig.cmake ${PROJECT_BINARY_DIR}/sprintnetConfigVersion.cmake
        DESTINATION ${SPRINTNET_CMAKE_DIR})

# pkg-config: a static library lists everything it links in Libs.
set(SPRINTNET_PC_LIBS "-lsprintnet ${DNNL_LIBRARY} ${STB_LIBRARY} -ltomlplusplus -lprotobuf -lfmt -lz -fopenmp -pthread -ldl")
if(SPRINTNET_CUDA)
  string(APPEND SPRINTNET_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart ${SPRINTNET_NCCL_LIBRARY}")
endif()
set(SPRINTNET_PC_CFLAGS "-DSPRINTNET_CUDA=$<BOOL:${SPRINTNET_CUDA}>")
if(SPRINTNET_CUDA)
  string(APPEND SPRINTNET_PC_CFLAGS " -I${CUDAToolkit_INCLUDE_DIRS}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/sprintnet.pc.in ${PROJECT_BINARY_DIR}/sprintnet.pc.configured @ONLY)
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/sprintnet.pc INPUT ${PROJECT_BINARY_DIR}/sprintnet.pc.configured)
install(FILES ${PROJECT_BINARY_DIR}/sprintnet.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The command line, so an installed prefix trains too.
install(TARGETS sprintnet_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
