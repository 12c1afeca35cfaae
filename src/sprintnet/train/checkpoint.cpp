#include "sprintnet/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <utility>

#include <boost/crc.hpp>
#include <fmt/format.h>

#include "sprintnet/core/error.h"
#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/read_file.h"

#ifndef SPRINTNET_VERSION_STRING
#error "SPRINTNET_VERSION_STRING is set by src/sprintnet/train/CMakeLists.txt from the project version"
#endif

namespace sprintnet::train {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kEpochDirPrefix = "epoch-";
// Metadata keys of state.safetensors; counters are "optimizer.<counter name>".
constexpr std::string_view kFormatKey = "format";
constexpr std::string_view kFormatVersionKey = "format_version";
constexpr std::string_view kVersionKey = "sprintnet_version";
constexpr std::string_view kEpochKey = "epoch";
constexpr std::string_view kStepKey = "step";
constexpr std::string_view kOptimizerKey = "optimizer";
constexpr std::string_view kCounterPrefix = "optimizer.";
constexpr std::string_view kConfigKey = "config";
constexpr std::string_view kTrainDataKey = "train_data";
constexpr std::string_view kLossScaleKey = "loss_scale";
constexpr std::string_view kLossScaleGoodStepsKey = "loss_scale.good_steps";

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The epoch of a checkpoint directory name ("epoch-0003" -> 3), or nothing for other names.
std::optional<std::int64_t> epoch_of_dir_name(std::string_view name) {
  if (!name.starts_with(kEpochDirPrefix) || name.size() == kEpochDirPrefix.size()) return std::nullopt;
  const std::string_view digits = name.substr(kEpochDirPrefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  const auto epoch = parse_int(digits);
  if (!epoch || *epoch < 1) return std::nullopt;
  return epoch;
}

// Makes renames and new entries in `dir` durable. Best effort, as in write_text_file_atomically:
// some file systems refuse fsync on directories.
void fsync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void remove_directory(const fs::path& dir) {
  std::error_code error;
  fs::remove_all(dir, error);
  SN_CHECK(!error, "cannot delete checkpoint directory {}: {}", dir.string(), error.message());
}

std::string trimmed(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return std::string(text.substr(first, text.find_last_not_of(kSpace) - first + 1));
}

const std::string& required_metadata(const Metadata& metadata, std::string_view key, const fs::path& file) {
  const auto it = metadata.find(std::string(key));
  SN_CHECK(it != metadata.end(), "{}: metadata has no '{}' (not a sprintnet checkpoint state file?)", file.string(),
           key);
  return it->second;
}

std::int64_t metadata_int(const Metadata& metadata, std::string_view key, const fs::path& file) {
  const std::string& text = required_metadata(metadata, key, file);
  const auto value = parse_int(text);
  SN_CHECK(value && *value >= 0, "{}: metadata '{}' is \"{}\", expected a non-negative integer", file.string(), key,
           text);
  return *value;
}

Metadata state_metadata(const Checkpoint& checkpoint) {
  Metadata metadata{
      {std::string(kFormatKey), std::string(kCheckpointStateFormat)},
      {std::string(kFormatVersionKey), std::string(kCheckpointFormatVersion)},
      {std::string(kVersionKey), SPRINTNET_VERSION_STRING},
      {std::string(kEpochKey), std::to_string(checkpoint.epoch)},
      {std::string(kStepKey), std::to_string(checkpoint.step)},
      {std::string(kOptimizerKey), checkpoint.optimizer_type},
      {std::string(kConfigKey), config_to_toml(checkpoint.config)},
  };
  for (const auto& [name, value] : checkpoint.optimizer_counters) {
    metadata[fmt::format("{}{}", kCounterPrefix, name)] = std::to_string(value);
  }
  if (!checkpoint.train_data.empty()) metadata[std::string(kTrainDataKey)] = checkpoint.train_data;
  if (checkpoint.loss_scaling) {
    // fmt's shortest form that reads back as the same float.
    metadata[std::string(kLossScaleKey)] = fmt::format("{}", checkpoint.loss_scaling->scale);
    metadata[std::string(kLossScaleGoodStepsKey)] = std::to_string(checkpoint.loss_scaling->good_steps);
  }
  return metadata;
}

// The loss scaling an fp16 run's state file holds, checked against what runs write; nothing when it holds none.
std::optional<LossScaling> read_loss_scaling(const Metadata& metadata, const Checkpoint& checkpoint,
                                             const fs::path& file) {
  const bool has_scale = metadata.contains(std::string(kLossScaleKey));
  if (!has_scale && !metadata.contains(std::string(kLossScaleGoodStepsKey))) return std::nullopt;
  SN_CHECK(checkpoint.config.device.precision == "fp16",
           "{}: metadata '{}' is fp16's loss scaling, but the checkpoint's config has device.precision = \"{}\"",
           file.string(), has_scale ? kLossScaleKey : kLossScaleGoodStepsKey, checkpoint.config.device.precision);
  const std::string& text = required_metadata(metadata, kLossScaleKey, file);
  LossScaling scaling;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), scaling.scale);
  SN_CHECK(error == std::errc() && end == text.data() + text.size(), "{}: metadata '{}' is \"{}\", expected a number",
           file.string(), kLossScaleKey, text);
  scaling.good_steps = metadata_int(metadata, kLossScaleGoodStepsKey, file);
  const std::optional<std::string> problem = loss_scaling_problem(scaling);
  SN_CHECK(!problem, "{}: metadata '{}' and '{}': {}, which no fp16 run writes", file.string(), kLossScaleKey,
           kLossScaleGoodStepsKey, problem.value_or(""));
  SN_CHECK(scaling.good_steps <= checkpoint.step, "{}: metadata '{}' counts {} steps, more than the run's {}",
           file.string(), kLossScaleGoodStepsKey, scaling.good_steps, checkpoint.step);
  return scaling;
}

// Deletes checkpoints older than the newest `keep_last` (0 = none), those after `current` (left
// by an earlier life of the run that died before pointing `latest` at them), and the hidden
// temporaries of unfinished writes (of checkpoint directories and of `latest`). `current`
// itself always stays. One process writes a run directory at a time.
void prune_checkpoints(const fs::path& run_dir, std::int64_t current, std::int64_t keep_last) {
  const fs::path checkpoints = run_dir / kCheckpointsDirName;
  std::vector<std::pair<std::int64_t, fs::path>> older;
  for (const fs::path& dir : list_checkpoints(run_dir)) {
    const std::int64_t epoch = *epoch_of_dir_name(dir.filename().string());
    if (epoch > current) {
      remove_directory(dir);
    } else if (epoch < current) {
      older.emplace_back(epoch, dir);
    }
  }
  if (keep_last > 0) {
    const auto excess = static_cast<std::int64_t>(older.size()) - (keep_last - 1);
    for (std::int64_t i = 0; i < excess; ++i) remove_directory(older[static_cast<std::size_t>(i)].second);
  }
  std::vector<fs::path> temporaries;  // collected first: removing entries while listing is unspecified
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(checkpoints, error)) {
    if (entry.path().filename().string().starts_with('.')) temporaries.push_back(entry.path());
  }
  SN_CHECK(!error, "cannot list {}: {}", checkpoints.string(), error.message());
  for (const fs::path& temporary : temporaries) remove_directory(temporary);
}

}  // namespace

std::string checkpoint_dir_name(std::int64_t epoch) { return fmt::format("{}{:04}", kEpochDirPrefix, epoch); }

fs::path write_checkpoint(const fs::path& run_dir, const Checkpoint& checkpoint, std::int64_t keep_last) {
  SN_CHECK(checkpoint.epoch >= 1 && checkpoint.step >= 0,
           "checkpoint of epoch {} step {}: expected epoch >= 1 and step >= 0", checkpoint.epoch, checkpoint.step);
  const fs::path checkpoints = run_dir / kCheckpointsDirName;
  std::error_code error;
  fs::create_directories(checkpoints, error);
  SN_CHECK(!error, "cannot create {}: {}", checkpoints.string(), error.message());

  const std::string name = checkpoint_dir_name(checkpoint.epoch);
  const fs::path temporary = checkpoints / fmt::format(".{}.tmp.{}", name, ::getpid());
  remove_directory(temporary);
  SN_CHECK(fs::create_directory(temporary, error), "cannot create {}: {}", temporary.string(),
           error ? error.message() : "it exists");
  // Each file is written to its own temporary, fsynced and renamed (save_safetensors, write_text_file_atomically).
  try {
    Metadata weights_metadata = checkpoint.weights_metadata;
    weights_metadata["format"] = "pt";  // what safetensors.torch expects of a state dict
    weights_metadata["producer"] = "sprintnet";
    save_safetensors(temporary / kCheckpointModelFileName, checkpoint.weights, weights_metadata);
    save_safetensors(temporary / kCheckpointStateFileName, checkpoint.optimizer_state, state_metadata(checkpoint));
    write_text_file_atomically(temporary / kCheckpointConfigFileName, config_to_toml(checkpoint.config));
    fsync_directory(temporary);
    // A directory of this name is not what `latest` names (that one is older): it is left by a run
    // killed between renaming it and updating `latest`, and is replaced.
    remove_directory(checkpoints / name);
    fs::rename(temporary, checkpoints / name, error);
    SN_CHECK(!error, "cannot rename {} to {}: {}", temporary.string(), (checkpoints / name).string(), error.message());
  } catch (...) {
    fs::remove_all(temporary, error);  // a failed write (a full disk) leaves nothing behind; best effort
    throw;
  }
  const fs::path final_dir = checkpoints / name;
  fsync_directory(checkpoints);
  write_text_file_atomically(checkpoints / kLatestFileName, name + "\n");

  prune_checkpoints(run_dir, checkpoint.epoch, keep_last);
  return final_dir;
}

std::vector<fs::path> list_checkpoints(const fs::path& run_dir) {
  const fs::path checkpoints = run_dir / kCheckpointsDirName;
  std::vector<std::pair<std::int64_t, fs::path>> found;
  std::error_code error;
  if (!fs::is_directory(checkpoints, error)) return {};
  for (const auto& entry : fs::directory_iterator(checkpoints, error)) {
    const auto epoch = epoch_of_dir_name(entry.path().filename().string());
    std::error_code type_error;
    if (epoch && entry.is_directory(type_error)) found.emplace_back(*epoch, entry.path());
  }
  SN_CHECK(!error, "cannot list {}: {}", checkpoints.string(), error.message());
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [epoch, dir] : found) out.push_back(std::move(dir));
  return out;
}

fs::path latest_checkpoint(const fs::path& run_dir) {
  std::error_code error;
  SN_CHECK(fs::is_directory(run_dir, error), "run directory {} {}", run_dir.string(),
           fs::exists(run_dir, error) ? "is not a directory (--resume takes the run's folder, which holds checkpoints/)"
                                      : "does not exist");
  const fs::path latest = run_dir / kCheckpointsDirName / kLatestFileName;
  if (!fs::is_regular_file(latest, error)) {
    // Checkpoint folders that `latest` never named: a run stopped between a folder's rename and `latest`'s
    // (they are whole, as every folder is renamed into place complete), or `latest` was deleted. Name them, and
    // how to take one, rather than say there is no checkpoint.
    const std::vector<fs::path> folders = list_checkpoints(run_dir);
    std::string unnamed;
    for (const fs::path& dir : folders) unnamed += (unnamed.empty() ? "" : ", ") + dir.filename().string();
    if (!folders.empty()) {
      SN_FAIL("run directory {} has no checkpoint that {} names ({} does not exist), but {} holds {}: the run stopped "
              "before it named its first checkpoint, or the file was deleted. To resume from one of them, write its "
              "name into {} (e.g. echo {} > {})",
              run_dir.string(), kLatestFileName, latest.string(), (run_dir / kCheckpointsDirName).string(), unnamed,
              latest.string(), folders.back().filename().string(), latest.string());
    }
    SN_FAIL("run directory {} has no checkpoint to resume from ({} does not exist; a run writes one every "
            "checkpoint.every_epochs epochs and after its last, and --resume takes the directory holding checkpoints/)",
            run_dir.string(), latest.string());
  }
  const std::string name = trimmed(read_file(latest, "checkpoint pointer"));
  SN_CHECK(epoch_of_dir_name(name).has_value(), "{}: expected a checkpoint name such as \"epoch-0003\", got \"{}\"",
           latest.string(), name);
  const fs::path dir = run_dir / kCheckpointsDirName / name;
  SN_CHECK(fs::is_directory(dir, error), "{} names {}, which does not exist", latest.string(), dir.string());
  return dir;
}

std::string latest_checkpoint_name(const fs::path& run_dir) {
  const fs::path latest = run_dir / kCheckpointsDirName / kLatestFileName;
  std::error_code error;
  if (!fs::is_regular_file(latest, error)) return {};
  try {
    return trimmed(read_file(latest, "checkpoint pointer"));
  } catch (const Error&) {
    return {};
  }
}

Checkpoint read_checkpoint(const fs::path& dir) {
  std::error_code error;
  SN_CHECK(fs::is_directory(dir, error), "checkpoint directory {} does not exist", dir.string());
  for (std::string_view file : {kCheckpointModelFileName, kCheckpointStateFileName, kCheckpointConfigFileName}) {
    // A path that is there but is no file (a directory of that name) is named as what it is, not as missing.
    const std::optional<std::string> problem = file_problem(dir / file);
    SN_CHECK(!problem, "checkpoint {}: {} {}", dir.string(), file,
             *problem == kNoSuchFile ? std::string("is missing") : fmt::format("is not a file: {}", *problem));
  }
  Checkpoint checkpoint;
  checkpoint.dir = dir;
  SafetensorsFile weights = load_safetensors(dir / kCheckpointModelFileName);
  checkpoint.weights = std::move(weights.tensors);
  checkpoint.weights_metadata = std::move(weights.metadata);

  const fs::path state_path = dir / kCheckpointStateFileName;
  SafetensorsFile state = load_safetensors(state_path);
  const Metadata& metadata = state.metadata;
  const std::string& format = required_metadata(metadata, kFormatKey, state_path);
  SN_CHECK(format == kCheckpointStateFormat, "{}: metadata format is \"{}\", expected \"{}\"", state_path.string(),
           format, kCheckpointStateFormat);
  const std::string& version = required_metadata(metadata, kFormatVersionKey, state_path);
  SN_CHECK(version == kCheckpointFormatVersion,
           "{}: checkpoint format version {} (written by sprintnet {}); this sprintnet {} reads version {}",
           state_path.string(), version, required_metadata(metadata, kVersionKey, state_path),
           SPRINTNET_VERSION_STRING, kCheckpointFormatVersion);
  checkpoint.epoch = metadata_int(metadata, kEpochKey, state_path);
  checkpoint.step = metadata_int(metadata, kStepKey, state_path);
  checkpoint.optimizer_type = required_metadata(metadata, kOptimizerKey, state_path);
  for (const auto& [key, value] : metadata) {
    if (key.starts_with(kCounterPrefix)) {
      checkpoint.optimizer_counters[key.substr(kCounterPrefix.size())] = metadata_int(metadata, key, state_path);
    }
  }
  checkpoint.optimizer_state = std::move(state.tensors);
  if (const auto it = metadata.find(std::string(kTrainDataKey)); it != metadata.end()) checkpoint.train_data = it->second;

  const std::string dir_name = dir.filename().string();
  const auto dir_epoch = epoch_of_dir_name(dir_name);
  SN_CHECK(dir_epoch == checkpoint.epoch, "{}: holds the state after epoch {}, but its directory is named {}",
           state_path.string(), checkpoint.epoch, dir_name);

  const fs::path config_path = dir / kCheckpointConfigFileName;
  checkpoint.config = load_config(config_path);
  SN_CHECK(config_to_toml(checkpoint.config) == required_metadata(metadata, kConfigKey, state_path),
           "{} differs from the config recorded in {} (was it edited? change keys on resume with --set instead)",
           config_path.string(), state_path.string());
  SN_CHECK(checkpoint.optimizer_type == checkpoint.config.optim.type,
           "{}: optimizer state of '{}', but the checkpoint's config has optim.type = \"{}\"", state_path.string(),
           checkpoint.optimizer_type, checkpoint.config.optim.type);
  SN_CHECK(checkpoint.epoch >= 1 && checkpoint.epoch <= checkpoint.config.train.epochs,
           "{}: epoch {} is outside the run's train.epochs = {}", state_path.string(), checkpoint.epoch,
           checkpoint.config.train.epochs);
  checkpoint.loss_scaling = read_loss_scaling(metadata, checkpoint, state_path);
  return checkpoint;
}

std::string training_data_fingerprint(const Dataset& train, const Normalization& norm) {
  boost::crc_32_type crc;
  if (train.labels.defined()) crc.process_bytes(train.labels.raw_data(), train.labels.nbytes());
  return fmt::format("{} samples, labels crc32 {:08x}, normalization scale {} shift {}", train.size(), crc.checksum(),
                     norm.scale, norm.shift);
}

}  // namespace sprintnet::train
