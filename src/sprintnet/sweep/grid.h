#pragma once
// A sweep's grid: config keys and the values each takes (from `--grid KEY=V1,V2` or a TOML
// [sweep] table), times seeds, expanded into named runs. Every combination is checked against the
// config schema before anything trains, so a bad key or value fails the sweep at once, named.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sprintnet::sweep {

struct GridAxis {
  std::string key;
  std::vector<std::string> values;  // TOML value text, as `--set` takes it ("0.1", "[256, 256]", "\"gelu\"")
  std::string origin = "--grid";    // where it was given, for errors ("x.toml: sweep.grid")
};

struct SweepSpec {
  std::vector<GridAxis> axes;
  std::vector<std::int64_t> seeds;  // empty: the config's seed only
  std::string seeds_origin = "--seeds";
};

struct SweepRun {
  std::string name;                    // run folder: key=value pairs and the seed, e.g. "optim.lr=0.1,seed=0"
  std::string point;                   // the grid point without the seed (runs with equal points are averaged)
  std::vector<std::string> overrides;  // "key=value" for load_config, the seed's last
  std::vector<std::string> origins;    // where each override came from, one each (GridAxis::origin, seeds_origin)
};

// Why the runs never take `--set text` (a key the sweep sets for every run, output.*, or one the grid or the seeds
// give), or nullopt. validate() refuses such a --set; a resume drops it with a warning (sweeps started before
// 2026-11-30 could save one, and --resume takes no --set to take it back).
std::optional<std::string> set_not_taken_by_runs(const std::string& text, const SweepSpec& spec);

// "optim.lr=0.1,0.05" → {optim.lr, [0.1, 0.05]}; commas inside [] or quotes do not split.
GridAxis parse_grid_option(const std::string& text);
// "0,1,2" → {0, 1, 2}.
std::vector<std::int64_t> parse_seeds(const std::string& text);
// The [sweep] table of a config file (`grid = { "optim.lr" = [0.1, 0.05] }`, `seeds = [0, 1]`),
// empty when the file has none. Errors name the file and the key. The file is loaded as a config first, with the
// --set `overrides` every run takes (load_config): one that is missing, not a regular file, not TOML (named with
// the line and column) or not a valid config fails as it would for `sprintnet train`. A value keeps its TOML form
// (1.0 stays a float), so an integer key refuses it as --grid and --set do.
SweepSpec read_sweep_table(const std::filesystem::path& config_path, const std::vector<std::string>& overrides = {});
// The command line's `--grid` options and `--seeds` over the file's table: a --grid key replaces the table's key
// (given twice on the command line: an error), --seeds the table's seeds, and errors then name --seeds.
void apply_command_line(SweepSpec& spec, const std::vector<std::string>& grid_options,
                        const std::optional<std::string>& seeds);
// The keys the sweep sets for every run itself (sweep_runner.cpp) where a config file's value never reaches a
// run: checkpoint.every_epochs (before the overrides, which may set it) and output.dir/name/progress (after them:
// a grid or a --set of one of those is refused).
std::span<const std::string_view> keys_set_per_run();
// The most runs one sweep may have: its runs are listed (and their configs loaded) before anything trains, and a
// grid past this is a mistake (5 keys of 40 values are 102 400 000 runs) that would fill the host's memory.
inline constexpr std::uint64_t kMaxSweepRuns = 100'000;
// Every combination (the first axis varies slowest), each with every seed. Errors, naming the option: more than
// kMaxSweepRuns runs (counted before any is listed, naming each axis's count); two runs of one name (a value or seed
// listed twice) would write one folder; a grid over a key the sweep sets itself, or over `seed` when seeds are
// given too (they would override it); a run name longer than a folder name may be.
std::vector<SweepRun> expand(const SweepSpec& spec);
// Loads the config of every run (base file + extra overrides + the run's): the first bad key or
// value throws, naming it and where it was given (--set, --grid, --seeds or the [sweep] table), before
// any run starts. An `extra` (--set) key the runs would not take is refused, naming it and why: a key of the
// [sweep] table, one of `spec`'s grid keys or `seed` when it has seeds (their values win), and output.dir, .name
// and .progress (set for every run by the sweep).
void validate(const std::filesystem::path& config_path, const std::vector<std::string>& extra, const SweepSpec& spec,
              const std::vector<SweepRun>& runs);

}  // namespace sprintnet::sweep
