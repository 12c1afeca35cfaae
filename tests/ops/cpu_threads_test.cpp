// The CPU thread count (ops/cpu/cpu_backend.h): OMP_NUM_THREADS's first count when set, as PyTorch reads it,
// else one a core; set_cpu_threads sets OpenMP's count for the calling thread, which oneDNN and our loops use.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "sprintnet/ops/cpu/cpu_backend.h"
#include "support/error_message.h"
#include "support/scoped_env.h"

namespace sprintnet {
namespace {

int cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

TEST(CpuThreads, DefaultIsOmpNumThreadsWhenSetElseTheCores) {
  ::unsetenv("OMP_NUM_THREADS");  // the one a test's environment may carry (each test runs in a process of its own)
  {
    test::ScopedEnv env("OMP_NUM_THREADS", "3");
    EXPECT_EQ(default_cpu_threads(), 3);
  }
  {
    test::ScopedEnv env("OMP_NUM_THREADS", "5,2");  // one count a nesting level: the first is ours
    EXPECT_EQ(default_cpu_threads(), 5);
  }
  {
    test::ScopedEnv env("OMP_NUM_THREADS", "100000");
    EXPECT_EQ(default_cpu_threads(), kMaxCpuThreads);
  }
  for (const char* malformed : {"0", "-2", "two", "3x", " "}) {
    test::ScopedEnv env("OMP_NUM_THREADS", malformed);
    EXPECT_EQ(default_cpu_threads(), cores()) << "OMP_NUM_THREADS='" << malformed << "'";
  }
  EXPECT_EQ(default_cpu_threads(), cores());
}

TEST(CpuThreads, SettingZeroTakesTheDefaultAndSetsOpenMpsCount) {
  ::unsetenv("OMP_NUM_THREADS");
  {
    test::ScopedEnv env("OMP_NUM_THREADS", "3");
    set_cpu_threads(0);
    EXPECT_EQ(cpu_threads(), 3);
    EXPECT_EQ(omp_get_max_threads(), 3);
  }
  set_cpu_threads(2);
  EXPECT_EQ(cpu_threads(), 2);
  EXPECT_EQ(omp_get_max_threads(), 2);
  EXPECT_THAT(test::error_message([] { set_cpu_threads(kMaxCpuThreads + 1); }),
              testing::HasSubstr("thread count must be in [0, 1024], got 1025"));
  EXPECT_EQ(cpu_threads(), 2);
}

}  // namespace
}  // namespace sprintnet
