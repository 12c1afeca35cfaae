#pragma once
// Each subcommand registers its options on the CLI11 app and runs when chosen.
// A command returns the process exit code; errors are thrown as sprintnet::Error
// and main() turns them into one line on stderr and exit code 1 (two lines for
// running out of device memory: train/out_of_memory_advice.h adds what to change).
#include <CLI/CLI.hpp>

namespace sprintnet::cli {

// Thrown by a command whose run a signal stopped, once its checkpoint is written and what to say is said
// (core/stop_request.h). main() lets the destructors run, then ends the process by the signal: the parent sees a
// death by it, so a shell loop over runs stops too.
struct StoppedBySignal {
  int signal;
};

void add_train_command(CLI::App& app);
void add_config_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_predict_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_plot_command(CLI::App& app);

}  // namespace sprintnet::cli
