// sprintnet predict CHECKPOINT INPUT... [--top-k 3] [--json] [--invert]
// Classifies PNG/PGM images, or every sample of IDX files, with a trained model.
// Image conversion (gray, alpha, resizing) is described in data/image.h. IDX files are samples, read and
// checked as `eval --data` reads them (train::check_matches_model); a 2-D file whose rows are not the model's
// inputs cannot be samples, and is one image, converted like an image file. Each input is read once, then told
// apart by its first bytes and decoded from memory, so a pipe works.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "checkpoint_options.h"
#include "commands.h"
#include "sprintnet/data/dataset.h"
#include "sprintnet/data/image.h"
#include "sprintnet/dist/device_connections.h"
#include "sprintnet/train/inference.h"
#include "sprintnet/train/out_of_memory_advice.h"

namespace sprintnet::cli {
namespace {

// One image to classify: where it came from and its pixels at the model's size.
struct Input {
  std::string file;
  std::optional<std::int64_t> index;  // position inside an IDX file
  std::vector<std::uint8_t> pixels;
};

// The model's sample shape as an image's height and width, for the inputs that are images (resized to it). A
// channel of 1 is no dimension of the picture: a model trained on [N, 1, 28, 28] takes 28x28 images. A 2-D shape
// stays as it is, ones and all: [1, 28] is a picture one pixel high.
ImageOptions image_options_for(const train::LoadedModel& model, const std::string& input, bool invert) {
  const Shape picture =
      model.sample_shape.size() > 2 ? train::without_unit_dims(model.sample_shape) : model.sample_shape;
  SN_CHECK(picture.size() == 2,
           "{}: the model takes inputs of shape {}, not 2-D images; give its samples as an IDX file instead", input,
           shape_str(model.sample_shape));
  return {picture[0], picture[1], invert};
}

// Every sample of an IDX file as eval --data reads it ([N, H, W], [N, 1, H, W], [N, inputs], ...), checked against
// the model's sample shape and not resized. A 2-D file whose rows are not the model's inputs is one [H, W] image,
// converted like an image file.
void append_idx_inputs(const std::string& path, std::span<const std::uint8_t> bytes, const train::LoadedModel& model,
                       bool invert, std::vector<Input>& inputs) {
  Dataset file = parse_idx_images(bytes, path);
  const std::int64_t count = file.images.size(0);
  if (file.sample_shape.size() == 1 && file.sample_shape[0] != model.spec.inputs) {
    const std::int64_t width = file.sample_shape[0];
    const ImageOptions options = image_options_for(model, path, invert);
    const std::string origin = fmt::format("{} (one {}x{} image: its rows of {} values are not the model's {} inputs)",
                                           path, width, count, width, model.spec.inputs);
    inputs.push_back({path, 0, gray_bytes_for_model(file.images.span<std::uint8_t>(), count, width, options, origin)});
    return;
  }
  train::check_matches_model(file, model);
  // At the model's size already: the conversion only inverts, where asked.
  const std::int64_t values = model.spec.inputs;
  const ImageOptions options{1, values, invert};
  const std::span<const std::uint8_t> pixels = file.images.span<std::uint8_t>();
  for (std::int64_t i = 0; i < count; ++i) {
    inputs.push_back({path, i,
                      gray_bytes_for_model(pixels.subspan(static_cast<std::size_t>(i * values),
                                                          static_cast<std::size_t>(values)),
                                           1, values, options, fmt::format("{}[{}]", path, i))});
  }
}

// MNIST-style data is light on dark: a mostly light image is probably dark ink on paper.
void warn_if_mostly_light(const Input& input) {
  constexpr double kLightMeanPixel = 127.5;
  double sum = 0.0;
  for (const std::uint8_t p : input.pixels) sum += p;
  const double mean = input.pixels.empty() ? 0.0 : sum / static_cast<double>(input.pixels.size());
  if (mean > kLightMeanPixel) {
    std::fprintf(stderr,
                 "sprintnet: warning: %s is mostly light (mean pixel %.0f of 255) but the model was trained on light "
                 "shapes on a dark background: pass --invert if it is dark ink on light paper\n",
                 input.file.c_str(), mean);
  }
}

std::string input_name(const Input& input) {
  return input.index ? fmt::format("{}[{}]", input.file, *input.index) : input.file;
}

std::string class_text(const std::vector<std::string>& names, std::int64_t label) {
  return names.empty() ? std::to_string(label) : fmt::format("{} ({})", label, names[static_cast<std::size_t>(label)]);
}

void print_text(const std::vector<Input>& inputs, const std::vector<train::Prediction>& predictions,
                const std::vector<std::string>& names, std::int64_t top_k) {
  std::size_t name_width = std::string_view("input").size();
  std::size_t class_width = std::string_view("class").size();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    name_width = std::max(name_width, input_name(inputs[i]).size());
    class_width = std::max(class_width, class_text(names, predictions[i].label).size());
  }
  std::printf("%s\n", fmt::format("{:<{}}  {:<{}}  top-{} (class probability)", "input", name_width, "class",
                                  class_width, top_k)
                          .c_str());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::string top;
    for (const train::ClassProbability& entry : predictions[i].top) {
      top += fmt::format("{}{} {:.2f} %", top.empty() ? "" : ",  ", class_text(names, entry.label),
                         100.0 * entry.probability);
    }
    std::printf("%s\n", fmt::format("{:<{}}  {:<{}}  {}", input_name(inputs[i]), name_width,
                                    class_text(names, predictions[i].label), class_width, top)
                            .c_str());
  }
}

void print_json(const train::LoadedModel& model, const std::vector<Input>& inputs,
                const std::vector<train::Prediction>& predictions, const std::vector<std::string>& names) {
  nlohmann::ordered_json out;
  out["checkpoint"] = model.files.weights.string();
  out["predictions"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    nlohmann::ordered_json entry;
    entry["input"] = inputs[i].file;
    if (inputs[i].index) entry["index"] = *inputs[i].index;
    entry["class"] = predictions[i].label;
    if (!names.empty()) entry["name"] = names[static_cast<std::size_t>(predictions[i].label)];
    entry["top_k"] = nlohmann::ordered_json::array();
    for (const train::ClassProbability& top : predictions[i].top) {
      nlohmann::ordered_json item = {{"class", top.label}, {"probability", top.probability}};
      if (!names.empty()) item["name"] = names[static_cast<std::size_t>(top.label)];
      entry["top_k"].push_back(item);
    }
    out["predictions"].push_back(entry);
  }
  // A path is bytes, not always UTF-8 (a file named in Latin-1): such bytes print as U+FFFD rather than end
  // the command with nlohmann's "invalid UTF-8" exception.
  std::printf("%s\n", out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
}

}  // namespace

void add_predict_command(CLI::App& app) {
  struct Options : CheckpointOptions {
    std::vector<std::string> inputs;
    std::int64_t top_k = 3;
    bool json = false;
    bool invert = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("predict", "Classify images (PNG, PGM, or IDX files) with a trained model");
  cmd->footer(
      fmt::format("Images are converted the MNIST way: colour to gray (BT.601 luma), transparent pixels\n"
                  "treated as the background (black; white with --invert), and resized to the model's input\n"
                  "size, its dimensions of 1 left out (a model of [1, 28, 28] samples takes 28x28 images;\n"
                  "area averaging when shrinking, bilinear when growing). MNIST digits are white on\n"
                  "black: use --invert for dark drawings on light paper. An aspect ratio more than {}x\n"
                  "off the model's is refused rather than squashed.\n"
                  "IDX files hold samples, as eval --data reads them: [N, 28, 28], [N, 1, 28, 28] or flat\n"
                  "[N, 784] for a 28x28 model, one prediction a sample; they are not resized (--invert\n"
                  "applies). A 2-D file whose rows are not the model's inputs ([28, 28]) is one image,\n"
                  "converted as above.\n"
                  "Each INPUT is read once, whole (up to 1 GiB), so it may be a pipe: <(curl -s URL).",
                  kMaxAspectDistortion));
  add_checkpoint_options(*cmd, *options, "Where to run: auto, cpu, cuda, cuda:N");
  cmd->add_option("inputs", options->inputs, "PNG or PGM (P2/P5) images, or IDX files of samples (every one in them)")
      ->type_name("INPUT")
      ->required();
  cmd->add_option("-k,--top-k", options->top_k, "How many of the most likely classes to list")
      ->check(CLI::Range(1, 1 << 20))  // (CLI::PositiveNumber's message for 0 names a range that holds 0)
      ->capture_default_str();
  cmd->add_flag("--json", options->json, "Print one JSON document instead of a table");
  cmd->add_flag("--invert", options->invert, "The images are dark ink on light paper (MNIST is light on dark)");
  cmd->callback([options] {
    dist::prefer_few_device_connections();  // before the first CUDA call
    train::LoadedModel model = load_checkpoint(*options);

    std::vector<Input> inputs;
    for (const std::string& path : options->inputs) {
      // Read once, then told apart and decoded from memory: a pipe (`<(command)`) cannot be read a second time.
      const std::vector<std::uint8_t> bytes = read_file_bytes(path);
      if (detect_image_file_kind(bytes) == ImageFileKind::kIdx) {
        append_idx_inputs(path, bytes, model, options->invert, inputs);
      } else {
        inputs.push_back({path, std::nullopt,
                          image_bytes_for_model(bytes, path, image_options_for(model, path, options->invert))});
        if (!options->invert) warn_if_mostly_light(inputs.back());
      }
    }
    std::vector<std::uint8_t> pixels;
    pixels.reserve(inputs.size() * static_cast<std::size_t>(model.spec.inputs));
    for (const Input& input : inputs) pixels.insert(pixels.end(), input.pixels.begin(), input.pixels.end());
    const Tensor images = Tensor::from_vector(pixels, {static_cast<std::int64_t>(inputs.size()), model.spec.inputs});
    std::vector<std::string> input_names;
    for (const Input& input : inputs) input_names.push_back(input_name(input));
    const std::vector<train::Prediction> predictions =
        train::advise_on_out_of_memory(model.files.config, model.config, train::MemoryUse::kInference,
                                       [&] { return train::predict(model, images, options->top_k, input_names); });
    const std::vector<std::string> names = train::class_names(model.config.data.dataset, model.num_classes());
    if (options->json) {
      print_json(model, inputs, predictions, names);
    } else {
      print_text(inputs, predictions, names, std::min(options->top_k, model.num_classes()));
    }
  });
}

}  // namespace sprintnet::cli
