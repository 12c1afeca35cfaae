#include "sprintnet/train/resume.h"

#include <algorithm>

#include <fmt/format.h>

#include "sprintnet/core/error.h"
#include "sprintnet/io/config_schema.h"
#include "sprintnet/train/run_directory.h"

namespace sprintnet::train {
namespace {

// They say how long the run goes on, where it computes and what it shows, not what the epochs
// up to the checkpoint computed. output.dir and output.name are ignored: a resumed run stays in
// RUN_DIR. (Bit-exact continuation needs the same device and thread count as before.)
// The data paths say where the bytes are, not what is computed: a run started in another working directory
// (data.dir = "data" is relative) or whose data set moved resumes with --set data.dir=...; the data they find
// must be the checkpoint's (its fingerprint, Trainer::restore). device.update (replicated or sharded) computes
// the same update either way, and a sharded run resumed on a GPU count its model does not split over needs it.
// output.csv says whether metrics.csv is written (MetricsWriter::resume fills it from metrics.jsonl when it is turned
// on, and stops writing it when it is turned off).
constexpr std::string_view kResumableKeys[] = {
    "train.epochs",       "train.eval_every",         "train.eval_batch_size", "train.log_every",
    "device.name",        "device.allocator",         "device.threads",        "output.dir",
    "output.name",        "output.progress",          "output.csv",            "checkpoint.every_epochs",
    "checkpoint.keep_last", "data.dir",               "data.train_images",     "data.train_labels",
    "data.test_images",   "data.test_labels",         "device.update",
};

bool is_resumable(std::string_view key) {
  return std::find(std::begin(kResumableKeys), std::end(kResumableKeys), key) != std::end(kResumableKeys);
}

// "optim.lr (0.05 in the checkpoint, 0.1 now)" for each key that differs but may not.
std::vector<std::string> forbidden_changes(const Config& checkpoint, const Config& resumed) {
  std::vector<std::string> out;
  for (const ConfigDifference& d : config_differences(checkpoint, resumed)) {
    if (is_resumable(d.key)) continue;
    out.push_back(fmt::format("{} ({} in the checkpoint, {} now)", d.key, format_toml_value(d.before),
                              format_toml_value(d.after)));
  }
  return out;
}

// A run still training in another process is named as that, not as a run without a checkpoint (in its first
// epoch it has none yet): its lock is taken and let go here, and taken again for good by Trainer::fit.
void refuse_a_run_in_use(const std::filesystem::path& run_dir) {
  std::error_code ignored;
  if (!std::filesystem::is_directory(run_dir, ignored)) return;  // (latest_checkpoint names what it is)
  const RunDirectoryLock probe(run_dir);  // throws "in use by another sprintnet process"
}

}  // namespace

std::span<const std::string_view> resumable_config_keys() { return kResumableKeys; }

ResumePlan plan_resume(const std::filesystem::path& run_dir, const std::filesystem::path& config_path,
                       const std::vector<std::string>& overrides) {
  ResumePlan plan;
  plan.run_dir = run_dir;
  refuse_a_run_in_use(run_dir);
  plan.checkpoint = read_checkpoint(latest_checkpoint(run_dir));
  const std::filesystem::path& dir = plan.checkpoint.dir;
  if (config_path.empty()) {
    plan.config = load_config(dir / kCheckpointConfigFileName, overrides);
  } else {
    plan.config = load_config(config_path, overrides);
  }

  const std::vector<std::string> changes = forbidden_changes(plan.checkpoint.config, plan.config);
  SN_CHECK(changes.empty(),
           "cannot resume from {}: {} changes {}; these keys shape what the run computes, so only {} may change "
           "when resuming",
           dir.string(),
           config_path.empty() ? std::string("--set")
           : overrides.empty() ? config_path.string()
                               : fmt::format("{} with --set", config_path.string()),
           fmt::join(changes, ", "),
           fmt::join(kResumableKeys, ", "));

  const std::int64_t done = plan.checkpoint.epoch;
  SN_CHECK(plan.config.train.epochs != done,
           "run {} has already trained its {} epochs (checkpoint {}); to train longer, resume with "
           "--set train.epochs=N with N > {}",
           run_dir.string(), done, dir.filename().string(), done);
  SN_CHECK(plan.config.train.epochs > done, "train.epochs = {} is fewer than the {} epochs run {} has trained",
           plan.config.train.epochs, done, run_dir.string());
  return plan;
}

}  // namespace sprintnet::train
