#pragma once
// The options of every command that reads a trained model (eval, predict):
// the CHECKPOINT positional, --config, --set and --device, and loading it.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "sprintnet/train/inference.h"

namespace sprintnet::cli {

struct CheckpointOptions {
  std::string checkpoint;
  std::string config_path;
  std::vector<std::string> overrides;
  std::string device = "auto";
};

// Registers CHECKPOINT (call before the command's own positionals) and the shared flags.
void add_checkpoint_options(CLI::App& cmd, CheckpointOptions& options, const std::string& device_help);
train::LoadedModel load_checkpoint(const CheckpointOptions& options);

}  // namespace sprintnet::cli
