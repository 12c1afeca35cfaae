#pragma once
// What to change when a run runs out of device (or host) memory. The allocators' OutOfMemoryError names
// the bytes and the device; only the command that built the run knows which config file and
// keys asked for them. advise_on_out_of_memory() runs a piece of that command and rethrows such
// an error with a line naming the file, the keys that size device memory with their values, and
// the advice to lower them (the project's standard: an error names the file/key and what is wrong).
#include <filesystem>
#include <string>
#include <utility>

#include "sprintnet/core/out_of_memory_error.h"
#include "sprintnet/io/config.h"

namespace sprintnet::train {

// What the memory was for: which keys size it, and what else can be changed.
enum class MemoryUse {
  kTraining,    // sprintnet train: the batch, the evaluation batch, the model, on device.name
  kSweepRun,    // one run of sprintnet sweep: the same, beside the other runs on its GPU (--parallel)
  kInference,   // sprintnet eval / predict: the model (train::load_model) and the evaluation batch, on --device
};

// The advice line for `config` (what `config_file` and its overrides resolved to).
std::string out_of_memory_advice(const std::filesystem::path& config_file, const Config& config, MemoryUse use,
                                 MemoryKind kind = MemoryKind::kDevice);

// `error` with the advice line after its message; still an OutOfMemoryError.
OutOfMemoryError with_out_of_memory_advice(const OutOfMemoryError& error, const std::filesystem::path& config_file,
                                           const Config& config, MemoryUse use);

// Returns body(); an OutOfMemoryError it throws is rethrown with_out_of_memory_advice. Any other
// error passes unchanged.
template <typename Body>
decltype(auto) advise_on_out_of_memory(const std::filesystem::path& config_file, const Config& config, MemoryUse use,
                                       Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (const OutOfMemoryError& e) {
    throw with_out_of_memory_advice(e, config_file, config, use);
  }
}

}  // namespace sprintnet::train
