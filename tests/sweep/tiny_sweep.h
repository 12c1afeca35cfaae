#pragma once
// Sweeps of tiny CPU runs for the sweep tests: a 784-16-10 MLP, one epoch on 600 MNIST images, 200 to test.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sprintnet/sweep/grid.h"
#include "sprintnet/sweep/sweep_runner.h"
#include "support/test_util.h"

namespace sprintnet::sweep {

// DIR/sweep.toml: the tiny run's config, then `sweep_table` (a [sweep] table, or nothing).
inline std::filesystem::path write_config(const std::filesystem::path& dir, const std::string& sweep_table) {
  const std::filesystem::path path = dir / "sweep.toml";
  std::ofstream(path) << fmt::format(
      "[data]\ndir = \"{}\"\ntrain_limit = 600\ntest_limit = 200\n[model]\nhidden = [16]\n[train]\nepochs = 1\n"
      "batch_size = 100\n[device]\nname = \"cpu\"\n{}",
      test::data_dir().string(), sweep_table);
  return path;
}

// A sweep of the config's [sweep] `table` into dir/out_name, not started.
inline SweepOptions new_sweep(const std::filesystem::path& dir, const std::string& table,
                              const std::string& out_name = "out") {
  SweepOptions o;
  o.config_path = write_config(dir, table);
  o.spec = read_sweep_table(o.config_path);
  o.out_dir = dir / out_name;
  return o;
}

}  // namespace sprintnet::sweep
