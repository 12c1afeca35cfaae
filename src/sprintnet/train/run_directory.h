#pragma once
// Where a run's files go: <output.dir>/<output.name>, the name defaulting to
// <dataset>-<UTC timestamp>; an existing directory is never reused (a numeric
// suffix is added), so one run can't overwrite another's results.
// A new run that cannot write its first files removes the directory again (Trainer::fit).
#include <filesystem>

#include "sprintnet/io/config.h"

namespace sprintnet::train {

std::filesystem::path create_run_directory(const Config& config);

}  // namespace sprintnet::train
