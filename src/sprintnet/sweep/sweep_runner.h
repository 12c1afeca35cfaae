#pragma once
// Runs a sweep in this process: every run a normal run directory under the sweep's folder (so
// eval, predict and --resume work on each), one after another with no process start-up between
// them; a run that fails (diverges, an error) is recorded with its error and the sweep goes on;
// after every run the state (sweep.json) and summary.csv/.md are rewritten, so a killed sweep
// resumes where it stopped and skips what finished.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "sprintnet/sweep/grid.h"
#include "sprintnet/sweep/summary.h"

namespace sprintnet::sweep {

struct SweepOptions {
  std::filesystem::path config_path;
  std::vector<std::string> overrides;  // --set, for every run
  SweepSpec spec;
  std::filesystem::path out_dir;
};

// Called after each run with the counts so far and the seconds since the sweep started.
using RunCallback = std::function<void(const RunResult& run, std::size_t finished, std::size_t failed,
                                       std::size_t total, double elapsed_s)>;

// A new sweep in options.out_dir (which must not hold one already).
std::vector<RunResult> run_sweep(const SweepOptions& options, const RunCallback& on_run = {});
// Continues the sweep in `dir` with the config, overrides and grid it was started with.
std::vector<RunResult> resume_sweep(const std::filesystem::path& dir, const RunCallback& on_run = {});

}  // namespace sprintnet::sweep
