#include "sprintnet/io/progress_format.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace sprintnet {

double unsigned_nan(double v) { return std::isnan(v) ? std::fabs(v) : v; }

std::string format_loss(double loss) {
  if (std::isfinite(loss) && std::fabs(loss) >= 1e6) return fmt::format("{:.4e}", loss);
  return fmt::format("{:.4f}", unsigned_nan(loss));
}

std::string format_si(double value) {
  if (!std::isfinite(value)) return fmt::format("{}", unsigned_nan(value));
  struct Unit {
    double scale;
    const char* suffix;
  };
  static constexpr Unit kUnits[] = {{1.0, ""}, {1e3, "k"}, {1e6, "M"}, {1e9, "G"}, {1e12, "T"}};
  constexpr std::size_t kLast = std::size(kUnits) - 1;
  for (std::size_t i = 0;; ++i) {
    const double scaled = std::abs(value) / kUnits[i].scale;
    // 999.5 would print as "1000": move to the next unit, where it prints as "1.00".
    if (scaled < 999.5 || i == kLast) {
      const int decimals = scaled >= 99.95 ? 0 : scaled >= 9.995 ? 1 : 2;
      return fmt::format("{}{:.{}f}{}", value < 0 ? "-" : "", scaled, decimals, kUnits[i].suffix);
    }
  }
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "--:--";
  const auto total = static_cast<std::int64_t>(std::llround(std::max(0.0, seconds)));
  const std::int64_t hours = total / 3600;
  const std::int64_t minutes = total % 3600 / 60;
  const std::int64_t secs = total % 60;
  if (hours > 0) return fmt::format("{}:{:02}:{:02}", hours, minutes, secs);
  return fmt::format("{}:{:02}", minutes, secs);
}

std::string counted(std::int64_t count, std::string_view noun, std::string_view plural) {
  if (count == 1) return fmt::format("1 {}", noun);
  return plural.empty() ? fmt::format("{} {}s", count, noun) : fmt::format("{} {}", count, plural);
}

std::string format_bar(double fraction, int width) {
  const double clamped = std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) : 0.0;
  const auto filled = static_cast<std::size_t>(std::floor(clamped * width));
  const auto total = static_cast<std::size_t>(std::max(width, 0));
  // Built by appending: GCC 12 misreports operator+ chains on strings (-Wrestrict) at -O3.
  std::string bar = "[";
  bar.append(filled, '#').append(total - filled, '.').append("]");
  return bar;
}

namespace {

// bar_width < 0: the plain form ("step 234/468"); 0: the bar's position without the bar.
std::string progress_line(const ProgressSnapshot& s, int bar_width, bool with_throughput) {
  std::string position;
  if (bar_width < 0) {
    position = fmt::format("step {}/{}", s.step_in_epoch, s.steps_per_epoch);
  } else {
    const double fraction = static_cast<double>(s.step_in_epoch) / static_cast<double>(s.steps_per_epoch);
    position = bar_width > 0 ? fmt::format("{} {}/{}", format_bar(fraction, bar_width), s.step_in_epoch,
                                           s.steps_per_epoch)
                             : fmt::format("{}/{}", s.step_in_epoch, s.steps_per_epoch);
  }
  const std::string throughput = with_throughput ? fmt::format(" {} samples/s", format_si(s.samples_per_s)) : "";
  return fmt::format("epoch {}/{} {} loss {}{} ETA {}", s.epoch, s.epochs, position, format_loss(s.loss),
                     throughput, s.eta_s ? format_duration(*s.eta_s) : "--:--");
}

}  // namespace

std::string format_progress_line(const ProgressSnapshot& s, bool with_bar) {
  return progress_line(s, with_bar ? kProgressBarWidthChars : -1, true);
}

std::string format_progress_line_to_fit(const ProgressSnapshot& s, int columns) {
  std::string line = progress_line(s, kProgressBarWidthChars, true);
  if (columns <= 0) return line;
  const auto room = static_cast<std::size_t>(columns - 1);
  if (line.size() <= room) return line;
  // Narrow the bar by what does not fit; a bar under 5 characters says too little to keep.
  const auto excess = static_cast<int>(line.size() - room);
  const int bar_width = kProgressBarWidthChars - excess >= 5 ? kProgressBarWidthChars - excess : 0;
  line = progress_line(s, bar_width, true);
  if (line.size() > room) line = progress_line(s, 0, false);
  if (line.size() > room) line.resize(room);
  return line;
}

}  // namespace sprintnet
