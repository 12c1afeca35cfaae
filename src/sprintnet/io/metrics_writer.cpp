#include "sprintnet/io/metrics_writer.h"

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sprintnet/core/error.h"
#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/progress_format.h"
#include "sprintnet/io/read_file.h"

namespace sprintnet {
namespace {

std::ofstream open_for_writing(const std::filesystem::path& path, bool append) {
  std::ofstream out(path, std::ios::out | (append ? std::ios::app : std::ios::trunc));
  SN_CHECK(out.is_open(), "cannot open metrics file '{}' for writing: {}", path.string(), std::strerror(errno));
  return out;
}

std::string csv_header() { return fmt::format("{}", fmt::join(kMetricsColumns, ",")); }

std::vector<std::string> read_lines(const std::filesystem::path& path) {
  std::vector<std::string> lines;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return lines;
  const std::string text = read_file(path, "metrics file");
  // Only newline-terminated lines are complete; text after the last newline is a row cut off by a kill.
  for (std::size_t begin = 0, end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1) {
    lines.push_back(text.substr(begin, end - begin));
  }
  return lines;
}

std::optional<std::int64_t> jsonl_row_epoch(const std::string& line) {
  const auto json = nlohmann::json::parse(line, nullptr, false);
  if (json.is_discarded() || !json.is_object() || !json.contains("epoch") || !json["epoch"].is_number_integer()) {
    return std::nullopt;
  }
  return json["epoch"].get<std::int64_t>();
}

std::optional<std::int64_t> csv_row_epoch(const std::string& line) {
  // "step,epoch,...": the second field.
  const auto first = line.find(',');
  if (first == std::string::npos) return std::nullopt;
  const auto second = line.find(',', first + 1);
  if (second == std::string::npos) return std::nullopt;
  std::int64_t epoch = 0;
  const char* begin = line.data() + first + 1;
  const char* end = line.data() + second;
  const auto [ptr, ec] = std::from_chars(begin, end, epoch);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return epoch;
}

// What a resume keeps of a metrics file: its text, and the epochs of its rows.
struct KeptRows {
  std::string text;
  std::set<std::int64_t> epochs;
};

// `path`'s text with its rows up to epoch `last_epoch` (rows are in epoch order, so the first later row
// ends what is kept); the first `header_lines` lines are kept as they are. A complete line that is not a
// row is an error naming it, before anything is rewritten: dropping it and every row after it would lose
// the run's history without a word. (A cut-off last line, a killed write, is not a line: read_lines.)
template <typename EpochOf>
KeptRows rows_up_to(const std::filesystem::path& path, std::size_t header_lines, std::int64_t last_epoch,
                    EpochOf epoch_of) {
  const std::vector<std::string> lines = read_lines(path);
  KeptRows kept;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i >= header_lines) {
      const std::optional<std::int64_t> epoch = epoch_of(lines[i]);
      SN_CHECK(epoch.has_value(), "cannot resume: metrics file '{}' line {} is not a metrics row ('{}'); mend or "
               "delete that line", path.string(), i + 1, lines[i].substr(0, 80));
      if (*epoch > last_epoch) break;
      kept.epochs.insert(*epoch);
    }
    kept.text += lines[i];
    kept.text += '\n';
  }
  return kept;
}

// Which of epochs 1..last_epoch have no row among `present` (the epochs of the rows a resume kept of `path`), said
// for a warning.
std::optional<std::string> missing_epochs(const std::filesystem::path& path, const std::set<std::int64_t>& present,
                                          std::int64_t last_epoch) {
  std::int64_t missing = 0, first = 0;
  for (std::int64_t e = 1; e <= last_epoch; ++e) {
    if (present.contains(e)) continue;
    if (missing++ == 0) first = e;
  }
  if (missing == 0) return std::nullopt;
  return fmt::format("{} has no row for {} of the {} epochs before the checkpoint (the first: epoch {}; was it deleted "
                     "or cut?): the resumed run appends its own rows, and its metrics and curves lack those epochs",
                     path.string(), missing, last_epoch, first);
}

void flush_checked(std::ofstream& out, const std::filesystem::path& path) {
  out.flush();
  SN_CHECK(out.good(), "cannot write metrics file '{}': {}", path.string(), std::strerror(errno));
}

// The row's values in kMetricsColumns order; an empty optional is a missing value.
using Field = std::variant<std::int64_t, std::optional<double>>;
std::array<Field, std::size(kMetricsColumns)> fields_of(const MetricsRow& row) {
  using Number = std::optional<double>;
  return {row.step,
          row.epoch,
          Number(row.train_loss),
          row.test_loss,
          row.test_accuracy,
          Number(row.epoch_time_s),
          Number(row.samples_per_s),
          Number(row.lr)};
}

// TensorBoard's scalars of a row; tags grouped by their prefix (one chart section each).
std::vector<std::pair<std::string, double>> tensorboard_scalars(const MetricsRow& row) {
  std::vector<std::pair<std::string, double>> scalars = {{"loss/train", row.train_loss}};
  if (row.test_loss) scalars.emplace_back("loss/test", *row.test_loss);
  if (row.test_accuracy) scalars.emplace_back("accuracy/test", *row.test_accuracy);
  scalars.emplace_back("optim/learning_rate", row.lr);
  scalars.emplace_back("speed/samples_per_s", row.samples_per_s);
  scalars.emplace_back("speed/epoch_time_s", row.epoch_time_s);
  return scalars;
}

nlohmann::ordered_json to_json(const Field& field) {
  if (const auto* integer = std::get_if<std::int64_t>(&field)) return *integer;
  const auto& number = std::get<std::optional<double>>(field);
  return number ? nlohmann::ordered_json(*number) : nlohmann::ordered_json(nullptr);
}

// fmt's "{}" prints a double in the shortest form that parses back to the same value.
std::string to_csv(const Field& field) {
  if (const auto* integer = std::get_if<std::int64_t>(&field)) return fmt::format("{}", *integer);
  const auto& number = std::get<std::optional<double>>(field);
  return number ? fmt::format("{}", unsigned_nan(*number)) : std::string();
}

}  // namespace

std::vector<MetricsRow> read_metrics_jsonl(const std::filesystem::path& path) {
  SN_CHECK(std::filesystem::is_regular_file(path), "no metrics file '{}'", path.string());
  const std::vector<std::string> lines = read_lines(path);
  std::vector<MetricsRow> rows;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto fail = [&](std::string_view what) {
      SN_FAIL("metrics file '{}' line {}: {} ('{}'); mend or delete that line", path.string(), i + 1, what,
              lines[i].substr(0, 80));
    };
    const auto row = nlohmann::json::parse(lines[i], nullptr, false);
    if (row.is_discarded() || !row.is_object()) fail("not a JSON object");
    if (!row.contains("epoch") || !row["epoch"].is_number_integer()) fail("no integer epoch");  // as jsonl_row_epoch
    for (const char* column : kMetricsColumns) {
      if (!row.contains(column)) fail(fmt::format("no '{}'", column));
      if (!row[column].is_number() && !row[column].is_null()) fail(fmt::format("'{}' is not a number", column));
    }
    const auto number = [&](const char* column) -> std::optional<double> {
      return row[column].is_null() ? std::nullopt : std::optional<double>(row[column].get<double>());
    };
    const double nan = std::numeric_limits<double>::quiet_NaN();
    rows.push_back({static_cast<std::int64_t>(number("step").value_or(0.0)), row["epoch"].get<std::int64_t>(),
                    number("train_loss").value_or(nan), number("test_loss"), number("test_accuracy"),
                    number("epoch_time_s").value_or(nan), number("samples_per_s").value_or(nan),
                    number("lr").value_or(nan)});
  }
  return rows;
}

std::size_t check_metrics_jsonl(const std::filesystem::path& path) { return read_metrics_jsonl(path).size(); }

MetricsWriter::MetricsWriter(const std::filesystem::path& run_dir, bool csv)
    : MetricsWriter(run_dir, csv, OpenMode::kCreate) {}

MetricsWriter::MetricsWriter(const std::filesystem::path& run_dir, bool csv, OpenMode mode)
    : jsonl_path_(run_dir / "metrics.jsonl") {
  const bool create = mode == OpenMode::kCreate;
  try {
    jsonl_ = open_for_writing(jsonl_path_, !create);
    if (csv) {
      csv_path_ = run_dir / "metrics.csv";
      csv_ = open_for_writing(csv_path_, !create);
      if (create) {
        csv_ << csv_header() << '\n';
        flush_checked(csv_, csv_path_);
      }
    }
    events_ = std::make_unique<tensorboard::EventFileWriter>(run_dir);  // removes its own file if it fails
  } catch (const Error&) {
    // A start that fails (a full disk, a directory that is not writable) leaves no empty metrics
    // file behind: the files this start created go again. Only those it opened, which it created
    // or truncated; appended files (a resumed run's) keep their rows. The error names the file
    // and the system's reason.
    if (create) {
      for (auto [out, path] : {std::pair{&jsonl_, &jsonl_path_}, std::pair{&csv_, &csv_path_}}) {
        if (!out->is_open()) continue;
        out->close();
        std::error_code ignored;
        std::filesystem::remove(*path, ignored);
      }
    }
    throw;
  }
}

MetricsWriter MetricsWriter::resume(const std::filesystem::path& run_dir, bool csv, std::int64_t last_epoch,
                                    std::int64_t first_new_step) {
  // Both files checked before either is rewritten.
  const std::filesystem::path jsonl_path = run_dir / "metrics.jsonl", csv_path = run_dir / "metrics.csv";
  const KeptRows jsonl_rows = rows_up_to(jsonl_path, 0, last_epoch, jsonl_row_epoch);
  KeptRows csv_rows;
  if (csv) {
    const std::vector<std::string> lines = read_lines(csv_path);
    if (lines.empty()) {
      csv_rows.text = csv_header() + '\n';
    } else {
      SN_CHECK(lines[0] == csv_header(), "cannot append to metrics file '{}': its header is '{}', expected '{}'",
               csv_path.string(), lines[0], csv_header());
      csv_rows = rows_up_to(csv_path, 1, last_epoch, csv_row_epoch);
    }
  }
  write_text_file_atomically(jsonl_path, jsonl_rows.text);
  if (csv) write_text_file_atomically(csv_path, csv_rows.text);
  MetricsWriter writer(run_dir, csv, OpenMode::kAppend);
  writer.events_->add_session_start(first_new_step);
  writer.resume_gap_ = missing_epochs(jsonl_path, jsonl_rows.epochs, last_epoch);
  // The CSV too (deleted, or output.csv turned on at the resume).
  if (!writer.resume_gap_ && csv) writer.resume_gap_ = missing_epochs(csv_path, csv_rows.epochs, last_epoch);
  return writer;
}

void MetricsWriter::write(const MetricsRow& row) {
  const auto fields = fields_of(row);
  // ordered_json keeps the column order; nlohmann writes doubles so they read back exactly, and NaN as null.
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  std::vector<std::string> csv_fields;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    json[kMetricsColumns[i]] = to_json(fields[i]);
    csv_fields.push_back(to_csv(fields[i]));
  }
  jsonl_ << json.dump() << '\n';
  flush_checked(jsonl_, jsonl_path_);

  if (csv_.is_open()) {
    csv_ << fmt::format("{}\n", fmt::join(csv_fields, ","));
    flush_checked(csv_, csv_path_);
  }
  events_->add_scalars(row.step, tensorboard_scalars(row));
}

}  // namespace sprintnet
