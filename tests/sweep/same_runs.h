#pragma once
// Runs side by side equal the same runs one after another: status, metrics, and the weights file
// byte for byte (both engines and the CPU step are deterministic at a fixed thread count).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "sprintnet/sweep/summary.h"
#include "sprintnet/sweep/sweep_runner.h"
#include "support/test_util.h"

namespace sprintnet::sweep {

inline void expect_same_runs(const std::vector<RunResult>& alone, const std::filesystem::path& alone_dir,
                             const std::vector<RunResult>& together, const std::filesystem::path& together_dir) {
  ASSERT_EQ(together.size(), alone.size());
  for (std::size_t i = 0; i < alone.size(); ++i) {
    EXPECT_EQ(together[i].name, alone[i].name);  // grid order, whatever order they finished in
    ASSERT_EQ(alone[i].status, "done") << alone[i].error;
    ASSERT_EQ(together[i].status, "done") << together[i].error;
    EXPECT_EQ(together[i].final_loss, alone[i].final_loss) << alone[i].name;
    EXPECT_EQ(together[i].final_accuracy, alone[i].final_accuracy) << alone[i].name;
    EXPECT_EQ(test::file_bytes(together_dir / alone[i].name / "model.safetensors"),
              test::file_bytes(alone_dir / alone[i].name / "model.safetensors"))
        << alone[i].name;
  }
  ASSERT_GE(alone.size(), 2u);
  EXPECT_NE(alone[0].final_loss, alone[1].final_loss);  // the runs differ, so equal results mean something
}

// Runs the sweep `o` one run at a time into DIR/alone, then `parallel` at a time into DIR/together,
// and checks they agree; also that runs did overlap (one was still running when another finished)
// and, when `workers` is given, that the banner's worker line says so.
inline void expect_side_by_side_equals_alone(SweepOptions o, const std::filesystem::path& dir, int parallel,
                                             const std::string& workers = "") {
  o.out_dir = dir / "alone";
  o.parallel = 1;
  const std::vector<RunResult> alone = run_sweep(o);
  o.out_dir = dir / "together";
  o.parallel = parallel;
  std::size_t most_running = 0;
  std::string seen_workers;
  const std::vector<RunResult> together = run_sweep(o, [&](const RunResult&, const SweepProgress& p) {
    most_running = std::max(most_running, p.running);
    seen_workers = p.workers;
  });
  EXPECT_GT(most_running, 0u);
  if (!workers.empty()) {
    EXPECT_NE(seen_workers.find(workers), std::string::npos) << seen_workers;
  }
  expect_same_runs(alone, dir / "alone", together, dir / "together");
}

}  // namespace sprintnet::sweep
