#pragma once
// Runs a sweep in this process: every run a normal run directory under the sweep's folder (so
// eval, predict and --resume work on each), several at once from worker threads (worker_plan.h:
// side by side on each GPU, over every GPU) with no process start-up between them; a run that
// fails (diverges, an error) is recorded with its error and the sweep goes on; after every run the
// state (sweep.json) and summary.csv/.md are rewritten, so a killed sweep resumes where it stopped
// and skips what finished.
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
  int parallel = 0;  // runs at once (0 = auto, plan_workers())
  // device.threads of every CPU run, decided when the sweep begins (0: run_sweep decides it) and kept in its spec:
  // the CPU step's sums depend on the thread count, so a resume with another --parallel, or on another machine,
  // trains its runs with this one. Stays 0 for a sweep on GPUs (and in specs written before it was kept).
  std::int64_t cpu_threads = 0;
};

struct SweepProgress {
  std::size_t finished = 0, running = 0, failed = 0, total = 0;
  std::size_t finished_earlier = 0;  // of `finished`: by an earlier attempt of a resumed sweep (not reported again)
  double elapsed_s = 0.0;  // since the sweep started
  std::string workers;     // how the runs are spread (WorkerPlan::reason)
};

// Called (one call at a time, in the order runs finish) after each run. An exception it throws stops
// the sweep: no new run starts, the ones running finish, and run_sweep rethrows it.
using RunCallback = std::function<void(const RunResult& run, const SweepProgress& progress)>;

// A stop request (core/stop_request.h: Ctrl-C, SIGTERM, SIGHUP) stops a sweep as well: no run starts after it, the
// runs in flight stop after their epoch, with its checkpoint, not recorded as finished (the resume continues them
// from it), and the finished runs are returned.

// A new sweep in options.out_dir (new, or empty). The folder is locked while the sweep runs: a second
// process on it (another sweep, a resume) fails at once, naming it.
std::vector<RunResult> run_sweep(const SweepOptions& options, const RunCallback& on_run = {});
// Continues the sweep in `dir` with the config, overrides, grid and CPU thread count it was started with;
// `parallel` as in SweepOptions. A run whose folder shows it finished (sweep_runner.cpp: finished_in_folder) is
// not trained again, whoever finished it.
std::vector<RunResult> resume_sweep(const std::filesystem::path& dir, int parallel = 0, const RunCallback& on_run = {});

}  // namespace sprintnet::sweep
