#pragma once
// Training progress on stderr: a bar redrawn in place on a terminal, one plain
// line per update elsewhere (logs, CI), or only the epoch summaries.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string_view>
#include <utility>

#include "sprintnet/io/progress_format.h"

namespace sprintnet {

enum class ProgressMode { kBar, kPlain, kNone };

// output.progress -> mode: "auto" is a bar on a terminal and plain lines otherwise.
ProgressMode resolve_progress_mode(std::string_view config_value, bool is_terminal);
// stderr is a terminal that understands "\r" and "ESC[K" (TERM is not "dumb").
bool stderr_is_terminal();
// The width of stderr's terminal in columns (asked again at each call: a window can be resized), else
// $COLUMNS, else 0 (unknown).
int stderr_terminal_columns();

// Bars are redrawn at most this often: terminals are slow, and steps can take microseconds.
inline constexpr std::chrono::milliseconds kProgressRedrawInterval{100};

class ProgressBar {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  using Columns = std::function<int()>;

  // The ETA is measured from construction, so construct it just before the first
  // epoch. `clock` and `columns` (the terminal's width, which the bar line is
  // fitted to) are for tests; by default std::chrono::steady_clock::now and
  // stderr_terminal_columns.
  ProgressBar(std::ostream& out, ProgressMode mode, std::int64_t steps_per_epoch, std::int64_t epochs,
              Clock clock = {}, Columns columns = {});
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // epoch and step_in_epoch are 1-based. Bar: redraws (throttled; the last step
  // of an epoch always draws). Plain: prints one line per call. None: nothing.
  void update(std::int64_t epoch, std::int64_t step_in_epoch, double loss, double samples_per_s);
  // Ends the bar line, then prints `summary` on a line of its own (in every mode).
  void finish_epoch(std::string_view summary);

 private:
  std::optional<double> eta_seconds(std::int64_t steps_done, std::chrono::steady_clock::time_point now) const;
  void draw_bar();

  std::ostream& out_;
  ProgressMode mode_;
  std::int64_t steps_per_epoch_;
  std::int64_t epochs_;
  Clock clock_;
  Columns columns_;
  std::chrono::steady_clock::time_point start_;
  std::optional<std::int64_t> steps_before_start_;  // steps done by an earlier process (a resumed run)
  std::optional<std::chrono::steady_clock::time_point> last_draw_;
  ProgressSnapshot latest_;
  bool latest_drawn_ = true;
  // Plain mode: the (epoch, step) of the last line, which the end of an epoch may report again.
  std::optional<std::pair<std::int64_t, std::int64_t>> last_plain_line_;
  bool bar_on_screen_ = false;  // the cursor is at the end of a bar line
};

}  // namespace sprintnet
