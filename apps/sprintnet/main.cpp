// sprintnet: train, evaluate and benchmark MLPs from TOML configs.
#include <cstdio>
#include <exception>
#include <new>

#include "commands.h"
#include "sprintnet/core/error.h"
#include "sprintnet/core/stop_request.h"

int main(int argc, char** argv) {
  // Before any thread starts (core/stop_request.h): train and sweep then stop after an epoch on Ctrl-C.
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const sprintnet::cli::ExitStatus& status) {
    return status.code;
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
  return 0;
}
