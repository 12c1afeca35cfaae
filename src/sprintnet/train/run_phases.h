#pragma once
// Where a run's wall time goes: named phases (device start-up, data, model and plan, training,
// evaluation, writes), printed by `sprintnet train -v` and recorded in <run>/phases.json. A phase
// that ran on another thread beside the main one is marked `overlapped`: it is not part of the
// main thread's sum, only its wait for it is. Each phase also records when it first began and last
// ended on the process's clock, so the runs of a sweep (one process) can be laid on one timeline
// (bench/sweep_timeline).
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace sprintnet::train {

struct Phase {
  std::string name;
  double seconds = 0.0;
  bool overlapped = false;  // ran on a helper thread beside the main thread's phases
  double first_start_s = 0.0, last_end_s = 0.0;  // process_clock_s() when it first began and last ended
};

class RunPhases {
 public:
  // Adds `seconds`, ending now, to the phase `name` (created at the end on first use, so the order is
  // the first use's).
  void add(std::string_view name, double seconds, bool overlapped = false);
  // The same, for a phase that ran from `start_s` to `end_s` on the process clock (another thread's).
  void add_span(std::string_view name, double start_s, double end_s, bool overlapped);
  // Adds a phase of `seconds` ending at `end_s` on the process clock, before all others.
  void add_first(std::string_view name, double seconds, double end_s);
  const std::vector<Phase>& phases() const { return phases_; }
  // The main thread's phases summed (overlapped ones excluded).
  double serial_seconds() const;
  // A table, one phase a line, with `wall_s` and what no phase accounts for.
  std::string format(double wall_s) const;
  // {"wall_s": ..., "phases": [{"name": ..., "seconds": ..., "overlapped": ..., "start_s": ..., "end_s": ...}, ...]}
  std::string to_json(double wall_s) const;

 private:
  // Adds `seconds` to the phase `name`, which ran from `start_s` to `end_s` this time.
  void record(std::string_view name, double seconds, double start_s, double end_s, bool overlapped);
  std::vector<Phase> phases_;
};

// Times one scope into a phase of `phases`.
class ScopedPhase {
 public:
  ScopedPhase(RunPhases& phases, std::string_view name) : phases_(phases), name_(name) {}
  ~ScopedPhase() { phases_.add(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()); }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  RunPhases& phases_;
  std::string name_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Seconds on a clock shared by every run of this process (steady; zero when the library was loaded).
double process_clock_s();
// The same clock's reading at `t`.
double process_clock_at(std::chrono::steady_clock::time_point t);

// Seconds since this process started (from /proc/self/stat, 10 ms resolution), or 0 where unknown:
// the exec, dynamic linking, static constructors and argument parsing before the trainer starts.
double process_age_s();

}  // namespace sprintnet::train
