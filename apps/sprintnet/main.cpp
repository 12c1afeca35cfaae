// sprintnet: train, evaluate and benchmark MLPs from TOML configs.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "standard_streams.h"
#include "sprintnet/core/error.h"
#include "sprintnet/core/stop_request.h"

namespace {

// A command line that does not parse (an unknown option, a missing argument, a value out of range): 2, as
// Python's argparse and most Unix tools, where CLI11 returns 105-109 by the kind of mistake. Errors of a
// command that parsed exit 1.
constexpr int kUsageError = 2;

}  // namespace

int main(int argc, char** argv) {
  sprintnet::cli::open_missing_standard_streams();  // before any file is opened
  // Before any thread starts (core/stop_request.h): train and sweep then stop after an epoch on Ctrl-C, and a
  // closed pipe or a file size limit is a failed write, not a silent death.
  sprintnet::ignore_write_signals();
  sprintnet::take_signals_in_their_own_thread();
  CLI::App app{"sprintnet: fast MLP training on the GPU and the CPU", "sprintnet"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "sprintnet 0.1.0");
  sprintnet::cli::add_train_command(app);
  sprintnet::cli::add_eval_command(app);
  sprintnet::cli::add_predict_command(app);
  sprintnet::cli::add_config_command(app);
  sprintnet::cli::add_sweep_command(app);
  sprintnet::cli::add_plot_command(app);
  // A misspelt command: CLI11 would say "A subcommand is required". Name it, and the commands there are.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* command : std::as_const(app).get_subcommands(std::function<bool(const CLI::App*)>{})) {
      names.push_back(command->get_name());
    }
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      std::fprintf(stderr, "sprintnet: error: unknown command '%s'; the commands: %s (sprintnet --help)\n", argv[1],
                   fmt::format("{}", fmt::join(names, ", ")).c_str());
      return kUsageError;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints the message (or the help, or the version: code 0)
    if (code != 0) return kUsageError;
    return sprintnet::cli::standard_output_written() ? 0 : 1;
  } catch (const sprintnet::cli::StoppedBySignal& stopped) {
    sprintnet::cli::standard_output_written();  // (said if not; the signal says more)
    if (stopped.signal > 0) sprintnet::end_by_signal(stopped.signal);
    return 1;  // (a request from the program: none in the CLI)
  } catch (const sprintnet::Error& e) {  // raised while running the command
    std::fprintf(stderr, "sprintnet: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "sprintnet: error: out of host memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sprintnet: internal error: %s\n", e.what());
    return 1;
  }
  return sprintnet::cli::standard_output_written() ? 0 : 1;
}
