#pragma once
// GPU tests: skip, saying why, where no CUDA device can be used (CI has none), or where the test needs
// more devices than this machine has.
#include <gtest/gtest.h>

#include "sprintnet/ops/backend.h"

#define SN_REQUIRE_GPU()                                                              \
  do {                                                                                \
    if (::sprintnet::cuda_device_count() == 0) {                                      \
      GTEST_SKIP() << "no CUDA device: " << ::sprintnet::cuda_unavailable_reason();   \
    }                                                                                 \
  } while (false)

// A test of `n` GPUs skips, naming how many it needs, on a machine with fewer (never a silent partial run).
#define SN_REQUIRE_GPUS(n)                                                                          \
  do {                                                                                              \
    SN_REQUIRE_GPU();                                                                               \
    if (::sprintnet::cuda_device_count() < (n)) {                                                   \
      GTEST_SKIP() << "needs " << (n) << " CUDA devices, this machine has "                         \
                   << ::sprintnet::cuda_device_count();                                             \
    }                                                                                               \
  } while (false)
