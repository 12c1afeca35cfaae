#pragma once
// A sweep's results: one record per run (kept in DIR/sweep.json so a killed sweep resumes), and
// the summary files written from them: summary.csv (every run) and summary.md (every run, then
// each grid point's mean ± standard deviation over its seeds, best first).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sprintnet::sweep {

struct RunResult {
  std::string name, point;
  std::vector<std::string> overrides;  // the run's grid values and seed, as "key=value"
  std::string status;                  // "done" or "failed"
  std::string error;                   // why it failed
  double final_accuracy = 0.0, best_accuracy = 0.0, final_loss = 0.0;
  double train_s = 0.0, wall_s = 0.0;  // wall_s NaN: not known (a run found finished in its folder)
  std::int64_t epochs = 0;
};

struct PointStats {
  std::string point;
  std::int64_t runs = 0, failed = 0;
  double mean_accuracy = 0.0, std_accuracy = 0.0, mean_loss = 0.0, mean_train_s = 0.0;
};

// Mean and sample standard deviation (n - 1; 0 for one run) of each point's finished runs, best
// mean accuracy first (points whose runs all failed last).
std::vector<PointStats> point_statistics(const std::vector<RunResult>& results);

void write_state(const std::filesystem::path& dir, const std::vector<RunResult>& results);
// The records of a previous sweep in `dir` (empty when it has none).
std::vector<RunResult> read_state(const std::filesystem::path& dir);
void write_summary(const std::filesystem::path& dir, const std::vector<RunResult>& results);

}  // namespace sprintnet::sweep
