#pragma once
// sweep-spec.json: what a sweep was started with (the config file's path and text, the --set
// overrides, the grid and the seeds, the CPU runs' thread count), written when it begins and read by
// `sweep --resume`.
#include <filesystem>

#include "sprintnet/sweep/sweep_runner.h"

namespace sprintnet::sweep {

// Whether `dir` holds a sweep (its spec).
bool has_sweep_spec(const std::filesystem::path& dir);
// Writes options' spec into options.out_dir.
void write_sweep_spec(const SweepOptions& options);

// The options `dir`'s sweep began with (out_dir = dir). The config file must still resolve, with
// those overrides, to the config the sweep began with: the runs still to train must train what
// the finished ones trained. Its text is compared as a config, not as bytes (comments, layout
// and how a value is written do not matter), leaving out the keys no run takes from the file
// (the grid's, the seed when the grid has seeds, and those the sweep sets for each run); a
// difference is an error naming each key with both values. Specs written before the text was
// kept are taken as they are. Resumed from another working directory than the sweep began in, a
// relative data path (data.dir = "data", the default) is an error naming it and that directory.
SweepOptions read_sweep_spec(const std::filesystem::path& dir);

}  // namespace sprintnet::sweep
