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
// Called once, as the runs left start to train (every check passed, the plan made; not at all when none is left):
// what the sweep is about to do, so that it can be shown before the first run ends. `progress` has no run
// finished by this process yet (finished_earlier: those of an earlier attempt) and `workers` set. An exception it
// throws ends the sweep before any run starts.
using StartCallback = std::function<void(const SweepProgress& progress)>;

// A stop request (core/stop_request.h: Ctrl-C, SIGTERM, SIGHUP) stops a sweep as well: no run starts after it, the
// runs in flight stop after their epoch, with its checkpoint, not recorded as finished (the resume continues them
// from it), and the finished runs are returned.

// A new sweep in options.out_dir (new, or empty). The folder is locked while the sweep runs: a second
// process on it (another sweep, a resume) fails at once, naming it.
std::vector<RunResult> run_sweep(const SweepOptions& options, const RunCallback& on_run = {},
                                 const StartCallback& on_start = {});
// Continues the sweep in `dir` with the config, overrides, grid and CPU thread count it was started with;
// `parallel` as in SweepOptions. A run whose folder shows it finished (sweep_runner.cpp: finished_in_folder) is
// not trained again, whoever finished it. A run folder is removed only when it holds this sweep's own unfinished
// attempt at the run with no checkpoint to continue from; one that holds anything else (a run that
// `sprintnet train --resume` trained to another train.epochs, final weights the sweep cannot count, files the
// sweep did not write) is left as it is and its run recorded as failed, the error naming the folder and what to do.
std::vector<RunResult> resume_sweep(const std::filesystem::path& dir, int parallel = 0, const RunCallback& on_run = {},
                                    const StartCallback& on_start = {});

}  // namespace sprintnet::sweep
