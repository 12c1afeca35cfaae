#include "sprintnet/sweep/sweep_runner.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>

#include "sprintnet/core/error.h"
#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/config.h"
#include "sprintnet/train/trainer.h"

namespace sprintnet::sweep {
namespace {

constexpr const char* kSpecFile = "sweep-spec.json";

void write_spec(const SweepOptions& o) {
  nlohmann::json axes = nlohmann::json::array();
  for (const GridAxis& a : o.spec.axes) axes.push_back({{"key", a.key}, {"values", a.values}});
  const nlohmann::json spec = {{"config", std::filesystem::absolute(o.config_path).string()},
                               {"overrides", o.overrides},
                               {"axes", axes},
                               {"seeds", o.spec.seeds}};
  write_text_file_atomically(o.out_dir / kSpecFile, spec.dump(1) + "\n");
}

SweepOptions read_spec(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kSpecFile;
  SN_CHECK(std::filesystem::exists(path), "{}: no sweep here ({} is missing)", dir.string(), kSpecFile);
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  SweepOptions o;
  try {
    SN_CHECK(!j.is_discarded(), "not JSON");
    o.config_path = j.at("config").get<std::string>();
    o.overrides = j.at("overrides").get<std::vector<std::string>>();
    for (const auto& a : j.at("axes")) {
      o.spec.axes.push_back({a.at("key").get<std::string>(), a.at("values").get<std::vector<std::string>>()});
    }
    o.spec.seeds = j.at("seeds").get<std::vector<std::int64_t>>();
  } catch (const std::exception& e) {
    SN_FAIL("{}: malformed sweep spec: {}", path.string(), e.what());
  }
  o.out_dir = dir;
  return o;
}

RunResult train_one(const SweepOptions& o, const SweepRun& run) {
  RunResult result;
  result.name = run.name;
  result.point = run.point;
  result.overrides = run.overrides;
  const auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  std::filesystem::remove_all(o.out_dir / run.name, ec);  // an unfinished attempt starts over
  try {
    std::vector<std::string> overrides = o.overrides;
    overrides.insert(overrides.end(), run.overrides.begin(), run.overrides.end());
    overrides.push_back(fmt::format("output.dir=\"{}\"", o.out_dir.string()));
    overrides.push_back(fmt::format("output.name=\"{}\"", run.name));
    overrides.push_back("output.progress=\"none\"");
    train::Trainer trainer(load_config(o.config_path, overrides));
    trainer.set_quiet(true);
    const train::TrainSummary summary = trainer.fit();
    result.status = "done";
    result.final_accuracy = summary.final_test.accuracy;
    result.final_loss = summary.final_test.loss;
    result.train_s = summary.train_time_s;
    result.epochs = static_cast<std::int64_t>(summary.epochs.size());
    for (const train::EpochRecord& e : summary.epochs) {
      if (e.test_accuracy) result.best_accuracy = std::max(result.best_accuracy, *e.test_accuracy);
    }
  } catch (const std::exception& e) {
    result.status = "failed";
    result.error = e.what();
  }
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::vector<RunResult> execute(const SweepOptions& o, const std::vector<RunResult>& previous, const RunCallback& on_run) {
  const std::vector<SweepRun> runs = expand(o.spec);
  const auto start = std::chrono::steady_clock::now();
  std::vector<RunResult> results;
  std::size_t failed = 0;
  for (const SweepRun& run : runs) {
    const auto done = std::find_if(previous.begin(), previous.end(),
                                   [&](const RunResult& r) { return r.name == run.name && r.status == "done"; });
    RunResult result = done != previous.end() ? *done : train_one(o, run);
    failed += result.status == "failed" ? 1 : 0;
    results.push_back(result);
    write_state(o.out_dir, results);
    write_summary(o.out_dir, results);
    if (on_run) {
      on_run(result, results.size(), failed, runs.size(),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  return results;
}

}  // namespace

std::vector<RunResult> run_sweep(const SweepOptions& options, const RunCallback& on_run) {
  const std::vector<SweepRun> runs = expand(options.spec);
  validate(options.config_path, options.overrides, runs);  // every key and value, before anything trains
  std::error_code ec;
  std::filesystem::create_directories(options.out_dir, ec);
  SN_CHECK(!ec, "--out {}: cannot create it: {}", options.out_dir.string(), ec.message());
  SN_CHECK(!std::filesystem::exists(options.out_dir / kSpecFile),
           "--out {} holds a sweep already: continue it with `sprintnet sweep --resume {}` or choose another folder",
           options.out_dir.string(), options.out_dir.string());
  write_spec(options);
  return execute(options, {}, on_run);
}

std::vector<RunResult> resume_sweep(const std::filesystem::path& dir, const RunCallback& on_run) {
  const SweepOptions options = read_spec(dir);
  validate(options.config_path, options.overrides, expand(options.spec));
  return execute(options, read_state(dir), on_run);
}

}  // namespace sprintnet::sweep
