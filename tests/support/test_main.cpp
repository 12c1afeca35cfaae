// Test main: prints the random seed so any failure can be replayed with
// SPRINTNET_TEST_SEED=<seed>.
#include <gtest/gtest.h>

#include <cstdio>

#include "support/test_util.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::printf("sprintnet test seed: %llu (replay with SPRINTNET_TEST_SEED)\n",
              static_cast<unsigned long long>(sprintnet::test::test_seed()));
  return RUN_ALL_TESTS();
}
