#pragma once
// Pictures of runs: train and test loss, test accuracy and learning rate against epochs, read from
// each run directory's metrics.jsonl and drawn by matplotlib (Debian: python3-matplotlib), run as a
// subprocess with the script passed on its command line. Several runs are overlaid, one colour each.
// Without python3 or matplotlib nothing is drawn and the message says how to get the picture.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace sprintnet::plot {

// The picture every `sprintnet train` run gets.
inline constexpr std::string_view kCurvesFileName = "curves.png";

struct PlotOutcome {
  bool drawn = false;
  std::string message;  // for the user: where the picture is, or how to get it
};

// Whether python3 can import matplotlib (a fast check: nothing is imported).
bool plotter_available();
// Draws `runs` into `output` (PNG, PDF or SVG by its extension) and waits. Throws naming the run when one has no
// metrics.jsonl or a row read_metrics_jsonl refuses, and with python's reason (its stderr's last lines) when
// matplotlib fails; a python that exits 0 without writing `output` is an error too, so a picture reported is one
// just written. Python writes no file: it passes the picture's bytes back through a pipe, and this process writes them
// (write_text_file_atomically): a file replaced whole (through its symbolic links), a FIFO or a device written into,
// a descriptor of this process (/dev/stdout) written where it stands; one that is a terminal is refused before
// anything is drawn. Nothing goes into $TMPDIR, and nothing is written once this process is killed.
PlotOutcome draw_curves(const std::vector<std::filesystem::path>& runs, const std::filesystem::path& output);
// Starts drawing <run_dir>/curves.png and returns at once (finding python and starting matplotlib
// take a second; the run does not wait for them): the message says where the picture will be and,
// should it not appear, how to get it. Nothing here fails the run: where no python3 can be found at
// all, or the run's metrics.jsonl holds no row or one that draw_curves refuses, nothing is drawn
// (drawn false) and the message is a warning naming what is missing.
PlotOutcome draw_run_curves_in_background(const std::filesystem::path& run_dir);

}  // namespace sprintnet::plot
