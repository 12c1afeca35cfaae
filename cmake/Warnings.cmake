# Warnings on everywhere; warnings are errors when SPRINTNET_WERROR is set (CI sets it).
option(SPRINTNET_WERROR "Treat warnings as errors" OFF)
add_library(sprintnet_warnings INTERFACE)
target_compile_options(sprintnet_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                            -Wnon-virtual-dtor -Woverloaded-virtual>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${SPRINTNET_WERROR}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${SPRINTNET_WERROR}>>:-Werror=all-warnings>)
