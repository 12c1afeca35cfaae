#pragma once
// The sweep's pictures, drawn by matplotlib (Debian: python3-matplotlib) from summary.csv and the
// runs' metrics.jsonl: test accuracy against each swept key (mean ± standard deviation over
// seeds), and the best runs' loss curves overlaid. The script is written into the sweep folder
// (plot_sweep.py) so the pictures can be redrawn; without python3 or matplotlib the sweep still
// succeeds and the returned line says how to get them.
#include <filesystem>
#include <string>

namespace sprintnet::sweep {

// Writes DIR/plot_sweep.py (python3 plot_sweep.py DIR draws the pictures) and returns its path.
std::filesystem::path write_plot_script(const std::filesystem::path& dir);
// Writes DIR/plot_sweep.py and starts it without waiting (starting python and matplotlib takes
// 1-2 s, more than a small sweep's training; `sprintnet train` draws its curves the same way);
// returns where the pictures will be and how to draw them should they not appear (a warning naming
// what is missing where no python3 can be found at all: the sweep still succeeds).
std::string plot_sweep_in_background(const std::filesystem::path& dir);

}  // namespace sprintnet::sweep
