#include "sprintnet/train/inference.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

#include "sprintnet/io/read_file.h"
#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/train/checkpoint.h"
#include "sprintnet/train/model_io.h"
#include "sprintnet/train/out_of_memory_advice.h"
#include "sprintnet/train/trainer.h"

namespace sprintnet::train {
namespace {

inline constexpr std::string_view kWeightsFileName = "model.safetensors";
inline constexpr std::string_view kConfigFileName = "config.toml";

// The newest complete checkpoint's weights, for a hint when a run has no final weights.
std::optional<std::filesystem::path> newest_checkpoint_weights(const std::filesystem::path& run_dir) {
  try {
    const std::vector<std::filesystem::path> checkpoints = list_checkpoints(run_dir);
    if (!checkpoints.empty()) return checkpoints.back() / kCheckpointModelFileName;
  } catch (const Error&) {
    // No checkpoints/ folder: no hint.
  }
  return std::nullopt;
}

double parse_double(const std::string& text, std::string_view key, std::string_view origin) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  SN_CHECK(ec == std::errc() && end == text.data() + text.size() && std::isfinite(value),
           "{}: metadata '{}' = \"{}\" is not a number", origin, key, text);
  return value;
}

Shape parse_sample_shape(const std::string& text, std::string_view origin) {
  Shape shape;
  const char* p = text.data();
  const char* const end = text.data() + text.size();
  while (true) {
    std::int64_t extent = 0;
    const auto [next, ec] = std::from_chars(p, end, extent);
    SN_CHECK(ec == std::errc() && extent >= 1, "{}: metadata '{}' = \"{}\" is not a shape like 28x28", origin,
             kMetadataSampleShape, text);
    shape.push_back(extent);
    p = next;
    if (p == end) break;
    SN_CHECK(*p == 'x', "{}: metadata '{}' = \"{}\" is not a shape like 28x28", origin, kMetadataSampleShape, text);
    ++p;
  }
  return shape;
}

std::string metadata_value(const Metadata& metadata, std::string_view key) {
  const auto it = metadata.find(std::string(key));
  return it == metadata.end() ? std::string() : it->second;
}

// The output width, from the weights of the last Linear (index 2 * hidden layers in the
// Sequential), after checking that the weights hold as many layers as the config describes.
std::int64_t output_width(const SafetensorsFile& weights, const ModelConfig& model, std::string_view origin) {
  constexpr std::string_view kWeightSuffix = ".weight";
  std::vector<std::string> layers;
  for (const auto& [name, tensor] : weights.tensors) {
    if (name.ends_with(kWeightSuffix)) layers.push_back(fmt::format("{} {}", name, shape_str(tensor.shape())));
  }
  std::string hidden;
  for (const std::int64_t width : model.hidden) hidden += fmt::format("{}{}", hidden.empty() ? "" : ", ", width);
  SN_CHECK(layers.size() == model.hidden.size() + 1,
           "{}: the weights hold {} linear layer(s) ({}) but the config's model.hidden = [{}] describes {}; were "
           "they trained with another config?",
           origin, layers.size(), fmt::join(layers, ", "), hidden, model.hidden.size() + 1);
  const std::string name = fmt::format("{}.weight", 2 * model.hidden.size());
  for (const auto& [tensor_name, tensor] : weights.tensors) {
    if (tensor_name != name) continue;
    SN_CHECK(tensor.dim() == 2 && tensor.size(0) >= 1, "{}: tensor '{}' has shape {}, expected [classes, inputs]",
             origin, name, shape_str(tensor.shape()));
    // model.classes = 0 means "as the training labels said"; any other value must be what the weights hold,
    // so that a `--set model.classes=...` is never silently ignored.
    SN_CHECK(model.classes == 0 || model.classes == tensor.size(0),
             "{}: the output layer '{}' {} has {} classes but the config's model.classes = {}; were they trained "
             "with another config?", origin, name, shape_str(tensor.shape()), tensor.size(0), model.classes);
    return tensor.size(0);
  }
  SN_FAIL("{}: no tensor '{}' for the output layer (the weights hold {})", origin, name, fmt::join(layers, ", "));
}

// What the Trainer computed from the training set: the normalization and the sample shape.
void recompute_from_training_data(LoadedModel& loaded, bool need_normalization, bool need_shape) {
  try {
    const Config& config = loaded.config;
    SN_CHECK(config.data.train_limit >= 0, "data.train_limit = {} is negative", config.data.train_limit);
    const SplitFiles files = dataset_split_files(config.data, Split::kTrain);
    const Dataset train = load_idx_dataset(files.images, files.labels, 0, config.data.train_limit);
    if (need_normalization) loaded.normalization = make_normalization(train, config.data.normalize);
    if (need_shape) loaded.sample_shape = train.sample_shape;
  } catch (const Error& e) {
    SN_FAIL(
        "{}: the checkpoint does not record its input {}, so it is recomputed from the training data the config "
        "names, which failed: {}",
        loaded.files.weights.string(), need_normalization ? "normalization" : "image shape", e.what());
  }
}

// The sample shape's values against the first layer's weights [width, inputs], before anything is built from
// the shape: a corrupt sprintnet.sample_shape overflowed the element count naming no file, or sized a model
// that filled the memory. `source` says where the shape came from.
std::int64_t first_layer_inputs(const SafetensorsFile& weights, const Shape& sample_shape, std::string_view source,
                                std::string_view hint, std::string_view origin) {
  constexpr std::string_view kFirstWeight = "0.weight";
  const auto first = std::find_if(weights.tensors.begin(), weights.tensors.end(),
                                  [&](const auto& named) { return named.first == kFirstWeight; });
  SN_CHECK(first != weights.tensors.end(), "{}: no tensor '{}' for the first layer", origin, kFirstWeight);
  const Tensor& weight = first->second;
  SN_CHECK(weight.dim() == 2 && weight.size(1) >= 1, "{}: tensor '{}' has shape {}, expected [width, inputs]", origin,
           kFirstWeight, shape_str(weight.shape()));
  std::int64_t values = 1;
  bool overflow = false;
  for (const std::int64_t extent : sample_shape) overflow = overflow || __builtin_mul_overflow(values, extent, &values);
  SN_CHECK(!overflow && values == weight.size(1),
           "{}: {} makes samples of {} values, but the first layer '{}' {} takes {} inputs; {}", origin, source,
           overflow ? std::string("more than 2^63") : std::to_string(values), kFirstWeight, shape_str(weight.shape()),
           weight.size(1), hint);
  return weight.size(1);
}

std::int64_t eval_batch_size(const LoadedModel& model, std::int64_t samples) {
  return std::max<std::int64_t>(1, std::min(model.config.train.eval_batch_size, samples));
}

// The config's model.activation, held to the one the weights were trained with where they record it: the layers'
// shapes are the same for every activation, so another one evaluated another model without a word. A model
// without hidden layers applies none, so any is the same model. `with_set`: the config has --set overrides.
Activation checked_activation(const Metadata& metadata, const LoadedModel& loaded, std::string_view origin,
                              bool with_set) {
  const std::string& configured = loaded.config.model.activation;
  const Activation activation = ops::parse_activation(configured);
  const std::string recorded = metadata_value(metadata, kMetadataActivation);
  if (recorded.empty()) return activation;  // PyTorch's files and older runs: the config's
  std::optional<Activation> trained;
  try {
    trained = ops::parse_activation(recorded);
  } catch (const Error&) {
    SN_FAIL("{}: metadata '{}' = \"{}\" is not an activation (identity, relu, gelu, tanh, sigmoid or silu); the "
            "metadata is corrupt", origin, kMetadataActivation, recorded);
  }
  SN_CHECK(*trained == activation || loaded.config.model.hidden.empty(),
           "{}: metadata '{}' = \"{}\": the weights were trained with that activation, but the config's "
           "model.activation = \"{}\" ({}{}); were they trained with another config?",
           origin, kMetadataActivation, recorded, configured, loaded.files.config.string(),
           with_set ? " with --set overrides" : "");
  return activation;
}

}  // namespace

Shape without_unit_dims(const Shape& shape) {
  Shape out;
  std::copy_if(shape.begin(), shape.end(), std::back_inserter(out), [](std::int64_t d) { return d != 1; });
  return out;
}

Metadata inference_metadata(const Normalization& norm, const Shape& sample_shape, Activation activation) {
  std::string shape;
  for (std::size_t i = 0; i < sample_shape.size(); ++i) shape += fmt::format("{}{}", i ? "x" : "", sample_shape[i]);
  // fmt's "{}" writes the shortest text that reads back as the same double.
  return {{std::string(kMetadataNormalizationScale), fmt::format("{}", norm.scale)},
          {std::string(kMetadataNormalizationShift), fmt::format("{}", norm.shift)},
          {std::string(kMetadataSampleShape), shape},
          {std::string(kMetadataActivation), std::string(ops::activation_name(activation))}};
}

CheckpointFiles find_checkpoint_files(const std::filesystem::path& checkpoint,
                                      const std::optional<std::filesystem::path>& config) {
  std::error_code ec;
  const auto status = std::filesystem::status(checkpoint, ec);
  SN_CHECK(std::filesystem::exists(status), "checkpoint {}: no such file or directory", checkpoint.string());
  CheckpointFiles files;
  if (std::filesystem::is_directory(status)) {
    files.weights = checkpoint / kWeightsFileName;
    // A path that is there but is no file (a directory of that name) is named as what it is, not as missing.
    const std::optional<std::string> problem = file_problem(files.weights);
    SN_CHECK(!problem || *problem == kNoSuchFile, "checkpoint {}: {}: {}", checkpoint.string(),
             files.weights.string(), problem.value_or(""));
    if (problem) {
      const auto latest = newest_checkpoint_weights(checkpoint);
      SN_FAIL(
          "checkpoint {}: no {} in this directory ({}); pass a run directory of `sprintnet train` or a "
          ".safetensors file",
          checkpoint.string(), kWeightsFileName,
          latest ? fmt::format("training may not have finished: the latest checkpoint is {}", latest->string())
                 : std::string("it is not a finished run directory"));
    }
  } else {
    files.weights = checkpoint;
  }

  if (config) {
    const std::optional<std::string> problem = file_problem(*config);
    SN_CHECK(!problem, "config {}: {}", config->string(), problem.value_or(""));
    files.config = *config;
    return files;
  }
  const std::filesystem::path folder = files.weights.parent_path();
  std::vector<std::filesystem::path> tried = {folder / kConfigFileName};
  // <run>/checkpoints/epoch-NNNN/model.safetensors: the run's config is two levels up.
  if (folder.parent_path().filename() == kCheckpointsDirName) {
    tried.push_back(folder.parent_path().parent_path() / kConfigFileName);
  }
  for (const auto& candidate : tried) {
    const std::optional<std::string> problem = file_problem(candidate);
    if (!problem) {
      files.config = candidate;
      return files;
    }
    SN_CHECK(*problem == kNoSuchFile, "checkpoint {}: config {}: {}; pass the config it was trained with (--config FILE)",
             checkpoint.string(), candidate.string(), *problem);
  }
  std::string tried_list;
  for (const auto& candidate : tried)
    tried_list += fmt::format("{}{}", tried_list.empty() ? "" : ", ", candidate.string());
  SN_FAIL("checkpoint {}: no config found (looked for {}); pass the config it was trained with (--config FILE)",
          checkpoint.string(), tried_list);
}

LoadedModel load_model(const std::filesystem::path& checkpoint, const LoadOptions& options) {
  LoadedModel loaded;
  loaded.files = find_checkpoint_files(checkpoint, options.config);
  loaded.config = load_config(loaded.files.config, options.overrides);
  const std::string origin = loaded.files.weights.string();
  const SafetensorsFile weights = load_safetensors(loaded.files.weights);

  const std::string scale = metadata_value(weights.metadata, kMetadataNormalizationScale);
  const std::string shift = metadata_value(weights.metadata, kMetadataNormalizationShift);
  const std::string shape = metadata_value(weights.metadata, kMetadataSampleShape);
  const bool has_normalization = !scale.empty() && !shift.empty();
  if (has_normalization) {
    loaded.normalization = {parse_double(scale, kMetadataNormalizationScale, origin),
                            parse_double(shift, kMetadataNormalizationShift, origin)};
    // Training writes 1/255 or 1/(255 x the pixels' standard deviation), which is > 0 (make_normalization): 0
    // would give every input the same value and so one prediction for all, a negative scale inverted images.
    SN_CHECK(loaded.normalization.scale > 0.0,
             "{}: metadata '{}' = \"{}\" is not positive: the scale training writes (1/255, or 1/(255 x the pixels' "
             "standard deviation)) always is; the metadata is corrupt",
             origin, kMetadataNormalizationScale, scale);
  } else if (loaded.config.data.normalize == "unit") {
    loaded.normalization = make_normalization(Dataset{}, "unit");  // needs no pixels
  }
  if (!shape.empty()) loaded.sample_shape = parse_sample_shape(shape, origin);
  const bool need_normalization = !has_normalization && loaded.config.data.normalize != "unit";
  if (need_normalization || shape.empty()) recompute_from_training_data(loaded, need_normalization, shape.empty());

  loaded.spec.outputs = output_width(weights, loaded.config.model, origin);  // first: it checks the layer count
  const bool shape_from_data = shape.empty();
  const std::string shape_source =
      shape_from_data ? fmt::format("the training images (samples of shape {})", shape_str(loaded.sample_shape))
                      : fmt::format("metadata '{}' = \"{}\"", kMetadataSampleShape, shape);
  loaded.spec.inputs =
      first_layer_inputs(weights, loaded.sample_shape, shape_source,
                         shape_from_data ? "were they trained on other data?" : "the metadata is corrupt", origin);
  loaded.spec.hidden = loaded.config.model.hidden;
  loaded.spec.activation = checked_activation(weights.metadata, loaded, origin, !options.overrides.empty());
  loaded.spec.bias = loaded.config.model.bias;
  loaded.spec.init = nn::parse_init(loaded.config.model.init);

  DeviceConfig device_config = loaded.config.device;
  device_config.name = options.device;
  // The model is what first goes on the device: no room for it gets the advice that no room to
  // evaluate or predict gets (--device cpu), naming the config that sized it.
  advise_on_out_of_memory(loaded.files.config, loaded.config, MemoryUse::kInference, [&] {
    loaded.device = resolve_device(device_config);
    set_cpu_threads(static_cast<int>(loaded.config.device.threads));
    // The initial values are overwritten at once; the generator only has to exist.
    Generator unused(loaded.config.seed);
    loaded.model = nn::make_mlp(loaded.spec, unused, loaded.device, DType::kF32);
    load_model_weights(*loaded.model, weights.tensors, origin);
  });
  loaded.model->eval();
  return loaded;
}

std::string model_summary(LoadedModel& model) {
  std::string widths = std::to_string(model.spec.inputs);
  for (const std::int64_t h : model.spec.hidden) widths += fmt::format("-{}", h);
  widths += fmt::format("-{}", model.spec.outputs);
  return fmt::format("MLP {} ({}), {} parameters", widths, ops::activation_name(model.spec.activation),
                     model.model->parameter_count());
}

ConfusionMatrix::ConfusionMatrix(std::int64_t num_classes) : classes(num_classes) {
  SN_CHECK(num_classes >= 0 && num_classes <= kMaxClasses, "a confusion matrix holds 0 to {} classes, got {}", kMaxClasses,
           num_classes);
  class_totals_.assign(static_cast<std::size_t>(num_classes), 0);
}

void ConfusionMatrix::check_cell(std::int64_t truth, std::int64_t predicted) const {
  SN_CHECK(truth >= 0 && truth < classes && predicted >= 0 && predicted < classes,
           "confusion matrix cell ({}, {}) is outside {} classes", truth, predicted, classes);
}

std::int64_t ConfusionMatrix::at(std::int64_t truth, std::int64_t predicted) const {
  check_cell(truth, predicted);
  const auto cell = cells_.find({truth, predicted});
  return cell == cells_.end() ? 0 : cell->second;
}

void ConfusionMatrix::add(std::int64_t truth, std::int64_t predicted) {
  check_cell(truth, predicted);
  ++cells_[{truth, predicted}];
  ++class_totals_[static_cast<std::size_t>(truth)];
  ++total_;
  if (truth == predicted) ++correct_;
}

std::int64_t ConfusionMatrix::class_total(std::int64_t truth) const {
  check_cell(truth, truth);
  return class_totals_[static_cast<std::size_t>(truth)];
}

double ConfusionMatrix::class_accuracy(std::int64_t truth) const {
  const std::int64_t n = class_total(truth);
  return n == 0 ? std::numeric_limits<double>::quiet_NaN()
                : static_cast<double>(at(truth, truth)) / static_cast<double>(n);
}

std::int64_t ConfusionMatrix::largest_cell() const {
  std::int64_t largest = 0;
  for (const auto& [cell, count] : cells_) largest = std::max(largest, count);
  return largest;
}

Evaluation evaluate_with_confusion(nn::Module& model, BatchLoader& loader, std::string_view loss_type,
                                   std::int64_t classes) {
  Evaluation out{{}, ConfusionMatrix(classes)};
  out.result = evaluate(model, loader, loss_type, [&](const Tensor& logits, const Tensor& labels) {
    SN_CHECK(logits.dim() == 2 && logits.size(1) == classes, "the model gives logits of shape {}, expected [N, {}]",
             shape_str(logits.shape()), classes);
    const std::vector<float> host_logits = logits.to_vector<float>();
    const std::vector<std::int32_t> host_labels = labels.to_vector<std::int32_t>();
    for (std::size_t r = 0; r < host_labels.size(); ++r) {
      const float* row = &host_logits[r * static_cast<std::size_t>(classes)];
      // First maximum wins, as ops::count_correct decides.
      std::int64_t best = 0;
      bool finite = true;
      for (std::int64_t c = 0; c < classes; ++c) {
        if (row[c] > row[best]) best = c;
        if (std::isfinite(row[c])) {
          out.largest_output = std::max(out.largest_output, std::abs(static_cast<double>(row[c])));
        } else {
          finite = false;
        }
      }
      if (!finite) ++out.samples_not_finite;
      out.confusion.add(host_labels[r], best);
    }
  });
  return out;
}

Evaluation evaluate_dataset(LoadedModel& model, const Dataset& data) {
  check_matches_model(data, model);
  const LoaderOptions options{eval_batch_size(model, data.size()), false, false, 0};
  BatchLoader loader(data, model.normalization, options, model.device, DType::kF32);
  Evaluation evaluation = evaluate_with_confusion(*model.model, loader, model.config.loss.type, model.num_classes());
  // A loss that is not finite makes the accuracy an artefact (argmax of NaN): refused, saying why. Outputs that are
  // not finite, predict refuses too. Finite outputs, however large (a bias of 3e38), it takes, and their loss is
  // finite here too, summed in double (train::evaluate); it overflows only where a backend computes it in float
  // (the GPU's MSE adds a row's squares in float: outputs past ~1.8e19).
  SN_CHECK(std::isfinite(evaluation.result.loss) || evaluation.samples_not_finite > 0,
           "{}: the model's {} loss on {} is not finite, though every output is (the largest in magnitude {:g}): the "
           "outputs are so large that their loss overflows (are the weights?)",
           model.files.weights.string(), model.config.loss.type, data.name, evaluation.largest_output);
  SN_CHECK(std::isfinite(evaluation.result.loss),
           "{}: the model's {} loss on {} is not finite: its outputs are not finite for {} of the {} samples (are the "
           "weights?)",
           model.files.weights.string(), model.config.loss.type, data.name, evaluation.samples_not_finite,
           evaluation.result.samples);
  return evaluation;
}

Dataset load_split(const LoadedModel& model, std::string_view split) {
  SN_CHECK(split == "test" || split == "train", "split \"{}\" is not known; accepted: test, train", split);
  const DataConfig& config = model.config.data;
  const bool test = split == "test";
  const std::int64_t limit = test ? config.test_limit : config.train_limit;
  SN_CHECK(limit >= 0, "data.{}_limit = {} is negative (0 keeps every sample)", split, limit);
  // This split's files only: the test set evaluates without the training files (the weights' metadata holds what
  // inference took from them).
  const SplitFiles files = dataset_split_files(config, test ? Split::kTest : Split::kTrain);
  Dataset data = load_idx_dataset(files.images, files.labels, model.num_classes(), limit);
  data.name = fmt::format("{}/{}", config.dataset, split);
  check_matches_model(data, model);
  return data;
}

// The same number of values is not enough: 14x56 images hold 784 values too, laid out as another picture.
// Flat samples (one dimension) and dimensions of 1 (a channel of 1) are the same layout.
void check_matches_model(const Dataset& data, const LoadedModel& model) {
  SN_CHECK(data.images.size(1) == model.spec.inputs,
           "{} holds samples of shape {} ({} values), the model takes {} inputs (samples of shape {})", data.name,
           shape_str(data.sample_shape), data.images.size(1), model.spec.inputs, shape_str(model.sample_shape));
  const Shape data_shape = without_unit_dims(data.sample_shape), model_shape = without_unit_dims(model.sample_shape);
  SN_CHECK(data_shape.size() <= 1 || model_shape.size() <= 1 || data_shape == model_shape,
           "{} holds samples of shape {}, the model was trained on samples of shape {}: the same {} values, laid out "
           "as another picture",
           data.name, shape_str(data.sample_shape), shape_str(model.sample_shape), model.spec.inputs);
}

Dataset load_idx_for_model(const LoadedModel& model, const std::filesystem::path& images,
                           const std::filesystem::path& labels) {
  Dataset data = load_idx_dataset(images, labels, model.num_classes());
  data.name = images.string();
  check_matches_model(data, model);
  return data;
}

std::vector<std::string> class_names(std::string_view dataset, std::int64_t classes) {
  // Fashion-MNIST's label order, from its README.
  static const std::vector<std::string> kFashionMnist = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                         "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  if (dataset == "fashion-mnist" && classes == static_cast<std::int64_t>(kFashionMnist.size())) return kFashionMnist;
  return {};
}

std::vector<Prediction> predict(LoadedModel& model, const Tensor& images, std::int64_t top_k,
                                std::span<const std::string> input_names) {
  SN_CHECK(top_k >= 1, "top-k must be at least 1, got {}", top_k);
  SN_CHECK(images.dtype() == DType::kU8 && images.dim() == 2, "predict takes uint8 images [N, D], got {} {}",
           dtype_name(images.dtype()), shape_str(images.shape()));
  SN_CHECK(images.size(1) == model.spec.inputs, "predict: images of {} values, the model takes {} inputs",
           images.size(1), model.spec.inputs);
  const std::int64_t n = images.size(0);
  SN_CHECK(input_names.empty() || std::ssize(input_names) == n, "predict: {} input names for {} images",
           input_names.size(), n);
  if (n == 0) return {};
  const std::int64_t classes = model.num_classes();
  const auto k = static_cast<std::size_t>(std::min(top_k, classes));

  // Through the same loader as evaluation, so the inputs are normalised on the device exactly as in training.
  const Dataset data{"predict inputs", images, Tensor::zeros({n}, DType::kI32), model.sample_shape, classes};
  BatchLoader loader(data, model.normalization, {eval_batch_size(model, n), false, false, 0}, model.device,
                     DType::kF32);
  model.model->eval();
  std::vector<Prediction> out;
  out.reserve(static_cast<std::size_t>(n));
  std::vector<std::int64_t> order(static_cast<std::size_t>(classes));
  for (std::int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    const Batch batch = loader.batch(b);
    const std::vector<float> logits = model.model->forward(batch.inputs).to_vector<float>();
    for (std::int64_t r = 0; r < batch.inputs.size(0); ++r) {
      const float* row = &logits[static_cast<std::size_t>(r * classes)];
      SN_CHECK(std::all_of(row, row + classes, [](float v) { return std::isfinite(v); }),
               "the model's output for {} is not finite (are the weights?)",
               input_names.empty() ? fmt::format("input {} (from 0)", out.size()) : input_names[out.size()]);
      // Ranked by logit (equal logits: lower class first, as the argmax); the probabilities follow the same order.
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [row](std::int64_t a, std::int64_t c) { return row[a] > row[c]; });
      Prediction prediction;
      prediction.label = order[0];
      const double max_logit = row[order[0]];
      prediction.probabilities.resize(static_cast<std::size_t>(classes));
      double sum = 0.0;
      for (std::size_t c = 0; c < prediction.probabilities.size(); ++c) {
        prediction.probabilities[c] = std::exp(static_cast<double>(row[c]) - max_logit);
        sum += prediction.probabilities[c];
      }
      for (double& p : prediction.probabilities) p /= sum;
      for (std::size_t i = 0; i < k; ++i) {
        prediction.top.push_back({order[i], prediction.probabilities[static_cast<std::size_t>(order[i])]});
      }
      out.push_back(std::move(prediction));
    }
  }
  return out;
}

}  // namespace sprintnet::train
