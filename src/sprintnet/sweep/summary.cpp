#include "sprintnet/sweep/summary.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>

#include "sprintnet/core/error.h"
#include "sprintnet/io/atomic_file.h"

namespace sprintnet::sweep {
namespace {

constexpr const char* kStateFile = "sweep.json";

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;  // a bare CR ends a row for CSV readers too
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string md_cell(std::string s) {
  std::replace(s.begin(), s.end(), '|', '/');
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

// A number with `decimals` (times `scale`: 100 for a percentage), or `unknown` for NaN (RunResult::kUnknown): an
// empty CSV field reads as missing (pandas: NaN), where a 0 would read as a result (a test loss of 0, the best).
std::string number(double value, int decimals, std::string_view unknown, double scale = 1.0) {
  return std::isnan(value) ? std::string(unknown) : fmt::format("{:.{}f}", scale * value, decimals);
}
std::string csv_number(double value, int decimals) { return number(value, decimals, ""); }
std::string md_number(double value, int decimals, double scale = 1.0) { return number(value, decimals, "—", scale); }

}  // namespace

std::vector<PointStats> point_statistics(const std::vector<RunResult>& results) {
  std::vector<PointStats> stats;
  std::map<std::string, std::vector<const RunResult*>> by_point;
  std::vector<std::string> order;
  for (const RunResult& r : results) {
    if (by_point.find(r.point) == by_point.end()) order.push_back(r.point);
    by_point[r.point].push_back(&r);
  }
  for (const std::string& point : order) {
    PointStats s;
    s.point = point;
    std::vector<const RunResult*> done;
    for (const RunResult* r : by_point[point]) {
      ++s.runs;
      if (r->status == "done") {
        done.push_back(r);
      } else {
        ++s.failed;
      }
    }
    if (!done.empty()) {
      const double n = static_cast<double>(done.size());
      for (const RunResult* r : done) {
        s.mean_accuracy += r->final_accuracy / n;
        s.mean_loss += r->final_loss / n;
        s.mean_train_s += r->train_s / n;
      }
      double squares = 0.0;
      for (const RunResult* r : done) squares += (r->final_accuracy - s.mean_accuracy) * (r->final_accuracy - s.mean_accuracy);
      if (done.size() > 1) s.std_accuracy = std::sqrt(squares / (n - 1.0));  // (one run: not known)
    }
    stats.push_back(s);
  }
  std::stable_sort(stats.begin(), stats.end(), [](const PointStats& a, const PointStats& b) {
    const bool a_any = a.runs > a.failed, b_any = b.runs > b.failed;
    if (a_any != b_any) return a_any;
    return a.mean_accuracy > b.mean_accuracy;
  });
  return stats;
}

void write_state(const std::filesystem::path& dir, const std::vector<RunResult>& results) {
  nlohmann::json runs = nlohmann::json::array();
  for (const RunResult& r : results) {
    runs.push_back({{"name", r.name}, {"point", r.point}, {"overrides", r.overrides}, {"status", r.status},
                    {"error", r.error}, {"final_test_accuracy", r.final_accuracy},
                    {"best_test_accuracy", r.best_accuracy}, {"final_test_loss", r.final_loss},
                    {"train_s", r.train_s}, {"wall_s", r.wall_s}, {"epochs", r.epochs}});
  }
  write_text_file_atomically(dir / kStateFile, nlohmann::json({{"runs", runs}}).dump(1) + "\n");
}

namespace {

// JSON has no NaN: nlohmann writes a NaN (a diverged run's test loss) as null, so null reads back as NaN, and
// a stopped sweep with such a run resumes.
double number_or_nan(const nlohmann::json& record, const char* key) {
  const nlohmann::json& value = record.at(key);
  return value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>();
}

}  // namespace

std::vector<RunResult> read_state(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kStateFile;
  std::vector<RunResult> results;
  if (!std::filesystem::exists(path)) return results;
  std::ifstream in(path);
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  SN_CHECK(!json.is_discarded() && json.contains("runs") && json["runs"].is_array(),
           "{}: not a sweep state file (expected {{\"runs\": [...]}})", path.string());
  try {
    for (const auto& r : json["runs"]) {
      RunResult out;
      out.name = r.at("name").get<std::string>();
      out.point = r.at("point").get<std::string>();
      out.overrides = r.at("overrides").get<std::vector<std::string>>();
      out.status = r.at("status").get<std::string>();
      out.error = r.at("error").get<std::string>();
      out.final_accuracy = number_or_nan(r, "final_test_accuracy");
      out.best_accuracy = number_or_nan(r, "best_test_accuracy");
      out.final_loss = number_or_nan(r, "final_test_loss");
      out.train_s = number_or_nan(r, "train_s");
      out.wall_s = number_or_nan(r, "wall_s");
      out.epochs = r.at("epochs").get<std::int64_t>();
      results.push_back(std::move(out));
    }
  } catch (const nlohmann::json::exception& e) {
    SN_FAIL("{}: a run record is malformed: {}", path.string(), e.what());
  }
  return results;
}

void write_summary(const std::filesystem::path& dir, const std::vector<RunResult>& results) {
  std::ostringstream csv;
  csv << "name,point,status,final_test_accuracy,best_test_accuracy,final_test_loss,epochs,train_s,wall_s,overrides,"
         "error\n";
  for (const RunResult& r : results) {
    std::string overrides;
    for (const std::string& o : r.overrides) overrides += (overrides.empty() ? "" : ";") + o;
    csv << fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(r.name), csv_field(r.point), r.status,
                       csv_number(r.final_accuracy, 6), csv_number(r.best_accuracy, 6), csv_number(r.final_loss, 6),
                       r.epochs, csv_number(r.train_s, 4), csv_number(r.wall_s, 4), csv_field(overrides),
                       csv_field(r.error));
  }
  write_text_file_atomically(dir / "summary.csv", csv.str());

  std::ostringstream md;
  const std::vector<PointStats> stats = point_statistics(results);
  md << "# Sweep summary\n\n## Grid points (mean ± standard deviation over seeds, best first)\n\n"
        "| point | runs | failed | test accuracy % | test loss | train s |\n|---|---|---|---|---|---|\n";
  for (const PointStats& s : stats) {
    if (s.runs == s.failed) {
      md << fmt::format("| {} | {} | {} | — | — | — |\n", md_cell(s.point), s.runs, s.failed);
    } else {
      md << fmt::format("| {} | {} | {} | {:.2f} ± {} | {:.4f} | {:.2f} |\n", md_cell(s.point), s.runs, s.failed,
                        100 * s.mean_accuracy, md_number(s.std_accuracy, 2, 100), s.mean_loss, s.mean_train_s);
    }
  }
  md << "\n## Runs\n\n| run | status | final test accuracy % | best % | test loss | epochs | train s | wall s |\n"
        "|---|---|---|---|---|---|---|---|\n";
  for (const RunResult& r : results) {
    const std::string status = r.status == "done" ? "done" : "failed: " + md_cell(r.error);
    md << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", md_cell(r.name), status,
                      md_number(r.final_accuracy, 2, 100), md_number(r.best_accuracy, 2, 100),
                      md_number(r.final_loss, 4), r.epochs, md_number(r.train_s, 2), md_number(r.wall_s, 2));
  }
  write_text_file_atomically(dir / "summary.md", md.str());
}

}  // namespace sprintnet::sweep
