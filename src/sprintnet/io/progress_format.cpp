#include "sprintnet/io/progress_format.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace sprintnet {

double unsigned_nan(double v) { return std::isnan(v) ? std::fabs(v) : v; }

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

std::string format_progress_line(const ProgressSnapshot& s, bool with_bar) {
  const std::string position =
      with_bar ? fmt::format("{} {}/{}",
                             format_bar(static_cast<double>(s.step_in_epoch) / static_cast<double>(s.steps_per_epoch),
                                        kProgressBarWidthChars),
                             s.step_in_epoch, s.steps_per_epoch)
               : fmt::format("step {}/{}", s.step_in_epoch, s.steps_per_epoch);
  return fmt::format("epoch {}/{} {} loss {:.4f} {} samples/s ETA {}", s.epoch, s.epochs, position, unsigned_nan(s.loss),
                     format_si(s.samples_per_s), s.eta_s ? format_duration(*s.eta_s) : "--:--");
}

}  // namespace sprintnet
