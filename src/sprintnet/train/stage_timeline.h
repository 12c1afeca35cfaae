#pragma once
// The rows kernel's timeline profile (SPRINTNET_FUSED_PROFILE=1 with SPRINTNET_FUSED_PROFILE_BLOCK=all):
// every block stamps the global time at the end of each of its stages into its own region of the
// clock buffer, and this reads them against one clock. A step's stamps of one block say how long its
// stages took; only all blocks' stamps together say which block the others wait for at each exchange
// (docs/FUSED.md, "v15").
#include <cstdint>
#include <string>
#include <vector>

namespace sprintnet::train {

struct StageTimeline {
  int blocks = 0, stamps_per_step = 0;
  std::int64_t steps = 0;  // steps averaged (every step but the first)
  // offset[b][k]: mean time of block b's stamp k of a step after the previous step's last arrival (the
  // latest of every block's last stamp of that step), in microseconds.
  std::vector<std::vector<double>> offset;
  // last[b][k]: the steps in which block b stamped k last of all blocks.
  std::vector<std::vector<std::int64_t>> last;
};

// `clock`: `blocks` regions of `region` stamps each, every region [start, after the first gather,
// then `steps` x stamps_per_step]; zeros past what a block wrote. Fails (std::invalid_argument) when
// the blocks wrote different numbers of stamps or too few for `steps`.
StageTimeline read_stage_timeline(const std::vector<std::int64_t>& clock, int blocks, std::int64_t region,
                                  std::int64_t steps);

// The table, one line a block: each stamp's offset, and a star where that block was last in over half
// the steps.
std::string format_stage_timeline(const StageTimeline& timeline);

}  // namespace sprintnet::train
