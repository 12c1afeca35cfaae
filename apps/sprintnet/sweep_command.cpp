// sprintnet sweep CONFIG [--grid KEY=V1,V2,...]... [--seeds 0,1,2] [--out DIR] [--set key=value]...
// sprintnet sweep --resume DIR
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/chrono.h>

#include "commands.h"
#include "sprintnet/core/error.h"
#include "sprintnet/core/stop_request.h"
#include "sprintnet/dist/rank_info.h"
#include "sprintnet/io/progress_format.h"
#include "sprintnet/io/shell_word.h"
#include "sprintnet/sweep/sweep_plot.h"
#include "sprintnet/sweep/sweep_runner.h"
#include "sprintnet/sweep/sweep_spec.h"

namespace sprintnet::cli {
namespace {

// As the runs start to train (every check passed): how they are spread, and for a resume what finished earlier.
void report_start(const sweep::SweepProgress& p) {
  std::fprintf(stderr, "sweep: %s\n", p.workers.c_str());
  if (p.finished_earlier > 0) {
    std::fprintf(stderr, "sweep: %zu of %zu runs finished earlier\n", p.finished_earlier, p.total);
  }
}

// Called by the sweep under its lock, one call at a time.
void report(const sweep::RunResult& run, const sweep::SweepProgress& p) {
  // From the runs this process trained: a resumed sweep's earlier runs took none of its time.
  const std::size_t trained_here = p.finished - p.finished_earlier;
  const double eta = trained_here > 0 ? p.elapsed_s / static_cast<double>(trained_here) *
                                            static_cast<double>(p.total - p.finished)
                                      : 0;
  const std::string what = run.status == "done" ? fmt::format("test accuracy {:.2f} %, {:.1f} s", 100 * run.final_accuracy,
                                                              run.wall_s)
                                                : fmt::format("FAILED: {}", run.error);
  std::fprintf(stderr, "sweep [%zu/%zu done, %zu running, %zu failed, ETA %.0f s] %s: %s\n", p.finished, p.total,
               p.running, p.failed, eta, run.name.c_str(), what.c_str());
}

// runs/sweep-DATE-TIME, created here: two sweeps started in the same second get two folders (-1, -2, ...).
std::string fresh_default_folder() {
  const std::string base = fmt::format("runs/sweep-{:%Y%m%d-%H%M%S}", fmt::gmtime(std::time(nullptr)));
  std::error_code ec;
  std::filesystem::create_directories("runs", ec);
  SN_CHECK(!ec, "cannot create runs/ for the sweep: {}", ec.message());
  for (int suffix = 0; suffix < 1000; ++suffix) {
    const std::string candidate = suffix == 0 ? base : fmt::format("{}-{}", base, suffix);
    if (std::filesystem::create_directory(candidate, ec)) return candidate;
    SN_CHECK(!ec, "cannot create the sweep's folder {}: {}", candidate, ec.message());
  }
  SN_FAIL("cannot find a free folder name next to {}", base);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  struct Options {
    std::string config_path, out_dir, resume_dir, seeds;
    std::vector<std::string> grid, overrides;
    int parallel = 0;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("sweep", "Train a config over a grid of values and seeds, with a summary table "
                                              "and pictures at the end");
  CLI::Option* config =
      cmd->add_option("config", options->config_path, "TOML config file; its [sweep] table may hold the grid and seeds");
  CLI::Option* grid = cmd->add_option("--grid", options->grid, "KEY=V1,V2,... (repeatable): the values a config key takes");
  CLI::Option* seeds = cmd->add_option("--seeds", options->seeds, "seeds every grid point runs with, e.g. 0,1,2");
  CLI::Option* out = cmd->add_option("--out", options->out_dir, "the sweep's folder (default runs/sweep-DATE-TIME)");
  CLI::Option* set = cmd->add_option("--set", options->overrides, "override a config key for every run (repeatable)");
  // A resume continues the sweep as it began: anything that would change it is refused, not ignored.
  cmd->add_option("--resume", options->resume_dir,
                  "continue the sweep in this folder, skipping finished runs (with its config, grid and seeds)")
      ->excludes(config)
      ->excludes(grid)
      ->excludes(seeds)
      ->excludes(out)
      ->excludes(set);
  cmd->add_option("--parallel", options->parallel,
                  "runs training at once, spread over the GPUs (0 = auto: as many as fill each GPU; on the CPU one a "
                  "core, within memory)")
      ->check(CLI::Range(0, 1 << 16));
  cmd->callback([options, seeds] {
    // Every run of a sweep trains in this one process: under a launcher's job of several ranks, each run would try
    // to join that job (or fail one by one after the folder is written). Refused before anything starts.
    const dist::RankInfo launched = dist::rank_info_from(dist::process_environment());
    SN_CHECK(!launched.distributed(), "sweep: this process is rank {} of {} started by {} (its variables are set); a "
             "sweep trains its runs in one process and spreads them over the GPUs itself: run it outside the launcher",
             launched.rank, launched.world, launched.launcher);
    const bool seeds_given = seeds->count() > 0;  // --seeds "" too: an error, not the config's seed
    std::vector<sweep::RunResult> results;
    std::string dir;
    std::size_t total = 0;  // the sweep's runs: a stop that left none unfinished is no stop
    stop_on_signals();  // Ctrl-C: the runs in flight stop after their epoch; the sweep's resume continues them
    if (!options->resume_dir.empty()) {
      dir = options->resume_dir;
      results = sweep::resume_sweep(dir, options->parallel, report, report_start);
      total = sweep::expand(sweep::read_sweep_spec(dir).spec).size();
    } else {
      SN_CHECK(!options->config_path.empty(), "sweep needs a CONFIG file, or --resume DIR to continue a sweep");
      sweep::SweepOptions o;
      o.config_path = options->config_path;
      o.overrides = options->overrides;
      o.spec = sweep::read_sweep_table(o.config_path, o.overrides);
      sweep::apply_command_line(o.spec, options->grid,
                                seeds_given ? std::optional<std::string>(options->seeds) : std::nullopt);
      SN_CHECK(!o.spec.axes.empty() || !o.spec.seeds.empty(),
               "sweep: nothing to sweep: give --grid KEY=V1,V2 or --seeds, or a [sweep] table in {}",
               options->config_path);
      total = sweep::expand(o.spec).size();  // (a grid it refuses is refused before a default folder is made)
      dir = options->out_dir.empty() ? fresh_default_folder() : options->out_dir;
      o.out_dir = dir;
      o.parallel = options->parallel;
      // Printed once every run's config has loaded (run_sweep checks them before anything trains).
      const auto banner = [&](const sweep::SweepProgress& p) {
        std::fprintf(stderr, "sweep: %s into %s\n", counted(static_cast<std::int64_t>(total), "run").c_str(),
                     dir.c_str());
        report_start(p);
      };
      try {
        results = sweep::run_sweep(o, report, banner);
      } catch (const Error&) {
        std::error_code ignored;  // a default folder the sweep never wrote goes again (a setup error)
        if (options->out_dir.empty() && std::filesystem::is_empty(dir, ignored)) std::filesystem::remove(dir, ignored);
        throw;
      }
    }
    std::size_t failed = 0;
    for (const sweep::RunResult& r : results) failed += r.status == "failed" ? 1 : 0;
    if (const std::optional<int> stop = stop_requested(); stop && results.size() < total) {
      std::fprintf(stderr, "sprintnet sweep: stopped by %s with %s finished (%zu failed); continue with: sprintnet "
                   "sweep --resume %s\n", stop_cause_name(*stop), counted(static_cast<std::int64_t>(results.size()),
                   "run").c_str(), failed, shell_quoted(dir).c_str());
      throw StoppedBySignal{*stop};
    }
    const std::string pictures = sweep::plot_sweep_in_background(dir);
    std::printf("sprintnet sweep: %s, %zu failed; %s/summary.md, %s/summary.csv; %s\n",
                counted(static_cast<std::int64_t>(results.size()), "run").c_str(), failed,
                dir.c_str(), dir.c_str(), pictures.c_str());
    // The sweep went on past its failed runs, but a script running it must see them: a non-zero exit.
    SN_CHECK(failed == 0, "sweep: {} of {} runs failed (each one's error: {}/summary.md)", failed, results.size(), dir);
  });
}

}  // namespace sprintnet::cli
