#include "sprintnet/sweep/sweep_runner.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <cmath>
#include <exception>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <thread>

#include <fmt/ranges.h>

#include "sprintnet/core/error.h"
#include "sprintnet/core/stop_request.h"
#include "sprintnet/data/dataset_cache.h"
#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/config.h"
#include "sprintnet/io/config_schema.h"
#include "sprintnet/io/metrics_writer.h"
#include "sprintnet/ops/backend.h"
#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/sweep/sweep_spec.h"
#include "sprintnet/sweep/worker_plan.h"
#include "sprintnet/train/checkpoint.h"
#include "sprintnet/train/out_of_memory_advice.h"
#include "sprintnet/train/resume.h"
#include "sprintnet/train/run_directory.h"
#include "sprintnet/train/sm_turns.h"
#include "sprintnet/train/trainer.h"

namespace sprintnet::sweep {
namespace {

// A run's epochs over all its attempts, from its metrics file's rows: how many, the best test accuracy, the
// training time. Without rows (or without an evaluation in them) those stay not known (NaN).
void add_metrics_totals(const std::vector<MetricsRow>& rows, RunResult& result) {
  result.epochs = static_cast<std::int64_t>(rows.size());
  if (rows.empty()) return;
  result.train_s = 0.0;
  for (const MetricsRow& row : rows) {
    if (row.test_accuracy) {
      result.best_accuracy =
          std::isnan(result.best_accuracy) ? *row.test_accuracy : std::max(result.best_accuracy, *row.test_accuracy);
    }
    result.train_s += row.epoch_time_s;
  }
}

// The overrides of `run`'s config: `placement`, the worker's device and thread overrides, before the run's own (a
// grid over device.name wins).
std::vector<std::string> run_overrides(const SweepOptions& o, const SweepRun& run,
                                       const std::vector<std::string>& placement) {
  // A killed run starts over when the sweep resumes, so its checkpoints before the last would never be read: only
  // the last is written (and the one of an epoch a signal stopped), unless --set asks for more. (The keys set here
  // for every run are left out of the resume's config check: sweep_spec.cpp.)
  std::vector<std::string> overrides = {"checkpoint.every_epochs=0"};
  overrides.insert(overrides.end(), o.overrides.begin(), o.overrides.end());
  overrides.insert(overrides.end(), placement.begin(), placement.end());
  overrides.insert(overrides.end(), run.overrides.begin(), run.overrides.end());
  return overrides;
}

// Where the sweep puts `run`: set, not written as TOML text, so a folder with a quote or a backslash in its name
// stays that folder.
void place_in_sweep(Config& config, const SweepOptions& o, const SweepRun& run) {
  config.output.dir = o.out_dir.string();
  config.output.name = run.name;
  config.output.progress = "none";
}

// "optim.lr (0.1 in the folder, 0.2 for this run)" for each key in which the config of a run folder is not the
// config the sweep gives the run: none for the sweep's own attempt. Keys in which two attempts at one run may
// differ (the device and threads of the worker that trained it: train::resumable_config_keys) are not compared,
// but for train.epochs.
std::vector<std::string> foreign_keys(const Config& folder, const Config& wanted) {
  const std::span<const std::string_view> may_differ = train::resumable_config_keys();
  std::vector<std::string> out;
  for (const ConfigDifference& d : config_differences(folder, wanted)) {
    const bool attempts_differ = std::find(may_differ.begin(), may_differ.end(), d.key) != may_differ.end();
    if (attempts_differ && d.key != "train.epochs") continue;
    out.push_back(fmt::format("{} ({} in the folder, {} for this run)", d.key, format_toml_value(d.before),
                              format_toml_value(d.after)));
  }
  return out;
}

// The names a run writes into its folder (train/trainer.cpp, io/metrics_writer.cpp, train/checkpoint.cpp).
bool is_run_file_name(const std::string& name) {
  static const std::set<std::string> kNames = {"config.toml", "metrics.jsonl", "metrics.csv", "phases.json",
                                               std::string(train::kCheckpointsDirName)};
  return kNames.contains(name) || name.starts_with("events.out.tfevents.");
}

// Where an attempt at a run starts: its folder absent (or removed), a stopped attempt to continue, or a folder the
// sweep leaves as it is (`kept`: why, the run's error).
struct AttemptStart {
  std::optional<train::ResumePlan> resume;
  std::string kept;
};

// What `run_dir` holds decides it. A stopped attempt (Ctrl-C, core/stop_request.h) wrote the checkpoint of its last
// epoch: the run continues from it on this worker's device and threads (keys a resume may change), when it trains
// the sweep's config for the run, train.epochs included. The folder is removed, and the run starts over, only when
// it is this sweep's own unfinished attempt with nothing to continue from (a killed run: a sweep's runs write only
// their last checkpoint; a diverged one): no checkpoint, no final weights, and its config.toml the sweep's for the
// run. Anything else is someone's work, not the sweep's to delete: a run `sprintnet train --resume` trained to
// another train.epochs, final weights or a checkpoint the sweep can neither count nor continue, files the sweep
// did not write.
AttemptStart start_attempt(const std::filesystem::path& run_dir, const Config& wanted,
                           const std::vector<std::string>& placement) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(run_dir, ec);
  if (!fs::exists(status)) return {};
  const std::int64_t epochs = wanted.train.epochs;
  const auto keep = [&](const std::string& what) {
    return AttemptStart{std::nullopt,
                        fmt::format("{} {}; the sweep leaves it as it is and records this run as failed: to train the "
                                    "run as the sweep gives it ({} epochs), move the folder aside and resume the sweep",
                                    run_dir.string(), what, epochs)};
  };
  if (!fs::is_directory(status)) return keep("is there but is not a folder");
  const bool checkpointed = fs::is_regular_file(run_dir / train::kCheckpointsDirName / train::kLatestFileName, ec);
  std::optional<train::ResumePlan> plan;
  std::string no_plan;
  if (checkpointed) {
    try {
      plan = train::plan_resume(run_dir, {}, placement);
    } catch (const Error& e) {  // a finished run, another process's, damaged files
      no_plan = e.what();
    }
  }
  if (plan && plan->config.train.epochs != epochs) {
    return keep(fmt::format("holds a run of train.epochs = {} stopped after epoch {}, not this sweep's {} (`sprintnet "
                            "train --resume` gave it other epochs, or it is not the sweep's)",
                            plan->config.train.epochs, plan->checkpoint.epoch, epochs));
  }
  if (plan) {
    const std::vector<std::string> keys = foreign_keys(plan->config, wanted);
    if (keys.empty()) return {std::move(plan), ""};
    return keep(fmt::format("holds a stopped run of another config than this sweep's: {}", fmt::join(keys, ", ")));
  }
  if (fs::is_empty(run_dir, ec) && !ec) {  // (a kill before the run's first file)
    fs::remove(run_dir, ec);
    SN_CHECK(!ec, "cannot remove the empty folder {} of an unfinished attempt: {}", run_dir.string(), ec.message());
    return {};
  }
  std::optional<Config> folder;
  std::string no_config;
  try {
    folder = load_config(run_dir / "config.toml");
  } catch (const Error& e) {
    no_config = e.what();
  }
  if (folder && folder->train.epochs != epochs) {
    return keep(fmt::format("holds a run of train.epochs = {} (its config.toml), not this sweep's {} (`sprintnet "
                            "train --resume` trained it on, or it is not the sweep's)", folder->train.epochs, epochs));
  }
  if (fs::exists(run_dir / "model.safetensors", ec)) {  // (a finished run of these epochs, its metrics damaged)
    return keep(fmt::format("holds final weights (model.safetensors) that the sweep cannot count as this run's: a "
                            "finished run also has a metrics row for each of its {} epochs, the last with a finite "
                            "test loss", epochs));
  }
  if (checkpointed) return keep(fmt::format("holds a checkpoint the sweep cannot continue from ({})", no_plan));
  if (!folder) return keep(fmt::format("holds files but no config.toml of a run ({})", no_config));
  if (const std::vector<std::string> keys = foreign_keys(*folder, wanted); !keys.empty()) {
    return keep(fmt::format("holds a run of another config than this sweep's: {}", fmt::join(keys, ", ")));
  }
  // Only what a run writes (a failed run's own files): a note or a picture put there by hand stays, and the run
  // with it.
  std::vector<std::string> foreign;
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!is_run_file_name(name)) foreign.push_back(name);
  }
  SN_CHECK(!ec, "cannot list {}: {}", run_dir.string(), ec.message());
  if (!foreign.empty()) {
    std::sort(foreign.begin(), foreign.end());
    return keep(fmt::format("holds files a run does not write ({})", fmt::join(foreign, ", ")));
  }
  const train::RunDirectoryLock no_writer(run_dir);  // (throws, naming the folder, while another process writes it)
  fs::remove_all(run_dir, ec);  // this sweep's unfinished attempt: it starts over
  SN_CHECK(!ec, "cannot remove the unfinished attempt {}: {}", run_dir.string(), ec.message());
  return {};
}

RunResult train_one(const SweepOptions& o, const SweepRun& run, const std::vector<std::string>& placement,
                    train::SmTurns* turns) {
  RunResult result;
  result.name = run.name;
  result.point = run.point;
  result.overrides = run.overrides;
  const auto start = std::chrono::steady_clock::now();
  const auto wall_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const std::filesystem::path run_dir = o.out_dir / run.name;
  try {
    Config config = load_config(o.config_path, run_overrides(o, run, placement));
    place_in_sweep(config, o, run);
    AttemptStart attempt = start_attempt(run_dir, config, placement);
    if (!attempt.kept.empty()) {  // (its metrics are not this run's: none are read)
      result.status = "failed";
      result.error = attempt.kept;
      result.wall_s = wall_s();
      return result;
    }
    std::optional<train::ResumePlan>& resume = attempt.resume;
    if (resume) {
      place_in_sweep(resume->config, o, run);
      config = resume->config;
    }
    const train::TrainSummary summary =
        train::advise_on_out_of_memory(o.config_path, config, train::MemoryUse::kSweepRun, [&] {
          std::unique_ptr<train::Trainer> trainer =
              resume ? std::make_unique<train::Trainer>(*resume) : std::make_unique<train::Trainer>(config);
          trainer->set_quiet(true);
          trainer->take_turns(turns);
          return trainer->fit();
        });
    // Stopped short by a signal: not finished; the sweep's resume continues it from the checkpoint of its stop.
    result.status = summary.stop_signal ? "stopped" : "done";
    result.final_accuracy = summary.final_test.accuracy;
    result.final_loss = summary.final_test.loss;
    add_metrics_totals(read_metrics_jsonl(run_dir / "metrics.jsonl"), result);  // (throws naming a damaged file)
  } catch (const std::exception& e) {
    result.status = "failed";
    result.error = e.what();
    result.final_accuracy = result.final_loss = std::numeric_limits<double>::quiet_NaN();  // (not a result)
    // A run that diverged trained up to the epoch that failed, whose metrics rows say how many (none: 0), its best
    // test accuracy and its training time.
    try {
      add_metrics_totals(read_metrics_jsonl(run_dir / "metrics.jsonl"), result);
    } catch (const std::exception&) {  // (no readable metrics: no epoch; a file system error must not stop the sweep)
    }
  }
  result.wall_s = wall_s();
  return result;
}

// The runs' results as they finish, shared by the workers: the state file and the summary always
// hold every finished run in grid order, so a sweep killed at any moment resumes from them.
class Ledger {
 public:
  Ledger(const SweepOptions& o, std::size_t total, std::string workers, const RunCallback& on_run)
      : o_(o), slots_(total), on_run_(on_run), start_(std::chrono::steady_clock::now()) {
    progress_.total = total;
    progress_.workers = std::move(workers);
  }

  // The next run to train, or nullopt when none is left or the sweep stops.
  std::optional<std::size_t> take() {
    std::lock_guard lock(mutex_);
    stopped_ = stopped_ || stop_requested().has_value();  // Ctrl-C: no run starts after it
    while (!stopped_ && next_ < slots_.size() && slots_[next_]) ++next_;  // finished in an earlier attempt
    if (stopped_ || next_ == slots_.size()) return std::nullopt;
    ++progress_.running;
    return next_++;
  }

  // A run that finished in an earlier attempt (in the state file read on resume, its files there):
  // counted, not reported again.
  void record_earlier(std::size_t index, RunResult result) {
    std::lock_guard lock(mutex_);
    progress_.finished += 1;
    progress_.finished_earlier += 1;
    slots_[index] = std::move(result);
  }

  // A run trained now: the state file and the summary are rewritten, then it is reported.
  void record(std::size_t index, RunResult result) {
    std::lock_guard lock(mutex_);
    --progress_.running;
    // A run a signal stopped is not finished (the resume continues it); one that finished while the sweep was
    // stopping is recorded all the same. After an error (the callback's, a device's) nothing more is recorded.
    stopped_ = stopped_ || result.status == "stopped";
    if (result.status == "stopped" || error_) return;
    progress_.finished += 1;
    progress_.failed += result.status == "failed" ? 1 : 0;
    slots_[index] = std::move(result);
    write_files();
    if (!on_run_) return;
    progress_.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    try {
      on_run_(*slots_[index], progress_);
    } catch (...) {
      stop(std::current_exception());
    }
  }

  // Stops the sweep: no run starts after this; the first error is the one rethrown.
  void stop(std::exception_ptr error) {
    if (!error_) error_ = std::move(error);
    stopped_ = true;
  }
  void stop_locked(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    stop(std::move(error));
  }
  std::exception_ptr error() const { return error_; }

  SweepProgress progress() {
    std::lock_guard lock(mutex_);
    SweepProgress now = progress_;
    now.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    return now;
  }

  // sweep.json, then summary.csv/.md, from every finished run: also at the end of a sweep, so that a
  // process killed between the two writes (or a resume with nothing left to train) leaves them agreeing.
  void write_files() const {
    const std::vector<RunResult> finished = results();
    write_state(o_.out_dir, finished);
    write_summary(o_.out_dir, finished);
  }

  std::vector<RunResult> results() const {
    std::vector<RunResult> out;
    for (const std::optional<RunResult>& r : slots_) {
      if (r) out.push_back(*r);
    }
    return out;
  }

 private:
  const SweepOptions& o_;
  std::vector<std::optional<RunResult>> slots_;
  const RunCallback& on_run_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  SweepProgress progress_;
  std::size_t next_ = 0;
  bool stopped_ = false;
  std::exception_ptr error_;
};

// One worker thread: its own stream on its GPU when other workers share it (so its runs overlap
// theirs; alone on it, the runs train as `sprintnet train` would, the split kernel included), then
// runs until none is left.
void work(const SweepOptions& o, const std::vector<SweepRun>& runs, const std::string& device, bool shares_device,
          std::int64_t cpu_threads, Ledger& ledger, train::SmTurns& turns) {
  try {
    const Device d = parse_device(device);
    std::unique_ptr<ThreadStream> stream = d.is_cuda() && shares_device ? open_thread_stream(d.index) : nullptr;
    std::vector<std::string> placement = {fmt::format("device.name=\"{}\"", device)};
    if (cpu_threads > 0) placement.push_back(fmt::format("device.threads={}", cpu_threads));
    while (const std::optional<std::size_t> index = ledger.take()) {
      ledger.record(*index, train_one(o, runs[*index], placement, shares_device ? &turns : nullptr));
    }
  } catch (...) {
    ledger.stop_locked(std::current_exception());  // the device itself failed: nothing more can train
  }
}

// `run`'s result read from its folder when the folder shows it finished: its final weights written, one metrics row
// for each epoch the sweep gives it, the last with a finite test loss. A run is finished by what its folder holds,
// not by the state file: one that `sprintnet train --resume` finished after the sweep stopped, or whose record a
// kill cut off, counts as finished (its results taken from there) instead of training again from the start.
std::optional<RunResult> finished_in_folder(const SweepOptions& o, const SweepRun& run) {
  const std::filesystem::path dir = o.out_dir / run.name;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(dir / "model.safetensors", ec)) return std::nullopt;
  RunResult result;
  result.name = run.name;
  result.point = run.point;
  result.overrides = run.overrides;
  result.status = "done";
  result.wall_s = std::numeric_limits<double>::quiet_NaN();  // (not known: not trained by this sweep's process)
  try {
    const std::int64_t epochs = load_config(o.config_path, run_overrides(o, run, {})).train.epochs;
    const std::vector<MetricsRow> rows = read_metrics_jsonl(dir / "metrics.jsonl");
    if (rows.empty() || static_cast<std::int64_t>(rows.size()) != epochs || rows.back().epoch != epochs ||
        !rows.back().test_loss || !std::isfinite(*rows.back().test_loss) || !rows.back().test_accuracy) {
      return std::nullopt;
    }
    result.final_loss = *rows.back().test_loss;
    result.final_accuracy = *rows.back().test_accuracy;
    add_metrics_totals(rows, result);
  } catch (const std::exception&) {  // (damaged or missing metrics: not finished; its attempt starts over)
    return std::nullopt;
  }
  return result;
}

// How many epochs the metrics file in `dir` records (-1 when it cannot be read).
std::int64_t epochs_in_folder(const std::filesystem::path& dir) {
  try {
    return static_cast<std::int64_t>(check_metrics_jsonl(dir / "metrics.jsonl"));
  } catch (const std::exception&) {
    return -1;
  }
}

// The result of `run` if an earlier attempt (or `sprintnet train --resume`) finished it: its done record while the
// run's folder holds what it wrote (its weights, and metrics of the record's epochs), else what its folder shows
// (finished_in_folder). A run whose folder was deleted or emptied since, or whose test loss was not finite (a record
// written before such runs failed), trains again; one that `train --resume` took on to more epochs after the sweep
// recorded it is no longer the record's run: the record's numbers are not in its folder any more, and the attempt
// leaves the folder as it is and names what it holds (start_attempt).
std::optional<RunResult> finished_earlier(const SweepOptions& o, const std::vector<RunResult>& previous,
                                          const SweepRun& run) {
  const auto done = std::find_if(previous.begin(), previous.end(), [&](const RunResult& r) {
    return r.name == run.name && r.status == "done" && std::isfinite(r.final_loss);
  });
  std::error_code ec;
  const std::filesystem::path dir = o.out_dir / run.name;
  const bool kept = std::filesystem::is_regular_file(dir / "model.safetensors", ec) &&
                    std::filesystem::file_size(dir / "metrics.jsonl", ec) > 0 && !ec;
  if (done != previous.end() && kept && epochs_in_folder(dir) == done->epochs) return *done;
  return finished_in_folder(o, run);
}

WorkerPlan plan_for(const SweepOptions& o, std::size_t runs) {
  // The thread count the sweep began with decides how many CPU runs fit, and is the one each run gets.
  std::vector<std::string> overrides = o.overrides;
  if (o.cpu_threads > 0) overrides.push_back(fmt::format("device.threads={}", o.cpu_threads));
  // The cores the CPU runs share: those the process may run on (a job's cpuset), not OMP_NUM_THREADS, which
  // clusters often set to 1 for the processes they start, each its own.
  return plan_workers(load_config(o.config_path, overrides), runs, o.parallel, cuda_device_count(), usable_cores(),
                      available_host_memory());
}

// The device.threads every CPU run of a new sweep trains with: the plan's share of the cores, else the config's,
// else (0) the default it stands for here (OMP_NUM_THREADS, or the cores), resolved now so that a resume on a
// machine with other cores trains with the same count. 0 for a sweep on GPUs.
std::int64_t decided_cpu_threads(const SweepOptions& o, const WorkerPlan& plan) {
  if (plan.devices.empty() || plan.devices.front() != "cpu") return 0;
  if (plan.cpu_threads > 0) return plan.cpu_threads;
  const std::int64_t configured = load_config(o.config_path, o.overrides).device.threads;
  return configured > 0 ? configured : default_cpu_threads();
}

std::vector<RunResult> execute(const SweepOptions& o, const std::vector<RunResult>& previous, const RunCallback& on_run,
                               const StartCallback& on_start) {
  const std::vector<SweepRun> runs = expand(o.spec);
  const Config base = load_config(o.config_path, o.overrides);
  std::vector<std::optional<RunResult>> earlier(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) earlier[i] = finished_earlier(o, previous, runs[i]);
  const auto record_earlier = [&](Ledger& ledger) {
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (earlier[i]) ledger.record_earlier(i, *earlier[i]);
    }
  };
  // Workers for the runs left.
  const auto left = static_cast<std::size_t>(std::count(earlier.begin(), earlier.end(), std::nullopt));
  if (left == 0) {  // a finished sweep resumed: nothing to set up, its files rewritten from the records
    Ledger ledger(o, runs.size(), "", on_run);
    record_earlier(ledger);
    ledger.write_files();
    return ledger.results();
  }
  const WorkerPlan plan = plan_for(o, left);
  // The data set loads while the workers start their devices (the runs then share this one copy).
  std::future<void> data = std::async(std::launch::async, [&base] {
    try {
      load_train_test_cached(base.data, base.model.classes);
    } catch (const std::exception&) {
      // The runs report it, each as its own failure.
    }
  });
  Ledger ledger(o, runs.size(), plan.reason, on_run);
  record_earlier(ledger);
  if (on_start) on_start(ledger.progress());  // before the first run, which may take long
  const auto shares = [&](const std::string& device) {
    return std::count(plan.devices.begin(), plan.devices.end(), device) > 1;
  };
  train::SmTurns turns;  // the workers sharing a GPU take turns for its SMs (train/sm_turns.h)
  const std::int64_t threads = o.cpu_threads > 0 ? o.cpu_threads : plan.cpu_threads;  // (0: a spec from before)
  if (plan.devices.size() == 1) {
    work(o, runs, plan.devices.front(), false, threads, ledger, turns);  // in this thread: one run at a time
  } else {
    std::vector<std::jthread> workers;
    for (const std::string& device : plan.devices) {
      workers.emplace_back([&, device] { work(o, runs, device, shares(device), threads, ledger, turns); });
    }
  }
  if (ledger.error()) std::rethrow_exception(ledger.error());
  ledger.write_files();
  return ledger.results();
}

}  // namespace

std::vector<RunResult> run_sweep(const SweepOptions& given, const RunCallback& on_run, const StartCallback& on_start) {
  const std::vector<SweepRun> runs = expand(given.spec);
  validate(given.config_path, given.overrides, given.spec, runs);  // every key and value, before anything trains
  // And where they would train (a device that is not there), before the folder; on the CPU with how many threads.
  SweepOptions options = given;
  if (options.cpu_threads == 0) options.cpu_threads = decided_cpu_threads(options, plan_for(options, runs.size()));
  std::error_code ec;
  std::filesystem::create_directories(options.out_dir, ec);
  SN_CHECK(!ec, "--out {}: cannot create it: {}", options.out_dir.string(), ec.message());
  // Held for the whole sweep: a second process on this folder (another sweep given the same --out, a
  // resume of this one) is refused at once, and the checks below cannot race one.
  const train::RunDirectoryLock lock(options.out_dir);
  SN_CHECK(!has_sweep_spec(options.out_dir),
           "--out {} holds a sweep already: continue it with `sprintnet sweep --resume {}` or choose another folder",
           options.out_dir.string(), options.out_dir.string());
  SN_CHECK(std::filesystem::is_empty(options.out_dir, ec) && !ec,
           "--out {} holds other files and no sweep: a sweep writes its runs' folders and summary there, so give it "
           "a new or empty folder", options.out_dir.string());
  write_sweep_spec(options);
  return execute(options, {}, on_run, on_start);
}

std::vector<RunResult> resume_sweep(const std::filesystem::path& dir, int parallel, const RunCallback& on_run,
                                    const StartCallback& on_start) {
  SN_CHECK(std::filesystem::is_directory(dir), "{}: no sweep here (not a folder)", dir.string());
  const train::RunDirectoryLock lock(dir);
  // Before any unfinished run's folder is cleared for its new attempt: the state file could not be written after.
  SN_CHECK(::access(dir.c_str(), W_OK) == 0, "{}: cannot resume: the folder is not writable ({})", dir.string(),
           std::strerror(errno));
  remove_unfinished_atomic_writes(dir);  // a killed sweep's (under the lock: no writer is left)
  SweepOptions options = read_sweep_spec(dir);
  options.parallel = parallel;
  // A --set the runs never took, saved by a sweep started before such were refused: dropped (it changed no run),
  // with a word, since --resume takes no --set to take it back.
  std::vector<std::string> taken;
  for (const std::string& text : options.overrides) {
    if (const std::optional<std::string> why = set_not_taken_by_runs(text, options.spec)) {
      std::fprintf(stderr, "sprintnet: warning: %s: ignored, as it was when this sweep started (%s)\n", why->c_str(),
                   dir.string().c_str());
    } else {
      taken.push_back(text);
    }
  }
  options.overrides = std::move(taken);
  validate(options.config_path, options.overrides, options.spec, expand(options.spec));
  return execute(options, read_state(dir), on_run, on_start);
}

}  // namespace sprintnet::sweep
