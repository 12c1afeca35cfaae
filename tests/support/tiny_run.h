#pragma once
// The config of a tiny run for tests that need a trained model on disk: a
// 784-32-10 MLP, one epoch on 2000 MNIST images, one CPU thread (about a
// second), written to <out_dir>/run. The seed is the test seed, kept below
// 2^63 because TOML integers are signed.
#include <cstdint>
#include <filesystem>

#include "sprintnet/io/config.h"
#include "support/test_util.h"

namespace sprintnet::test {

inline Config tiny_run_config(const std::filesystem::path& out_dir, std::int64_t test_samples) {
  return config_from_overrides({
      fmt::format("seed={}", config_seed()),
      fmt::format("data.dir=\"{}\"", data_dir().string()),
      "data.train_limit=2000",
      fmt::format("data.test_limit={}", test_samples),
      "model.hidden=[32]",
      "train.epochs=1",
      "device.name=\"cpu\"",
      "device.threads=1",
      fmt::format("output.dir=\"{}\"", out_dir.string()),
      "output.name=\"run\"",
      "output.progress=\"none\"",
  });
}

}  // namespace sprintnet::test
