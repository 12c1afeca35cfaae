#pragma once
// A sweep's results: one record per run (kept in DIR/sweep.json so a killed sweep resumes), and
// the summary files written from them: summary.csv (every run) and summary.md (every run, then
// each grid point's mean ± standard deviation over its seeds, best first). A value that is not known
// (NaN: a failed run's final accuracy and loss, the deviation of one run) is an empty field in
// summary.csv, "—" in summary.md, and null in sweep.json.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace sprintnet::sweep {

struct RunResult {
  static constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
  std::string name, point;
  std::vector<std::string> overrides;  // the run's grid values and seed, as "key=value"
  std::string status;                  // "done" or "failed"
  std::string error;                   // why it failed
  // NaN: not known. A failed run has no final accuracy or loss; its best accuracy and training time come from
  // its metrics rows where it has any; a run found finished in its folder has no wall time.
  double final_accuracy = kUnknown, best_accuracy = kUnknown, final_loss = kUnknown;
  double train_s = kUnknown, wall_s = kUnknown;
  std::int64_t epochs = 0;
};

struct PointStats {
  std::string point;
  std::int64_t runs = 0, failed = 0;
  double mean_accuracy = 0.0, std_accuracy = RunResult::kUnknown, mean_loss = 0.0, mean_train_s = 0.0;
};

// Mean and sample standard deviation (n - 1, as numpy's ddof=1 and pandas: NaN, not known, for one run) of each
// point's finished runs, best mean accuracy first (points whose runs all failed last).
std::vector<PointStats> point_statistics(const std::vector<RunResult>& results);

void write_state(const std::filesystem::path& dir, const std::vector<RunResult>& results);
// The records of a previous sweep in `dir` (empty when it has none).
std::vector<RunResult> read_state(const std::filesystem::path& dir);
void write_summary(const std::filesystem::path& dir, const std::vector<RunResult>& results);

}  // namespace sprintnet::sweep
