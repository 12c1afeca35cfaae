// The CPU thread count (ops/cpu/cpu_backend.h): OMP_NUM_THREADS's first count when set, as PyTorch reads it,
// else one a core; set_cpu_threads sets OpenMP's count for the calling thread, which oneDNN and our loops use.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <sched.h>

#include <cstdlib>

#include "sprintnet/ops/cpu/cpu_backend.h"
#include "support/error_message.h"
#include "support/scoped_env.h"

namespace sprintnet {
namespace {

int cores() { return usable_cores(); }

// The cores a process may run on are its affinity's: a Slurm job's or a container's cpuset, not the machine's.
TEST(CpuThreads, UsableCoresAreTheAffinitysCores) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(usable_cores(), CPU_COUNT(&all));
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  EXPECT_EQ(usable_cores(), 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
}

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
  for (const char* blanks : {" 4", "4 ", "\t4\t", " 4 , 2"}) {  // as libgomp reads them
    test::ScopedEnv env("OMP_NUM_THREADS", blanks);
    EXPECT_EQ(default_cpu_threads(), 4) << "OMP_NUM_THREADS='" << blanks << "'";
  }
  {
    test::ScopedEnv env("OMP_NUM_THREADS", "100000");
    EXPECT_EQ(default_cpu_threads(), kMaxCpuThreads);
  }
  for (const char* malformed : {"0", "-2", "two", "3x", " ", "4 4"}) {
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
