#include "sprintnet/train/out_of_memory_advice.h"

#include <span>
#include <string_view>

#include <fmt/format.h>

#include "sprintnet/io/config_schema.h"

namespace sprintnet::train {
namespace {

// The keys a training run's device memory grows with: the activations of a batch and of an
// evaluation batch, the weights with their gradients and optimizer state, and the device itself.
constexpr std::string_view kTrainingKeys[] = {"train.batch_size", "train.eval_batch_size", "model.hidden",
                                              "device.name"};
constexpr std::string_view kLowerTraining = "lower train.batch_size, train.eval_batch_size or model.hidden";
// Running a trained model: its widths are what it was trained with, so only the batch can change
// (and the device, which is --device there, not device.name).
constexpr std::string_view kInferenceKeys[] = {"train.eval_batch_size", "model.hidden"};

// "train.batch_size = 128, model.hidden = [256, 256]": the values as the config file would write them.
std::string keys_and_values(std::span<const std::string_view> names, const Config& config) {
  std::string out;
  for (const std::string_view name : names) {
    const ConfigKey* key = find_config_key(name);
    SN_CHECK(key != nullptr, "out_of_memory_advice: '{}' is not a config key", name);  // a typo above
    out += fmt::format("{}{} = {}", out.empty() ? "" : ", ", name, format_toml_value(key->get(config)));
  }
  return out;
}

}  // namespace

std::string out_of_memory_advice(const std::filesystem::path& config_file, const Config& config, MemoryUse use,
                                 MemoryKind kind) {
  const std::string file = config_file.string();
  const bool host = kind == MemoryKind::kHost;
  const std::string_view memory = host ? "host memory" : "device memory";
  switch (use) {
    case MemoryUse::kTraining:
      return fmt::format("{}: the run ran out of {} with {} (after any --set); {}{}", file, memory,
                         keys_and_values(kTrainingKeys, config), kLowerTraining,
                         host ? "" : ", or set device.name to a GPU with more free memory");
    case MemoryUse::kSweepRun:
      return fmt::format(
          "{}: this run of the sweep ran out of {} with {} (after --set and the run's grid values); {}, "
          "or train fewer runs at once{} (--parallel)",
          file, memory, keys_and_values(kTrainingKeys, config), kLowerTraining, host ? "" : " on a GPU");
    case MemoryUse::kInference:
      return fmt::format("{}: the model ran out of {} with {} (after any --set); lower train.eval_batch_size "
                         "(--set train.eval_batch_size=N){}",
                         file, memory, keys_and_values(kInferenceKeys, config),
                         host ? "" : ", or run it on the CPU (--device cpu)");
  }
  return file;  // not reached: every MemoryUse is a case above
}

OutOfMemoryError with_out_of_memory_advice(const OutOfMemoryError& error, const std::filesystem::path& config_file,
                                           const Config& config, MemoryUse use) {
  return OutOfMemoryError(
      fmt::format("{}\n{}", error.what(), out_of_memory_advice(config_file, config, use, error.kind())),
      error.kind());
}

}  // namespace sprintnet::train
