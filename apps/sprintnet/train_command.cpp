// sprintnet train CONFIG [--set key=value ...]
// sprintnet train --resume RUN_DIR [CONFIG] [--set train.epochs=N ...]
// sprintnet train CONFIG --gpus N   (data parallel, one process per GPU; docs/DISTRIBUTED.md)
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "sprintnet/core/error.h"
#include "sprintnet/core/stop_request.h"
#include "sprintnet/dist/device_connections.h"
#include "sprintnet/dist/launcher.h"
#include "sprintnet/dist/rank_info.h"
#include "sprintnet/io/progress_format.h"
#include "sprintnet/io/config.h"
#include "sprintnet/io/shell_word.h"
#include "sprintnet/ops/backend.h"
#include "sprintnet/plot/run_curves.h"
#include "sprintnet/train/out_of_memory_advice.h"
#include "sprintnet/train/resume.h"
#include "sprintnet/train/trainer.h"

namespace sprintnet::cli {

void add_train_command(CLI::App& app) {
  struct Options {
    std::string config_path;
    std::string resume_dir;
    std::vector<std::string> overrides;
    bool quiet = false;
    int gpus = 0;
    bool verbose = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model described by a TOML config, or resume a run");
  cmd->add_option("config", options->config_path,
                  "TOML config file (see docs/CONFIG.md); optional with --resume, where it must match the "
                  "checkpoint's config except in the keys docs/CHECKPOINTS.md lists");
  cmd->add_option("--resume", options->resume_dir,
                  "Continue the run in this directory from its latest checkpoint, with the config stored there "
                  "(extend it with --set train.epochs=N)");
  cmd->add_option("--set", options->overrides, "Override a config key, e.g. --set optim.lr=0.1 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("-q,--quiet", options->quiet,
                "Print only the final summary line (and errors, and where a stopped run continues)");
  cmd->add_option("--gpus", options->gpus,
                  "Train data-parallel on this many GPUs of this machine, one process each (over NCCL; "
                  "train.batch_size stays the global batch)")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("-v,--verbose", options->verbose,
                "Also print where the wall time went (start-up, data, training, evaluation, writes)");
  cmd->callback([options] {
    const double before_trainer_s = train::process_age_s();
    // As the launcher reads it: NNODES=01 compared as text was "several nodes", and every rank of its job of one
    // started a job of its own, without end.
    const dist::Environment environment = dist::process_environment();
    const std::optional<std::string> nnodes_text = environment("NNODES");
    const int nnodes = dist::node_count(environment);
    // NNODES=0 trained as one node (only NNODES above 1 reached the launcher, which refuses it).
    SN_CHECK(nnodes >= 1, "NNODES={}: a job runs on one machine or more; set NNODES to the number of machines, or "
             "leave it out for a job on this machine alone", nnodes_text.value_or(""));
    const bool multi_node = nnodes > 1;
    // Under a launcher's job of several ranks (torchrun, srun, mpirun, or --gpus for its own ranks) this process is
    // one rank already: --gpus would start a separate job of its own in every rank, on the same GPUs. (One task
    // of srun, a job of one, may start its ranks with --gpus.)
    const dist::RankInfo launched = dist::rank_info_from(environment);
    SN_CHECK(options->gpus == 0 || !launched.distributed(),
             "--gpus {}: this process is rank {} of {} started by {} (its variables are set), which starts the ranks "
             "itself: leave --gpus out (srun, mpirun and torchrun start one process a GPU; docs/DISTRIBUTED.md)",
             options->gpus, launched.rank, launched.world, launched.launcher);
    // NODE_RANK=1 without NNODES (or with NNODES=1): this machine would train a job of its own beside node 0's, each
    // alone, where a job over both was meant. (With --gpus 2 and more the launcher refuses it; one GPU a node came
    // through.)
    SN_CHECK(launched.distributed() || multi_node || dist::node_rank(environment) == 0,
             "NODE_RANK={} {}: set NNODES to the number of machines (and MASTER_ADDR, MASTER_PORT to node 0's), or "
             "leave NODE_RANK out for a job on this machine alone",
             environment("NODE_RANK").value_or(""),
             nnodes_text ? fmt::format("with NNODES={} (one machine, node 0)", *nnodes_text) : "without NNODES");
    const bool starts_ranks = (options->gpus > 1 || multi_node) && !launched.distributed();
    dist::prefer_few_device_connections(starts_ranks);  // before the first CUDA call
    if (options->gpus >= 1) {  // --gpus 1 too: it asks for a GPU, not for whatever device.name finds
      const int available = cuda_device_count();
      SN_CHECK(options->gpus <= available, "--gpus {}: this machine has {} GPU(s){}", options->gpus, available,
               available == 0 ? fmt::format(" ({})", cuda_unavailable_reason()) : "");
    }
    if (starts_ranks) {
      options->gpus = std::max(options->gpus, 1);
      // The same command line without --gpus, once per rank (dist/launcher.h).
      std::vector<std::string> args = {"train"};
      if (!options->config_path.empty()) args.push_back(options->config_path);
      if (!options->resume_dir.empty()) args.insert(args.end(), {"--resume", options->resume_dir});
      for (const std::string& o : options->overrides) args.insert(args.end(), {"--set", o});
      if (options->quiet) args.push_back("--quiet");
      if (options->verbose) args.push_back("--verbose");
      dist::launch_local_ranks(options->gpus, std::filesystem::read_symlink("/proc/self/exe").string(), args);
      return;
    }
    std::unique_ptr<train::Trainer> trainer;
    std::filesystem::path config_file;  // the file the run's config came from, named when memory runs out
    if (options->resume_dir.empty()) {
      SN_CHECK(!options->config_path.empty(), "train needs a CONFIG file, or --resume RUN_DIR to continue a run");
      config_file = options->config_path;
      Config config = load_config(config_file, options->overrides);
      if (options->quiet) config.output.progress = "none";
      trainer = train::advise_on_out_of_memory(config_file, config, train::MemoryUse::kTraining,
                                               [&] { return std::make_unique<train::Trainer>(config); });
    } else {
      train::ResumePlan plan = train::plan_resume(options->resume_dir, options->config_path, options->overrides);
      if (options->quiet) plan.config.output.progress = "none";
      config_file = options->config_path.empty() ? plan.checkpoint.dir / train::kCheckpointConfigFileName
                                                 : std::filesystem::path(options->config_path);
      trainer = train::advise_on_out_of_memory(config_file, plan.config, train::MemoryUse::kTraining,
                                               [&] { return std::make_unique<train::Trainer>(plan); });
    }
    SN_CHECK(options->gpus == 0 || trainer->device().is_cuda(), "--gpus {}: the run's device.name says {}; --gpus "
             "trains on GPUs (set device.name = \"auto\" or \"cuda\", or leave --gpus out)", options->gpus,
             trainer->config().device.name);
    trainer->count_time_before(before_trainer_s);
    trainer->set_quiet(options->quiet);  // no epoch lines either
    const bool primary = trainer->rank().primary();  // data parallel: rank 0 speaks for the job
    if (!options->quiet && primary) std::printf("%s\n", trainer->describe().c_str());
    std::fflush(stdout);
    // Ctrl-C, SIGTERM, SIGHUP: the run stops after the epoch in progress and its checkpoint (not the ranks of a job, whose
    // launcher stops them all; core/stop_request.h).
    if (!launched.distributed()) stop_on_signals();
    // The run's curves.png is drawn however it ends, but by a kill: at the end, after a stop, and after an error once
    // it has rows (a divergence: "metrics so far are in RUN"). A resumed run's picture was the earlier end's.
    // `warn`: say so when nothing can be drawn (not after an error, whose own message is what matters).
    const auto draw_curves = [&](const std::filesystem::path& run_dir, bool warn) {
      const plot::PlotOutcome curves = plot::draw_run_curves_in_background(run_dir);
      if (!options->quiet && (curves.drawn || warn)) std::printf("%s\n", curves.message.c_str());
      std::fflush(stdout);
    };
    std::optional<train::TrainSummary> ended;
    try {
      ended = train::advise_on_out_of_memory(config_file, trainer->config(), train::MemoryUse::kTraining,
                                             [&] { return trainer->fit(); });
    } catch (const Error&) {
      if (primary && !trainer->run_dir().empty()) draw_curves(trainer->run_dir(), false);
      throw;
    }
    const train::TrainSummary& summary = *ended;
    if (!primary) return;
    if (summary.stop_signal) {
      draw_curves(summary.run_dir, true);
      const std::int64_t epoch = trainer->start_epoch() + static_cast<std::int64_t>(summary.epochs.size());
      std::fprintf(stderr,
                   "sprintnet: stopped by %s after epoch %lld of %lld, checkpoint %s; continue with: sprintnet train "
                   "--resume %s\n",
                   stop_cause_name(*summary.stop_signal), static_cast<long long>(epoch),
                   static_cast<long long>(trainer->config().train.epochs),
                   train::latest_checkpoint(summary.run_dir).string().c_str(),
                   shell_quoted(summary.run_dir.string()).c_str());
      throw StoppedBySignal{*summary.stop_signal};
    }
    std::printf("sprintnet: %s in %.2f s (training %.2f s), test accuracy %.2f %%, test loss %.4f, run %s\n",
                counted(static_cast<std::int64_t>(summary.epochs.size()), "epoch").c_str(), summary.wall_time_s,
                summary.train_time_s, 100.0 * summary.final_test.accuracy, unsigned_nan(summary.final_test.loss),
                shell_quoted(summary.run_dir.string()).c_str());
    if (options->verbose) std::printf("%s\n", summary.phases.format(summary.wall_time_s).c_str());
    draw_curves(summary.run_dir, true);
    // A signal in the last epoch let the run finish, as it would have; the command still ends by it, so that a
    // shell's loop or a make stops as for any Ctrl-C (an exit 0 ran the script's next command).
    if (const std::optional<int> late = launched.distributed() ? std::nullopt : stop_requested()) {
      std::fprintf(stderr, "sprintnet: %s came in the last epoch or after it: the run finished (nothing to resume)\n",
                   stop_cause_name(*late));
      throw StoppedBySignal{*late};
    }
  });
}

}  // namespace sprintnet::cli
