#include "sprintnet/io/metrics_writer.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sprintnet/core/error.h"

namespace sprintnet {
namespace {

std::ofstream open_for_writing(const std::filesystem::path& path) {
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  SN_CHECK(out.is_open(), "cannot open metrics file '{}' for writing: {}", path.string(), std::strerror(errno));
  return out;
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

nlohmann::ordered_json to_json(const Field& field) {
  if (const auto* integer = std::get_if<std::int64_t>(&field)) return *integer;
  const auto& number = std::get<std::optional<double>>(field);
  return number ? nlohmann::ordered_json(*number) : nlohmann::ordered_json(nullptr);
}

// fmt's "{}" prints a double in the shortest form that parses back to the same value.
std::string to_csv(const Field& field) {
  if (const auto* integer = std::get_if<std::int64_t>(&field)) return fmt::format("{}", *integer);
  const auto& number = std::get<std::optional<double>>(field);
  return number ? fmt::format("{}", *number) : std::string();
}

}  // namespace

MetricsWriter::MetricsWriter(const std::filesystem::path& run_dir, bool csv)
    : jsonl_path_(run_dir / "metrics.jsonl"), jsonl_(open_for_writing(jsonl_path_)) {
  if (csv) {
    csv_path_ = run_dir / "metrics.csv";
    csv_ = open_for_writing(csv_path_);
    csv_ << fmt::format("{}\n", fmt::join(kMetricsColumns, ","));
    flush_checked(csv_, csv_path_);
  }
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
}

}  // namespace sprintnet
