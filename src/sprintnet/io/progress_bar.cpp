#include "sprintnet/io/progress_bar.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>

#include "sprintnet/core/error.h"

namespace sprintnet {

ProgressMode resolve_progress_mode(std::string_view config_value, bool is_terminal) {
  if (config_value == "auto") return is_terminal ? ProgressMode::kBar : ProgressMode::kPlain;
  if (config_value == "bar") return ProgressMode::kBar;
  if (config_value == "plain") return ProgressMode::kPlain;
  if (config_value == "none") return ProgressMode::kNone;
  SN_FAIL("output.progress: '{}' is not one of: auto, bar, plain, none", config_value);
}

bool stderr_is_terminal() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDERR_FILENO) == 1 && !(term != nullptr && std::string_view(term) == "dumb");
}

int stderr_terminal_columns() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  const char* columns = std::getenv("COLUMNS");
  if (columns == nullptr) return 0;
  char* end = nullptr;
  const long value = std::strtol(columns, &end, 10);
  return end != columns && *end == '\0' && value > 0 && value <= 100000 ? static_cast<int>(value) : 0;
}

ProgressBar::ProgressBar(std::ostream& out, ProgressMode mode, std::int64_t steps_per_epoch, std::int64_t epochs,
                         Clock clock, Columns columns)
    : out_(out),
      mode_(mode),
      steps_per_epoch_(steps_per_epoch),
      epochs_(epochs),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })),
      columns_(columns ? std::move(columns) : Columns(stderr_terminal_columns)),
      start_(clock_()) {
  SN_CHECK(steps_per_epoch >= 1 && epochs >= 1,
           "progress bar: need at least one step and one epoch, got {} steps x {} epochs", steps_per_epoch, epochs);
}

std::optional<double> ProgressBar::eta_seconds(std::int64_t steps_done,
                                               std::chrono::steady_clock::time_point now) const {
  const std::int64_t timed_steps = steps_done - steps_before_start_.value_or(0);
  const double elapsed_s = std::chrono::duration<double>(now - start_).count();
  if (timed_steps <= 0 || elapsed_s <= 0.0) return std::nullopt;
  const std::int64_t remaining = steps_per_epoch_ * epochs_ - steps_done;
  return elapsed_s / static_cast<double>(timed_steps) * static_cast<double>(std::max<std::int64_t>(remaining, 0));
}

void ProgressBar::update(std::int64_t epoch, std::int64_t step_in_epoch, double loss, double samples_per_s) {
  if (mode_ == ProgressMode::kNone) return;
  const std::int64_t steps_done = (epoch - 1) * steps_per_epoch_ + step_in_epoch;
  // The first update tells which epoch this process started in; a resumed run
  // did the earlier epochs' steps in another process, outside our clock.
  if (!steps_before_start_) steps_before_start_ = (epoch - 1) * steps_per_epoch_;
  const auto now = clock_();
  latest_ = ProgressSnapshot{
      epoch, epochs_, step_in_epoch, steps_per_epoch_, loss, samples_per_s, eta_seconds(steps_done, now)};
  latest_drawn_ = false;
  if (mode_ == ProgressMode::kPlain) {
    // The end of an epoch reports its last step, which a log_every line may have shown just before.
    if (last_plain_line_ == std::pair{epoch, step_in_epoch}) return;
    last_plain_line_ = {epoch, step_in_epoch};
    out_ << format_progress_line(latest_, false) << '\n';
    out_.flush();
    latest_drawn_ = true;
    return;
  }
  const bool due = !last_draw_ || now - *last_draw_ >= kProgressRedrawInterval || step_in_epoch == steps_per_epoch_;
  if (due) {
    last_draw_ = now;
    draw_bar();
  }
}

void ProgressBar::draw_bar() {
  // "\r" returns to the line start; ESC[K clears what a longer previous line left behind. A line wider
  // than the terminal would wrap, and each redraw would then start a new line.
  out_ << '\r' << format_progress_line_to_fit(latest_, columns_()) << "\x1b[K";
  out_.flush();
  latest_drawn_ = true;
  bar_on_screen_ = true;
}

void ProgressBar::finish_epoch(std::string_view summary) {
  if (mode_ == ProgressMode::kBar && bar_on_screen_) {
    if (!latest_drawn_) draw_bar();
    out_ << '\n';
    bar_on_screen_ = false;
  }
  out_ << summary << '\n';
  out_.flush();
}

}  // namespace sprintnet
