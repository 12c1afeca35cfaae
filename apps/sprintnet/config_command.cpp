// sprintnet config [--reference | CONFIG [--set ...]]: show the resolved config,
// or print the key reference (docs/CONFIG.md is generated with it).
#include <cstdio>

#include "commands.h"
#include "sprintnet/io/config.h"

namespace sprintnet::cli {

void add_config_command(CLI::App& app) {
  struct Options {
    std::string config_path;
    std::vector<std::string> overrides;
    bool reference = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("config", "Print a resolved config, or the reference of every key");
  CLI::Option* config_option = cmd->add_option("config", options->config_path, "TOML config file");
  CLI::Option* set = cmd->add_option("--set", options->overrides, "Override a config key (repeatable)");
  // The reference is every key's default: a file or --set beside it would be silently ignored.
  cmd->add_flag("--reference", options->reference, "Print the markdown reference of every key (docs/CONFIG.md)")
      ->excludes(config_option)
      ->excludes(set);
  cmd->callback([options] {
    if (options->reference) {
      std::fputs(config_reference_markdown().c_str(), stdout);
      return;
    }
    const Config config = options->config_path.empty() ? config_from_overrides(options->overrides)
                                                        : load_config(options->config_path, options->overrides);
    std::fputs(config_to_toml(config).c_str(), stdout);
  });
}

}  // namespace sprintnet::cli
