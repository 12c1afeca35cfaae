#pragma once
// The per-run metrics files: metrics.jsonl (one JSON object per row),
// optionally metrics.csv with the same columns, and a TensorBoard event file
// (`tensorboard --logdir runs/`). Each row is flushed as it is written, so a
// run that is killed keeps every row it logged.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sprintnet/tensorboard/event_file_writer.h"

namespace sprintnet {

struct MetricsRow {
  std::int64_t step = 0;   // optimizer steps taken so far
  std::int64_t epoch = 0;  // 1-based
  double train_loss = 0.0;
  std::optional<double> test_loss;      // absent when the row has no evaluation
  std::optional<double> test_accuracy;  // fraction in [0, 1]
  double epoch_time_s = 0.0;
  double samples_per_s = 0.0;
  double lr = 0.0;
};

// The column names, in file order: the CSV header and the JSON keys.
inline constexpr const char* kMetricsColumns[] = {"step",          "epoch",        "train_loss",    "test_loss",
                                                  "test_accuracy", "epoch_time_s", "samples_per_s", "lr"};

// The rows of a metrics.jsonl, each checked to be a JSON object with every column: an integer epoch, numbers or
// null for the rest (a null loss or rate reads as NaN); throws sprintnet::Error naming the file, the line and what is
// wrong. A last line without its newline is a row when it is a whole one (a hand edit), and a row cut off by a kill
// otherwise, which is no row. A UTF-8 byte order mark before the first line is skipped. The rules every reader
// holds a metrics file to: `plot` (whose python script keeps them too), a sweep's results, a resume.
std::vector<MetricsRow> read_metrics_jsonl(const std::filesystem::path& path);
// The same check, for readers that need only how many rows the file holds. What readers run first.
std::size_t check_metrics_jsonl(const std::filesystem::path& path);

class MetricsWriter {
 public:
  // Creates (truncating) run_dir/metrics.jsonl and, when `csv`, run_dir/metrics.csv
  // with its header, and the event file. run_dir must exist. Throws sprintnet::Error naming
  // the path and the system's reason, after removing the files it created (no empty files
  // left by a full disk).
  MetricsWriter(const std::filesystem::path& run_dir, bool csv);
  // Reopens the files of a run resumed after epoch `last_epoch`: the rows of epochs up to it
  // are kept byte for byte (a whole last row that lacked its newline gets it), later rows (written
  // by a run that died after its last checkpoint) and a cut-off last line are dropped, and new rows
  // are appended. Every row is checked as read_metrics_jsonl checks (the CSV's as its writer writes
  // them) before anything is rewritten: a line that is not one is an error naming the file and the
  // line. A missing metrics.jsonl starts empty. With `csv`, metrics.csv gets a row made from
  // metrics.jsonl's for each kept epoch it lacks (output.csv turned on at this resume, or the CSV
  // deleted); without it, an existing CSV is trimmed to the checkpoint as well and then left alone.
  // A CSV with another header is an error naming the file. A failure removes only the new event
  // file: the metrics files keep their rows. The new event file starts with a session START at
  // `first_new_step`, so TensorBoard drops what the older files logged from that step on, as the
  // metrics files drop the rows past `last_epoch`.
  static MetricsWriter resume(const std::filesystem::path& run_dir, bool csv, std::int64_t last_epoch,
                              std::int64_t first_new_step);
  // After resume(): which epochs up to `last_epoch` metrics.jsonl has no row for (deleted or cut by hand: the run's
  // curves will lack them), to warn of; nullopt when every epoch has its row.
  const std::optional<std::string>& resume_gap() const { return resume_gap_; }

  // Appends one row to each file and flushes. Missing values are JSON null and
  // empty CSV fields; doubles are written in the shortest form that reads back
  // exactly. A value that is not finite (a diverged loss) is null in JSON, which has neither NaN nor
  // infinities, and nan, inf or -inf in CSV.
  void write(const MetricsRow& row);

 private:
  enum class OpenMode { kCreate, kAppend };
  MetricsWriter(const std::filesystem::path& run_dir, bool csv, OpenMode mode);

  std::filesystem::path jsonl_path_;
  std::filesystem::path csv_path_;
  std::ofstream jsonl_;
  std::ofstream csv_;  // not open when csv is off
  // A new event file per process (a resumed run adds one; TensorBoard merges a folder's files).
  std::unique_ptr<tensorboard::EventFileWriter> events_;
  std::optional<std::string> resume_gap_;
};

}  // namespace sprintnet
