// The thread count of a sweep's CPU runs is decided once, when the sweep begins: the CPU step's sums (and so a
// run's numbers) depend on it, and sharing the cores out by the runs at once gave a resume with another --parallel,
// or on a machine with other cores, another count than the sweep began with.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sprintnet/io/config.h"
#include "sprintnet/sweep/summary.h"
#include "sprintnet/sweep/sweep_runner.h"
#include "same_runs.h"
#include "support/scoped_env.h"
#include "support/test_util.h"
#include "tiny_sweep.h"

namespace sprintnet::sweep {
namespace {

// The device.threads a run of the sweep in `dir` trained with, from the config its folder keeps.
std::int64_t run_threads(const std::filesystem::path& dir, const std::string& run) {
  return load_config(dir / run / "config.toml").device.threads;
}

// Begun two at a time (the cores shared out between two runs) and killed after its first run, then resumed one at a
// time: the resume shared the cores among the runs left to it (all of them to one run), so its runs trained with
// another thread count and gave other weights than the sweep uninterrupted. They give the same weights now, bit for
// bit, every run trained with the count the sweep began with.
TEST(SweepThreads, AResumeWithAnotherParallelTrainsWithTheThreadCountTheSweepBeganWith) {
  const std::filesystem::path dir = test::temp_dir("sweep-threads-resume");
  SweepOptions o = new_sweep(dir, "[sweep]\nseeds = [0, 1, 2]\n", "whole");
  o.parallel = 2;
  const std::vector<RunResult> whole = run_sweep(o);
  ASSERT_EQ(whole.size(), 3u);

  o.out_dir = dir / "killed";
  struct Killed {};
  EXPECT_THROW(run_sweep(o, [](const RunResult&, const SweepProgress&) { throw Killed{}; }), Killed);
  ASSERT_LT(read_state(o.out_dir).size(), 3u);
  const std::vector<RunResult> resumed = resume_sweep(o.out_dir, 1);
  expect_same_runs(whole, dir / "whole", resumed, o.out_dir);

  const std::int64_t began_with = run_threads(dir / "whole", "seed=0");
  EXPECT_GT(began_with, 0);  // a count, not 0 ("the default", which differs from machine to machine)
  for (const RunResult& r : resumed) EXPECT_EQ(run_threads(o.out_dir, r.name), began_with) << r.name;
}

// One run alone takes the config's count, 0 here: OMP_NUM_THREADS or the cores, which differ between machines and
// jobs. The count it stands for when the sweep begins is the one recorded, so a resume elsewhere trains with it.
TEST(SweepThreads, TheDefaultCountIsResolvedWhenTheSweepBegins) {
  const std::filesystem::path dir = test::temp_dir("sweep-threads-default");
  const SweepOptions o = new_sweep(dir, "[sweep]\nseeds = [0]\n");
  {
    const test::ScopedEnv threads("OMP_NUM_THREADS", "3");
    ASSERT_EQ(run_sweep(o).size(), 1u);
  }
  EXPECT_EQ(run_threads(o.out_dir, "seed=0"), 3);
}

}  // namespace
}  // namespace sprintnet::sweep
