#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sprintnet/core/error.h"
#include "sprintnet/core/random.h"
#include "sprintnet/io/metrics_writer.h"
#include "support/error_message.h"
#include "support/full_disk.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

std::vector<std::string> read_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Values with all 53 bits of mantissa in use, so only an exact round trip matches.
MetricsRow random_row(Generator& gen, std::int64_t step, bool evaluated) {
  MetricsRow row;
  row.step = step;
  row.epoch = 1 + step / 100;
  row.train_loss = gen.uniform(0.0, 3.0);
  if (evaluated) {
    row.test_loss = gen.uniform(0.0, 3.0);
    row.test_accuracy = gen.uniform_double();
  }
  row.epoch_time_s = gen.uniform(0.1, 100.0);
  row.samples_per_s = gen.uniform(1e3, 1e7);
  row.lr = gen.uniform(1e-5, 1e-1);
  return row;
}

TEST(MetricsWriter, JsonlAndCsvReadBackExactly) {
  Generator gen(test::test_seed());
  const auto dir = test::temp_dir("metrics");
  const MetricsRow first = random_row(gen, 50, false);
  const MetricsRow second = random_row(gen, 100, true);
  {
    MetricsWriter writer(dir, true);
    writer.write(first);
    writer.write(second);
    // Rows reach the files before the writer goes away: a killed run keeps them.
    EXPECT_EQ(read_lines(dir / "metrics.jsonl").size(), 2u);
    EXPECT_EQ(read_lines(dir / "metrics.csv").size(), 3u);
  }

  const auto jsonl = read_lines(dir / "metrics.jsonl");
  ASSERT_EQ(jsonl.size(), 2u);
  const auto a = nlohmann::json::parse(jsonl[0]);
  const auto b = nlohmann::json::parse(jsonl[1]);
  EXPECT_EQ(a["step"].get<std::int64_t>(), 50);
  EXPECT_EQ(a["epoch"].get<std::int64_t>(), first.epoch);
  EXPECT_EQ(a["train_loss"].get<double>(), first.train_loss);
  EXPECT_TRUE(a["test_loss"].is_null());
  EXPECT_TRUE(a["test_accuracy"].is_null());
  EXPECT_EQ(a["lr"].get<double>(), first.lr);
  EXPECT_EQ(b["test_loss"].get<double>(), *second.test_loss);
  EXPECT_EQ(b["test_accuracy"].get<double>(), *second.test_accuracy);
  EXPECT_EQ(b["epoch_time_s"].get<double>(), second.epoch_time_s);
  EXPECT_EQ(b["samples_per_s"].get<double>(), second.samples_per_s);
  // Keys in column order.
  std::vector<std::string> keys;
  const auto ordered = nlohmann::ordered_json::parse(jsonl[1]);
  for (const auto& item : ordered.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, std::vector<std::string>(std::begin(kMetricsColumns), std::end(kMetricsColumns)));

  const auto csv = read_lines(dir / "metrics.csv");
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[0], "step,epoch,train_loss,test_loss,test_accuracy,epoch_time_s,samples_per_s,lr");
  EXPECT_EQ(csv[1].substr(0, 3), "50,");
  EXPECT_THAT(csv[1], HasSubstr(",,"));  // the missing test values are empty fields
  std::vector<std::string> fields;
  std::stringstream row(csv[2]);
  for (std::string field; std::getline(row, field, ',');) fields.push_back(field);
  ASSERT_EQ(fields.size(), 8u);
  EXPECT_EQ(std::strtod(fields[2].c_str(), nullptr), second.train_loss);
  EXPECT_EQ(std::strtod(fields[4].c_str(), nullptr), *second.test_accuracy);
  EXPECT_EQ(std::strtod(fields[7].c_str(), nullptr), second.lr);

  // And read_metrics_jsonl gives the rows back as written (a cut-off last line is no row).
  std::ofstream(dir / "metrics.jsonl", std::ios::app) << "{\"step\":1";
  const std::vector<MetricsRow> rows = read_metrics_jsonl(dir / "metrics.jsonl");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].step, 50);
  EXPECT_EQ(rows[0].epoch, first.epoch);
  EXPECT_EQ(rows[0].train_loss, first.train_loss);
  EXPECT_FALSE(rows[0].test_loss);
  EXPECT_FALSE(rows[0].test_accuracy);
  EXPECT_EQ(rows[1].test_accuracy, second.test_accuracy);
  EXPECT_EQ(rows[1].test_loss, second.test_loss);
  EXPECT_EQ(rows[1].epoch_time_s, second.epoch_time_s);
  EXPECT_EQ(rows[1].samples_per_s, second.samples_per_s);
  EXPECT_EQ(rows[1].lr, second.lr);
  EXPECT_EQ(check_metrics_jsonl(dir / "metrics.jsonl"), 2u);
}

// A diverged loss: null in JSON (which has no NaN), and in CSV "nan" whatever the NaN's sign (fmt wrote a
// negative one as "-nan", which R and spreadsheets read as text); infinities keep their sign.
TEST(MetricsWriter, NotANumberIsNullInJsonAndUnsignedNanInCsv) {
  const auto dir = test::temp_dir("metrics-nan");
  {
    MetricsWriter writer(dir, true);
    MetricsRow row;
    row.step = 7;
    row.epoch = 1;
    row.train_loss = -std::numeric_limits<double>::quiet_NaN();
    row.test_loss = std::numeric_limits<double>::quiet_NaN();
    row.test_accuracy = 0.085;
    row.lr = -std::numeric_limits<double>::infinity();
    writer.write(row);
  }
  const auto json = nlohmann::json::parse(read_lines(dir / "metrics.jsonl").at(0));
  EXPECT_TRUE(json["train_loss"].is_null());
  EXPECT_TRUE(json["test_loss"].is_null());
  EXPECT_EQ(json["test_accuracy"].get<double>(), 0.085);
  EXPECT_THAT(read_lines(dir / "metrics.csv").at(1), HasSubstr("7,1,nan,nan,0.085,"));
  EXPECT_THAT(read_lines(dir / "metrics.csv").at(1), HasSubstr(",-inf"));
}

TEST(MetricsWriter, CsvIsOptional) {
  const auto dir = test::temp_dir("metrics-nocsv");
  MetricsWriter writer(dir, false);
  MetricsRow row;
  row.step = 1;
  row.train_loss = 2.5;
  writer.write(row);
  EXPECT_FALSE(std::filesystem::exists(dir / "metrics.csv"));
  EXPECT_EQ(read_lines(dir / "metrics.jsonl").size(), 1u);
}

// A run resumed after epoch 3 whose metrics.jsonl was deleted (or lost rows) went on with only its new rows and no
// word: its curves started at epoch 4. The resume goes on (the rows are gone either way) and says what is missing.
TEST(MetricsWriter, AResumeSaysWhichEpochsTheKeptRowsLack) {
  const auto dir = test::temp_dir("metrics-gap");
  const auto rows_of = [&](std::initializer_list<std::int64_t> epochs) {
    MetricsWriter writer(dir, false);
    for (const std::int64_t epoch : epochs) {
      MetricsRow row;
      row.step = 10 * epoch;
      row.epoch = epoch;
      row.train_loss = 1.0;
      writer.write(row);
    }
  };
  rows_of({1, 2, 3, 4});  // epoch 4's row written, its checkpoint not: dropped, not missing
  EXPECT_EQ(MetricsWriter::resume(dir, false, 3, 31).resume_gap(), std::nullopt);
  rows_of({2, 3});
  const std::optional<std::string> cut = MetricsWriter::resume(dir, false, 3, 31).resume_gap();
  ASSERT_TRUE(cut.has_value());
  EXPECT_THAT(*cut, AllOf(HasSubstr((dir / "metrics.jsonl").string()),
                          HasSubstr("has no row for 1 of the 3 epochs before the checkpoint (the first: epoch 1")));
  std::filesystem::remove(dir / "metrics.jsonl");
  EXPECT_THAT(MetricsWriter::resume(dir, false, 3, 31).resume_gap().value_or(""),
              AllOf(HasSubstr("has no row for 3 of the 3 epochs"), HasSubstr("the run's curves, drawn from it, lack"),
                    Not(HasSubstr("metrics.csv"))));
  EXPECT_EQ(read_lines(dir / "metrics.jsonl").size(), 0u);  // started anew, for the resumed run's rows
  // The CSV is no part of the curves: deleted (or turned on at the resume), it gets its rows back from
  // metrics.jsonl, and nothing is missing. (The warning said the run's "metrics and curves" lacked them.)
  {
    MetricsWriter writer(dir, false);
    for (std::int64_t epoch = 1; epoch <= 3; ++epoch) {
      MetricsRow row;
      row.step = 10 * epoch;
      row.epoch = epoch;
      writer.write(row);
    }
  }
  EXPECT_EQ(MetricsWriter::resume(dir, true, 3, 31).resume_gap(), std::nullopt);
  EXPECT_EQ(read_lines(dir / "metrics.csv").size(), 4u);
  // metrics.jsonl deleted where the CSV keeps the rows: the warning says where they are.
  std::filesystem::remove(dir / "metrics.jsonl");
  EXPECT_THAT(MetricsWriter::resume(dir, true, 3, 31).resume_gap().value_or(""),
              AllOf(HasSubstr("has no row for 3 of the 3 epochs"),
                    HasSubstr(fmt::format("({} keeps each of them)", (dir / "metrics.csv").string()))));
}

MetricsRow row_of_epoch(Generator& gen, std::int64_t epoch) {
  MetricsRow row = random_row(gen, 10 * epoch, epoch % 2 == 0);
  row.epoch = epoch;
  return row;
}

// A whole last row whose newline is missing (a hand edit) is a row: read_metrics_jsonl (plot, a sweep) returns it, and
// a resume keeps it, in both files, and gives it its newline before the next row. It counted as a write cut off by a
// kill: `plot` left it out, and a resume deleted it and then warned that its epoch had no row. A cut row stays none.
TEST(MetricsWriter, AWholeLastRowWithoutItsNewlineIsARow) {
  Generator gen(test::test_seed());
  const auto dir = test::temp_dir("metrics-no-newline");
  {
    MetricsWriter writer(dir, true);
    for (std::int64_t epoch = 1; epoch <= 3; ++epoch) writer.write(row_of_epoch(gen, epoch));
  }
  for (const char* file : {"metrics.jsonl", "metrics.csv"}) {
    const std::string text = test::file_bytes(dir / file);
    std::ofstream(dir / file, std::ios::trunc) << text.substr(0, text.size() - 1);
  }
  const std::vector<MetricsRow> rows = read_metrics_jsonl(dir / "metrics.jsonl");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].epoch, 3);
  const std::string jsonl = test::file_bytes(dir / "metrics.jsonl") + "\n";
  const std::string csv = test::file_bytes(dir / "metrics.csv") + "\n";
  {
    MetricsWriter writer = MetricsWriter::resume(dir, true, 3, 31);
    EXPECT_EQ(writer.resume_gap(), std::nullopt);
    writer.write(row_of_epoch(gen, 4));
  }
  EXPECT_EQ(test::file_bytes(dir / "metrics.jsonl").substr(0, jsonl.size()), jsonl);
  EXPECT_EQ(test::file_bytes(dir / "metrics.csv").substr(0, csv.size()), csv);
  EXPECT_EQ(read_lines(dir / "metrics.jsonl").size(), 4u);
  EXPECT_EQ(read_lines(dir / "metrics.csv").size(), 5u);
  EXPECT_EQ(read_metrics_jsonl(dir / "metrics.jsonl").back().epoch, 4);

  // Cut inside a row (before the JSON's closing brace; after the CSV's epoch): no row, dropped by a resume.
  for (const char* file : {"metrics.jsonl", "metrics.csv"}) {
    const std::string text = test::file_bytes(dir / file);
    const std::size_t last = text.rfind('\n', text.size() - 2) + 1;
    const bool json = std::string(file) == "metrics.jsonl";
    std::ofstream(dir / file, std::ios::trunc) << text.substr(0, last)
                                               << text.substr(last, json ? text.size() - last - 2 : 4);
  }
  EXPECT_EQ(read_metrics_jsonl(dir / "metrics.jsonl").size(), 3u);
  MetricsWriter::resume(dir, true, 4, 41);
  EXPECT_EQ(test::file_bytes(dir / "metrics.jsonl"), jsonl);
  EXPECT_EQ(test::file_bytes(dir / "metrics.csv"), csv);
}

// A resume holds the rows to the rules every reader holds them to, in one place: a row that `plot` refuses
// ({"epoch":1}: resumed with exit 0, and the curves then failed on line 1's missing 'step') is refused, naming the
// file, the line and what is wrong, and nothing changes. The CSV's rows as its writer writes them. A byte order mark
// before the first line (an editor's) is skipped by every reader, python's too; one before a later line is an error
// for all (nlohmann skipped it, python's json did not).
TEST(MetricsWriter, AResumeHoldsRowsToTheRulesOfEveryReader) {
  Generator gen(test::test_seed());
  const auto dir = test::temp_dir("metrics-resume-rules");
  {
    MetricsWriter writer(dir, true);
    for (std::int64_t epoch = 1; epoch <= 3; ++epoch) writer.write(row_of_epoch(gen, epoch));
  }
  const std::string jsonl = test::file_bytes(dir / "metrics.jsonl"), csv = test::file_bytes(dir / "metrics.csv");
  const std::string bom = "\xEF\xBB\xBF";
  const std::string second_jsonl = read_lines(dir / "metrics.jsonl")[1];
  const std::string second_csv = read_lines(dir / "metrics.csv")[2];
  struct Case {
    const char* file;
    std::size_t line;  // 1-based, of the line replaced
    std::string text, what;
  };
  for (const Case& c : std::vector<Case>{
           {"metrics.jsonl", 1, "{\"epoch\":1}", "line 1: no 'step'"},
           {"metrics.jsonl", 2, bom + second_jsonl, "line 2: starts with a byte order mark"},
           {"metrics.jsonl", 2, second_jsonl.substr(0, second_jsonl.find("\"lr\"")) + "\"lr\":true}",
            "line 2: 'lr' is not a number"},
           {"metrics.csv", 3, second_csv.substr(0, second_csv.rfind(',')), "line 3: 7 fields where a row has 8"},
           {"metrics.csv", 3, "20,2,fast" + second_csv.substr(second_csv.find(',', 5)),
            "line 3: 'train_loss' is not a number"},
           {"metrics.csv", 2, "10,1,,,,,,", "line 2: no 'train_loss'"}}) {
    std::vector<std::string> lines = read_lines(dir / c.file);
    lines[c.line - 1] = c.text;
    std::ofstream out(dir / c.file, std::ios::trunc);
    for (const std::string& line : lines) out << line << '\n';
    out.close();
    const std::string damaged = test::file_bytes(dir / c.file);
    EXPECT_THAT([&] { MetricsWriter::resume(dir, true, 3, 31); },
                ThrowsMessage<Error>(AllOf(HasSubstr("cannot resume: metrics file '" + (dir / c.file).string()),
                                           HasSubstr(c.what))))
        << c.text;
    if (std::string(c.file) == "metrics.jsonl") {  // the same words from the readers
      EXPECT_THAT([&] { read_metrics_jsonl(dir / c.file); }, ThrowsMessage<Error>(HasSubstr(c.what)));
    }
    EXPECT_EQ(test::file_bytes(dir / c.file), damaged);
    std::ofstream(dir / "metrics.jsonl", std::ios::trunc) << jsonl;
    std::ofstream(dir / "metrics.csv", std::ios::trunc) << csv;
  }
  std::ofstream(dir / "metrics.jsonl", std::ios::trunc) << bom << jsonl;
  std::ofstream(dir / "metrics.csv", std::ios::trunc) << bom << csv;  // (a spreadsheet's "UTF-8 with BOM")
  EXPECT_EQ(read_metrics_jsonl(dir / "metrics.jsonl").size(), 3u);
  EXPECT_EQ(MetricsWriter::resume(dir, true, 3, 31).resume_gap(), std::nullopt);
  EXPECT_EQ(test::file_bytes(dir / "metrics.jsonl"), jsonl);
  EXPECT_EQ(test::file_bytes(dir / "metrics.csv"), csv);
}

// output.csv may differ on resume. Turned on, metrics.csv gets every kept epoch's row, made from metrics.jsonl's with
// the values the writer would have written (a diverged loss nan, an unevaluated epoch's test columns empty); turned
// off, it is trimmed to the checkpoint like metrics.jsonl (rows of a life past it would come back when it is turned on
// again) and gets no new rows.
TEST(MetricsWriter, OutputCsvTurnedOnOrOffAtAResume) {
  Generator gen(test::test_seed());
  const auto on = test::temp_dir("metrics-csv-on"), off = test::temp_dir("metrics-csv-off");
  std::vector<MetricsRow> rows;
  for (std::int64_t epoch = 1; epoch <= 4; ++epoch) rows.push_back(row_of_epoch(gen, epoch));
  rows[1].train_loss = std::numeric_limits<double>::quiet_NaN();
  rows[1].test_loss = std::numeric_limits<double>::quiet_NaN();  // diverged, evaluated
  {
    MetricsWriter reference(off, true), without(on, false);
    for (const MetricsRow& row : rows) {
      reference.write(row);
      without.write(row);
    }
  }
  const std::vector<std::string> csv = read_lines(off / "metrics.csv");
  ASSERT_EQ(csv.size(), 5u);
  ASSERT_FALSE(std::filesystem::exists(on / "metrics.csv"));
  MetricsWriter::resume(on, true, 3, 31).write(rows[3]);
  EXPECT_EQ(read_lines(on / "metrics.csv"), csv);
  {
    MetricsWriter writer = MetricsWriter::resume(off, false, 2, 21);
    writer.write(rows[2]);
  }
  EXPECT_EQ(read_lines(off / "metrics.csv"), std::vector<std::string>(csv.begin(), csv.begin() + 3));
  EXPECT_EQ(read_lines(off / "metrics.jsonl").size(), 3u);
}

// A run that starts on a full disk: the error names the file that could not be written and why,
// and no file the writer created stays behind (an empty metrics.jsonl passes for a run without rows).
TEST(MetricsWriter, AStartOnAFullDiskNamesTheFileAndLeavesNoFileBehind) {
  for (const bool csv : {true, false}) {
    const auto dir = test::temp_dir(csv ? "metrics-full-disk-csv" : "metrics-full-disk");
    std::string message;
    {
      test::FullDisk full;
      message = test::error_message([&] { MetricsWriter writer(dir, csv); });
    }
    // The file whose first write failed (the CSV's header, or the event file's first record).
    EXPECT_THAT(message, AllOf(HasSubstr((dir / "").string()), HasSubstr(test::FullDisk::reason())));
    std::vector<std::string> left;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) left.push_back(entry.path().filename().string());
    EXPECT_TRUE(left.empty()) << "csv = " << csv << ": left behind: " << ::testing::PrintToString(left);
  }
}

TEST(MetricsWriter, UnwritableDirectoryNamesThePath) {
  EXPECT_THAT([] { MetricsWriter("/nonexistent/sprintnet-run", true); },
              ::testing::ThrowsMessage<Error>(HasSubstr("/nonexistent/sprintnet-run/metrics.jsonl")));
}

}  // namespace
}  // namespace sprintnet
