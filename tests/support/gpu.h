#pragma once
// GPU tests: skip, saying why, where no CUDA device can be used (CI has none).
#include <gtest/gtest.h>

#include "sprintnet/ops/backend.h"

#define SN_REQUIRE_GPU()                                                              \
  do {                                                                                \
    if (::sprintnet::cuda_device_count() == 0) {                                      \
      GTEST_SKIP() << "no CUDA device: " << ::sprintnet::cuda_unavailable_reason();   \
    }                                                                                 \
  } while (false)
