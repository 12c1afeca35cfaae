// sprintnet train CONFIG [--set key=value ...]
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "sprintnet/io/config.h"
#include "sprintnet/train/trainer.h"

namespace sprintnet::cli {

void add_train_command(CLI::App& app) {
  struct Options {
    std::string config_path;
    std::vector<std::string> overrides;
    bool quiet = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model described by a TOML config");
  cmd->add_option("config", options->config_path, "TOML config file (see docs/CONFIG.md)")->required();
  cmd->add_option("--set", options->overrides, "Override a config key, e.g. --set optim.lr=0.1 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("-q,--quiet", options->quiet, "Print only the final summary line");
  cmd->callback([options] {
    Config config = load_config(options->config_path, options->overrides);
    if (options->quiet) config.output.progress = "none";
    train::Trainer trainer(config);
    if (!options->quiet) std::printf("%s\n", trainer.describe().c_str());
    std::fflush(stdout);
    const train::TrainSummary summary = trainer.fit();
    std::printf("sprintnet: %lld epochs in %.2f s (training %.2f s), test accuracy %.2f %%, test loss %.4f, run %s\n",
                static_cast<long long>(summary.epochs.size()), summary.wall_time_s, summary.train_time_s,
                100.0 * summary.final_test.accuracy, summary.final_test.loss, summary.run_dir.string().c_str());
  });
}

}  // namespace sprintnet::cli
