#include "checkpoint_options.h"

namespace sprintnet::cli {

void add_checkpoint_options(CLI::App& cmd, CheckpointOptions& options, const std::string& device_help) {
  cmd.add_option("checkpoint", options.checkpoint,
                 "Run directory of `sprintnet train`, a checkpoint directory, or a .safetensors file")
      ->type_name("CHECKPOINT")
      ->required();
  cmd.add_option("--config", options.config_path,
                 "The config the model was trained with (default: config.toml beside the weights)")
      ->type_name("FILE");
  cmd.add_option("--set", options.overrides, "Override a config key, e.g. --set data.dir=/data (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  cmd.add_option("--device", options.device, device_help)->capture_default_str();
}

train::LoadedModel load_checkpoint(const CheckpointOptions& options) {
  train::LoadOptions load;
  if (!options.config_path.empty()) load.config = options.config_path;
  load.overrides = options.overrides;
  load.device = options.device;
  return train::load_model(options.checkpoint, load);
}

}  // namespace sprintnet::cli
