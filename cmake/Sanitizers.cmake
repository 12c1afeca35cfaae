# SPRINTNET_SANITIZE=ON builds everything with AddressSanitizer and UBSan (CPU code only).
option(SPRINTNET_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
if(SPRINTNET_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=address,undefined)
endif()
