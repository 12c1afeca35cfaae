#pragma once
// Continuing a run from its latest checkpoint: `sprintnet train --resume RUN_DIR`.
// The run continues with the config stored in the checkpoint. Only the keys of
// resumable_config_keys() may differ from it (train.epochs to train longer, where
// the run computes, what it shows); any other difference would make the resumed
// epochs something the checkpoint's run never was, and is refused naming the key.
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sprintnet/io/config.h"
#include "sprintnet/train/checkpoint.h"

namespace sprintnet::train {

struct ResumePlan {
  std::filesystem::path run_dir;
  Checkpoint checkpoint;  // the run's latest, read and validated
  Config config;          // what the resumed run uses
};

// The keys that may differ between a checkpoint's config and the config a run resumes with.
std::span<const std::string_view> resumable_config_keys();

// Plans resuming `run_dir` from its latest checkpoint. The config is the checkpoint's with
// `overrides` applied or, when `config_path` is not empty, that file's with `overrides`.
// Throws naming the run directory, the checkpoint and every key that differs from the
// checkpoint's config but may not, and when the run has already trained train.epochs epochs.
ResumePlan plan_resume(const std::filesystem::path& run_dir, const std::filesystem::path& config_path,
                       const std::vector<std::string>& overrides);

}  // namespace sprintnet::train
