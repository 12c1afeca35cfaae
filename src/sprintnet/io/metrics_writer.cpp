#include "sprintnet/io/metrics_writer.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
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

// A UTF-8 byte order mark, which an editor or a spreadsheet may put before a file's first line.
constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";

// The lines of a metrics file (none when it is absent): those a newline ends, and the text after the last newline
// (empty when the file ends with one), which a reader keeps when it is a whole row (a hand edit lost the newline) and
// drops otherwise (a row cut off by a kill). A byte order mark before the first line is no part of it (python's
// reader opens the file as utf-8-sig alike).
struct FileLines {
  std::vector<std::string> complete;
  std::string unterminated;
};
FileLines read_lines(const std::filesystem::path& path) {
  FileLines lines;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return lines;
  const std::string bytes = read_file(path, "metrics file");
  std::string_view text = bytes;
  if (text.starts_with(kByteOrderMark)) text.remove_prefix(kByteOrderMark.size());
  std::size_t begin = 0;
  for (std::size_t end; (end = text.find('\n', begin)) != std::string_view::npos; begin = end + 1) {
    lines.complete.emplace_back(text.substr(begin, end - begin));
  }
  lines.unterminated = text.substr(begin);
  return lines;
}

// A line read as a row, or what keeps it from being one.
struct ParsedRow {
  std::optional<MetricsRow> row;
  std::string problem;
};

// A metrics.jsonl line: a JSON object with every column, an integer epoch, numbers or null for the rest (a null
// loss or rate reads as NaN). The one rule for every reader: `plot`, a sweep's results and a resume.
ParsedRow parse_jsonl_row(const std::string& line) {
  // nlohmann skips a byte order mark at the start of its input, here a line; python's json refuses it.
  if (std::string_view(line).starts_with(kByteOrderMark)) return {std::nullopt, "starts with a byte order mark"};
  const auto json = nlohmann::json::parse(line, nullptr, false);
  if (json.is_discarded() || !json.is_object()) return {std::nullopt, "not a JSON object"};
  if (!json.contains("epoch") || !json["epoch"].is_number_integer()) return {std::nullopt, "no integer epoch"};
  for (const char* column : kMetricsColumns) {
    if (!json.contains(column)) return {std::nullopt, fmt::format("no '{}'", column)};
    if (!json[column].is_number() && !json[column].is_null()) {
      return {std::nullopt, fmt::format("'{}' is not a number", column)};
    }
  }
  const auto number = [&](const char* column) -> std::optional<double> {
    return json[column].is_null() ? std::nullopt : std::optional<double>(json[column].get<double>());
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {MetricsRow{static_cast<std::int64_t>(number("step").value_or(0.0)), json["epoch"].get<std::int64_t>(),
                     number("train_loss").value_or(nan), number("test_loss"), number("test_accuracy"),
                     number("epoch_time_s").value_or(nan), number("samples_per_s").value_or(nan),
                     number("lr").value_or(nan)},
          {}};
}

// A metrics.csv line as MetricsWriter writes it: every column, integers for step and epoch, numbers (nan, inf
// included) for the rest, the test loss and accuracy empty when the epoch was not evaluated. A row cut off inside
// its last number passes, but a cut row is always one past the checkpoint (rows are written before their
// checkpoint), which a resume drops anyway.
ParsedRow parse_csv_row(const std::string& line) {
  std::vector<std::string_view> fields;
  for (std::size_t begin = 0;;) {
    const std::size_t comma = line.find(',', begin);
    fields.emplace_back(std::string_view(line).substr(begin, comma == std::string::npos ? comma : comma - begin));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (fields.size() != std::size(kMetricsColumns)) {
    const auto count = static_cast<std::int64_t>(fields.size());
    return {std::nullopt, fmt::format("{} where a row has {}", counted(count, "field"), std::size(kMetricsColumns))};
  }
  const auto integer = [](std::string_view field) -> std::optional<std::int64_t> {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
    return error == std::errc() && end == field.data() + field.size() ? std::optional(value) : std::nullopt;
  };
  std::array<std::optional<double>, std::size(kMetricsColumns)> numbers;
  for (std::size_t i = 2; i < fields.size(); ++i) {
    if (fields[i].empty()) continue;
    double value = 0.0;
    const auto [end, error] = std::from_chars(fields[i].data(), fields[i].data() + fields[i].size(), value);
    if (error != std::errc() || end != fields[i].data() + fields[i].size()) {
      return {std::nullopt, fmt::format("'{}' is not a number", kMetricsColumns[i])};
    }
    numbers[i] = value;
  }
  const std::optional<std::int64_t> step = integer(fields[0]), epoch = integer(fields[1]);
  if (!step) return {std::nullopt, "no integer step"};
  if (!epoch) return {std::nullopt, "no integer epoch"};
  for (const std::size_t always : {2, 5, 6, 7}) {  // what every row has; the test columns are empty when not evaluated
    if (!numbers[always]) return {std::nullopt, fmt::format("no '{}'", kMetricsColumns[always])};
  }
  return {MetricsRow{*step, *epoch, *numbers[2], numbers[3], numbers[4], *numbers[5], *numbers[6], *numbers[7]}, {}};
}

// The rows a file holds after its first `header_lines` lines: every complete line parsed (one that is not a row is
// an error naming the file, the line and what is wrong, `doing` saying what the reader was doing), and the
// unterminated last line when it is a whole row.
struct FileRow {
  MetricsRow row;
  std::string line;
};
std::vector<FileRow> parse_rows(const std::filesystem::path& path, const FileLines& lines, std::size_t header_lines,
                                ParsedRow (*parse)(const std::string&), std::string_view doing) {
  std::vector<FileRow> rows;
  for (std::size_t i = header_lines; i < lines.complete.size(); ++i) {
    ParsedRow parsed = parse(lines.complete[i]);
    SN_CHECK(parsed.row.has_value(), "{}metrics file '{}' line {}: {} ('{}'); mend or delete that line", doing,
             path.string(), i + 1, parsed.problem, lines.complete[i].substr(0, 80));
    rows.push_back({*parsed.row, lines.complete[i]});
  }
  if (!lines.unterminated.empty() && lines.complete.size() >= header_lines) {
    if (ParsedRow parsed = parse(lines.unterminated); parsed.row) rows.push_back({*parsed.row, lines.unterminated});
  }
  return rows;
}

// What a resume keeps of a metrics file: its header lines and its rows up to epoch `last_epoch` (rows are in epoch
// order, so the first later row ends what is kept), checked as every reader checks them, before anything is
// rewritten: dropping a bad line and every row after it would lose the run's history without a word.
struct KeptRows {
  std::vector<std::string> header;
  std::vector<FileRow> rows;

  std::set<std::int64_t> epochs() const {
    std::set<std::int64_t> out;
    for (const FileRow& r : rows) out.insert(r.row.epoch);
    return out;
  }
  // Each line with its newline: a whole last row that lacked it gets it, before the next row is appended.
  std::string text() const {
    std::string out;
    for (const std::string& line : header) out += line + '\n';
    for (const FileRow& r : rows) out += r.line + '\n';
    return out;
  }
};
KeptRows rows_up_to(const std::filesystem::path& path, const FileLines& lines, std::size_t header_lines,
                    std::int64_t last_epoch, ParsedRow (*parse)(const std::string&)) {
  KeptRows kept;
  kept.header.assign(lines.complete.begin(), lines.complete.begin() + std::min(header_lines, lines.complete.size()));
  for (FileRow& r : parse_rows(path, lines, header_lines, parse, "cannot resume: ")) {
    if (r.row.epoch > last_epoch) break;
    kept.rows.push_back(std::move(r));
  }
  return kept;
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

std::string csv_line(const MetricsRow& row) {
  std::vector<std::string> fields;
  for (const Field& field : fields_of(row)) fields.push_back(to_csv(field));
  return fmt::format("{}", fmt::join(fields, ","));
}

// The CSV's kept rows, with a row made from metrics.jsonl's for each kept epoch it lacks: output.csv turned on at
// this resume (or off for a while before), or the CSV deleted. The JSON file keeps every value but an infinity (null
// there, nan here).
void add_rows_the_csv_lacks(KeptRows& csv, const KeptRows& jsonl) {
  const std::set<std::int64_t> present = csv.epochs();
  for (const FileRow& r : jsonl.rows) {
    if (present.contains(r.row.epoch)) continue;
    MetricsRow row = r.row;
    // A test loss that is null in an evaluated row was not finite, which the CSV writes as nan, not as no value.
    if (row.test_accuracy && !row.test_loss) row.test_loss = std::numeric_limits<double>::quiet_NaN();
    csv.rows.push_back({row, csv_line(row)});
  }
  std::stable_sort(csv.rows.begin(), csv.rows.end(),
                   [](const FileRow& a, const FileRow& b) { return a.row.epoch < b.row.epoch; });
}

// Which of epochs 1..last_epoch metrics.jsonl (`path`) has no row for, said for a warning; what the CSV keeps of
// them, when it does.
std::optional<std::string> missing_epochs(const std::filesystem::path& path, const KeptRows& jsonl,
                                          const std::optional<KeptRows>& csv, std::int64_t last_epoch) {
  const std::set<std::int64_t> present = jsonl.epochs();
  const std::set<std::int64_t> in_csv = csv ? csv->epochs() : std::set<std::int64_t>();
  std::int64_t missing = 0, first = 0, kept_by_csv = 0;
  for (std::int64_t e = 1; e <= last_epoch; ++e) {
    if (present.contains(e)) continue;
    if (missing++ == 0) first = e;
    kept_by_csv += in_csv.contains(e) ? 1 : 0;
  }
  if (missing == 0) return std::nullopt;
  return fmt::format("{} has no row for {} of the {} epochs before the checkpoint (the first: epoch {}; was it deleted "
                     "or cut?): the resumed run appends its own rows, and the run's curves, drawn from it, lack those "
                     "epochs{}",
                     path.string(), missing, last_epoch, first,
                     kept_by_csv == 0
                         ? std::string()
                         : fmt::format(" ({} keeps {} of them)", (path.parent_path() / "metrics.csv").string(),
                                       kept_by_csv == missing ? "each" : std::to_string(kept_by_csv)));
}

}  // namespace

std::vector<MetricsRow> read_metrics_jsonl(const std::filesystem::path& path) {
  std::error_code ec;
  SN_CHECK(std::filesystem::is_regular_file(std::filesystem::status(path, ec)), "no metrics file '{}'{}", path.string(),
           ec && ec != std::errc::no_such_file_or_directory ? fmt::format(" ({})", ec.message()) : std::string());
  std::vector<MetricsRow> rows;
  for (FileRow& r : parse_rows(path, read_lines(path), 0, parse_jsonl_row, "")) rows.push_back(r.row);
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
  // Both files checked before either is rewritten. The CSV is trimmed to the checkpoint whether or not the resumed
  // run writes it (output.csv may differ on resume): rows of a life past the checkpoint would otherwise come back
  // when it is turned on again.
  const std::filesystem::path jsonl_path = run_dir / "metrics.jsonl", csv_path = run_dir / "metrics.csv";
  const KeptRows jsonl_rows = rows_up_to(jsonl_path, read_lines(jsonl_path), 0, last_epoch, parse_jsonl_row);
  std::optional<KeptRows> csv_rows;
  std::error_code ec;
  if (const FileLines lines = read_lines(csv_path); csv || std::filesystem::exists(csv_path, ec)) {
    csv_rows.emplace();
    if (!lines.complete.empty()) {  // (an empty file, or a header cut off, starts anew)
      SN_CHECK(lines.complete[0] == csv_header(), "cannot {} metrics file '{}': its header is '{}', expected '{}'",
               csv ? "append to" : "resume with", csv_path.string(), lines.complete[0], csv_header());
      csv_rows = rows_up_to(csv_path, lines, 1, last_epoch, parse_csv_row);
    }
    csv_rows->header = {csv_header()};
  }
  const std::optional<std::string> gap = missing_epochs(jsonl_path, jsonl_rows, csv_rows, last_epoch);
  if (csv) add_rows_the_csv_lacks(*csv_rows, jsonl_rows);
  write_text_file_atomically(jsonl_path, jsonl_rows.text());
  if (csv_rows) write_text_file_atomically(csv_path, csv_rows->text());
  MetricsWriter writer(run_dir, csv, OpenMode::kAppend);
  writer.events_->add_session_start(first_new_step);
  writer.resume_gap_ = gap;
  return writer;
}

void MetricsWriter::write(const MetricsRow& row) {
  // ordered_json keeps the column order; nlohmann writes doubles so they read back exactly, and NaN as null.
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  const auto fields = fields_of(row);
  for (std::size_t i = 0; i < fields.size(); ++i) json[kMetricsColumns[i]] = to_json(fields[i]);
  jsonl_ << json.dump() << '\n';
  flush_checked(jsonl_, jsonl_path_);

  if (csv_.is_open()) {
    csv_ << csv_line(row) << '\n';
    flush_checked(csv_, csv_path_);
  }
  events_->add_scalars(row.step, tensorboard_scalars(row));
}

}  // namespace sprintnet
