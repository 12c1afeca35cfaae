// sprintnet eval CHECKPOINT [--data IMAGES LABELS | --split test|train] [--csv FILE] ...
// Loss, accuracy, per-class accuracy and the confusion matrix of a trained model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint_options.h"
#include "commands.h"
#include "sprintnet/core/error.h"
#include "sprintnet/data/dataset.h"
#include "sprintnet/dist/device_connections.h"
#include "sprintnet/io/atomic_file.h"
#include "sprintnet/io/progress_format.h"
#include "sprintnet/train/inference.h"
#include "sprintnet/train/out_of_memory_advice.h"

namespace sprintnet::cli {
namespace {

// Wider tables do not fit a terminal: their matrix goes to --csv only, and the per-class table lists the classes
// that have samples. A CSV of more classes would have millions of cells, nearly all zero.
constexpr std::int64_t kPrintedMatrixClasses = 32;
constexpr std::int64_t kCsvMatrixClasses = 1024;

std::string class_label(const std::vector<std::string>& names, std::int64_t c) {
  return names.empty() ? std::to_string(c) : fmt::format("{} {}", c, names[static_cast<std::size_t>(c)]);
}

std::string per_class_table(const train::ConfusionMatrix& confusion, const std::vector<std::string>& names) {
  const bool every_class = confusion.classes <= kPrintedMatrixClasses;
  std::vector<std::int64_t> listed;
  for (std::int64_t c = 0; c < confusion.classes; ++c) {
    if (every_class || confusion.class_total(c) > 0) listed.push_back(c);
  }
  std::size_t label_width = std::string_view("class").size();
  for (const std::int64_t c : listed) label_width = std::max(label_width, class_label(names, c).size());
  std::string out =
      fmt::format("{:<{}}  {:>8}  {:>8}  {:>9}\n", "class", label_width, "samples", "correct", "accuracy");
  for (const std::int64_t c : listed) {
    const double accuracy = confusion.class_accuracy(c);
    out += fmt::format("{:<{}}  {:>8}  {:>8}  {:>9}\n", class_label(names, c), label_width, confusion.class_total(c),
                       confusion.at(c, c), std::isnan(accuracy) ? "-" : fmt::format("{:.2f} %", 100.0 * accuracy));
  }
  const auto unlisted = confusion.classes - static_cast<std::int64_t>(listed.size());
  if (unlisted > 0) out += fmt::format("({} of the {} classes have no sample and are not listed)\n", unlisted, confusion.classes);
  return out;
}

// Rows: true class; columns: predicted class; every column as wide as its widest entry.
std::string confusion_table(const train::ConfusionMatrix& confusion) {
  const std::string corner = "true\\pred";
  std::size_t width = std::to_string(confusion.classes - 1).size();
  width = std::max(width, std::to_string(confusion.largest_cell()).size());
  std::string out = fmt::format("{:<{}}", corner, corner.size());
  for (std::int64_t p = 0; p < confusion.classes; ++p) out += fmt::format(" {:>{}}", p, width);
  out += '\n';
  for (std::int64_t t = 0; t < confusion.classes; ++t) {
    out += fmt::format("{:<{}}", t, corner.size());
    for (std::int64_t p = 0; p < confusion.classes; ++p) out += fmt::format(" {:>{}}", confusion.at(t, p), width);
    out += '\n';
  }
  return out;
}

std::string confusion_csv(const train::ConfusionMatrix& confusion) {
  std::string out = "true/predicted";
  for (std::int64_t p = 0; p < confusion.classes; ++p) out += fmt::format(",{}", p);
  out += '\n';
  for (std::int64_t t = 0; t < confusion.classes; ++t) {
    out += std::to_string(t);
    for (std::int64_t p = 0; p < confusion.classes; ++p) out += fmt::format(",{}", confusion.at(t, p));
    out += '\n';
  }
  return out;
}

// The CSV must not replace a file the evaluation reads: the weights, the config, or the data (--data's files, or the
// config's data set). It was written over them (`--csv RUN/model.safetensors` left a run eval could not read).
void refuse_csv_over_an_input(const std::filesystem::path& csv, const train::LoadedModel& model,
                              const std::vector<std::string>& data) {
  std::vector<std::pair<std::string, std::filesystem::path>> inputs = {{"the weights", model.files.weights},
                                                                       {"the config", model.files.config}};
  for (const std::string& path : data) inputs.emplace_back("a --data file", path);
  if (data.empty()) {
    for (const Split split : {Split::kTrain, Split::kTest}) {
      try {  // each split on its own: --split test needs no training files
        const SplitFiles files = dataset_split_files(model.config.data, split);
        for (const auto& path : {files.images, files.labels}) inputs.emplace_back("a file of the data set", path);
      } catch (const Error&) {
        // Missing data: the evaluation names it next, where it needs it.
      }
    }
  }
  std::error_code ec;
  for (const auto& [what, path] : inputs) {
    SN_CHECK(!std::filesystem::equivalent(csv, path, ec), "eval --csv {}: that is {} this evaluation reads ({}); give "
             "another file", csv.string(), what, path.string());
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  struct Options : CheckpointOptions {
    std::vector<std::string> data;
    std::string split = "test";
    std::string csv_path;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("eval", "Evaluate a trained model: loss, accuracy, per-class accuracy, confusion matrix");
  add_checkpoint_options(*cmd, *options, "Where to evaluate: auto, cpu, cuda, cuda:N");
  CLI::Option* data_option = cmd->add_option("--data", options->data, "IDX image and label files to evaluate on")
                                 ->expected(2)
                                 ->type_name("PATH");
  cmd->add_option("--split", options->split,
                  "Split of the config's data set (data.test_limit / data.train_limit apply)")
      ->check(CLI::IsMember({"test", "train"}))
      ->excludes(data_option)
      ->capture_default_str();
  cmd->add_option("--csv", options->csv_path, "Also write the confusion matrix as CSV to FILE")->type_name("FILE");
  cmd->callback([options] {
    if (!options->csv_path.empty()) check_output_file(options->csv_path, "eval --csv");  // before the evaluation
    dist::prefer_few_device_connections();  // before the first CUDA call
    train::LoadedModel model = load_checkpoint(*options);
    if (!options->csv_path.empty()) refuse_csv_over_an_input(options->csv_path, model, options->data);
    SN_CHECK(options->csv_path.empty() || model.num_classes() <= kCsvMatrixClasses,
             "eval --csv {}: the model has {} classes, and a confusion matrix of more than {} classes is not written "
             "as CSV (it would have {} cells)",
             options->csv_path, model.num_classes(), kCsvMatrixClasses, model.num_classes() * model.num_classes());
    const Dataset data = options->data.empty() ? train::load_split(model, options->split)
                                               : train::load_idx_for_model(model, options->data[0], options->data[1]);
    const train::Evaluation evaluation = train::advise_on_out_of_memory(
        model.files.config, model.config, train::MemoryUse::kInference,
        [&] { return train::evaluate_dataset(model, data); });
    const train::EvalResult& result = evaluation.result;
    const std::vector<std::string> names = options->data.empty()
                                               ? train::class_names(model.config.data.dataset, model.num_classes())
                                               : std::vector<std::string>{};

    std::printf("model %s (%s)\n", model.files.weights.string().c_str(), train::model_summary(model).c_str());
    std::printf("data  %s: %lld samples, on %s\n\n", data.name.c_str(), static_cast<long long>(result.samples),
                model.device.str().c_str());
    std::printf("loss %s (%s), accuracy %.2f %% (%lld / %lld)\n\n", format_loss(result.loss).c_str(),
                model.config.loss.type.c_str(),
                100.0 * result.accuracy, static_cast<long long>(result.correct),
                static_cast<long long>(result.samples));
    std::printf("per-class accuracy\n%s\n", per_class_table(evaluation.confusion, names).c_str());
    if (evaluation.confusion.classes <= kPrintedMatrixClasses) {
      std::printf("confusion matrix (rows: true class, columns: predicted class)\n%s",
                  confusion_table(evaluation.confusion).c_str());
    } else {
      std::printf("confusion matrix: %lld classes, too wide to print (--csv FILE writes matrices of up to %lld)\n",
                  static_cast<long long>(evaluation.confusion.classes), static_cast<long long>(kCsvMatrixClasses));
    }
    if (!options->csv_path.empty()) {
      write_text_file_atomically(options->csv_path, confusion_csv(evaluation.confusion));
      std::printf("\nconfusion matrix written to %s\n", options->csv_path.c_str());
    }
  });
}

}  // namespace sprintnet::cli
