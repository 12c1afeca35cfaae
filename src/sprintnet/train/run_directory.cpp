#include "sprintnet/train/run_directory.h"

#include <ctime>

#include <fmt/chrono.h>

#include "sprintnet/core/error.h"

namespace sprintnet::train {

std::filesystem::path create_run_directory(const Config& config) {
  std::string name = config.output.name;
  if (name.empty()) {
    name = fmt::format("{}-{:%Y%m%d-%H%M%S}", config.data.dataset, fmt::gmtime(std::time(nullptr)));
  }
  const std::filesystem::path base = std::filesystem::path(config.output.dir) / name;
  std::error_code ec;
  std::filesystem::create_directories(base.parent_path(), ec);
  SN_CHECK(!ec, "output.dir: cannot create {}: {}", base.parent_path().string(), ec.message());
  for (int suffix = 0; suffix < 1000; ++suffix) {
    const std::filesystem::path candidate =
        suffix == 0 ? base : std::filesystem::path(fmt::format("{}-{}", base.string(), suffix));
    if (std::filesystem::create_directory(candidate, ec)) return candidate;
    SN_CHECK(!ec, "cannot create run directory {}: {}", candidate.string(), ec.message());
  }
  SN_FAIL("cannot find a free run directory name next to {}", base.string());
}

}  // namespace sprintnet::train
