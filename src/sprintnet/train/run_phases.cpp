#include "sprintnet/train/run_phases.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>
#include <string>

#include "sprintnet/io/read_file.h"

namespace sprintnet::train {
namespace {

const std::chrono::steady_clock::time_point process_clock_origin = std::chrono::steady_clock::now();

}  // namespace

double process_clock_at(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(t - process_clock_origin).count();
}

double process_clock_s() { return process_clock_at(std::chrono::steady_clock::now()); }

void RunPhases::record(std::string_view name, double seconds, double start_s, double end_s, bool overlapped) {
  const auto it = std::find_if(phases_.begin(), phases_.end(), [&](const Phase& p) { return p.name == name; });
  if (it != phases_.end()) {
    it->seconds += seconds;
    it->last_end_s = end_s;
    return;
  }
  phases_.push_back({std::string(name), seconds, overlapped, start_s, end_s});
}

void RunPhases::add(std::string_view name, double seconds, bool overlapped) {
  const double now = process_clock_s();
  record(name, seconds, now - seconds, now, overlapped);
}

void RunPhases::add_span(std::string_view name, double start_s, double end_s, bool overlapped) {
  record(name, end_s - start_s, start_s, end_s, overlapped);
}

void RunPhases::add_first(std::string_view name, double seconds, double end_s) {
  phases_.insert(phases_.begin(), Phase{std::string(name), seconds, false, end_s - seconds, end_s});
}

double RunPhases::serial_seconds() const {
  double sum = 0.0;
  for (const Phase& p : phases_) sum += p.overlapped ? 0.0 : p.seconds;
  return sum;
}

std::string RunPhases::format(double wall_s) const {
  std::string out = fmt::format("phases of the {:.3f} s wall time:\n", wall_s);
  for (const Phase& p : phases_) {
    out += fmt::format("  {:<50} {:8.3f} s{}\n", p.name, p.seconds, p.overlapped ? "  (on a helper thread, overlapped)" : "");
  }
  out += fmt::format("  {:<50} {:8.3f} s", "other (in no phase above)", std::max(0.0, wall_s - serial_seconds()));
  return out;
}

std::string RunPhases::to_json(double wall_s) const {
  std::string out = fmt::format("{{\"wall_s\": {:.6f}, \"phases\": [", wall_s);
  for (std::size_t i = 0; i < phases_.size(); ++i) {
    // Phase names are ours: no quotes or backslashes to escape.
    const Phase& p = phases_[i];
    out += fmt::format(
        "{}{{\"name\": \"{}\", \"seconds\": {:.6f}, \"overlapped\": {}, \"start_s\": {:.6f}, \"end_s\": {:.6f}}}",
        i ? ", " : "", p.name, p.seconds, p.overlapped, p.first_start_s, p.last_end_s);
  }
  return out + "]}\n";
}

double process_age_s() {
  const std::optional<std::string> stat = try_read_file("/proc/self/stat");  // not on every system
  if (!stat) return 0.0;
  const std::string& text = *stat;
  // Field 22 (starttime, clock ticks after boot) counts from after the command name, which may hold spaces.
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return 0.0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
  }
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  timespec now{};
  if (fields.fail() || ticks_per_s <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return 0.0;
  const double started = std::stod(field) / static_cast<double>(ticks_per_s);
  return std::max(0.0, static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec) - started);
}

}  // namespace sprintnet::train
