#pragma once
// Using a trained model: load it back from what `sprintnet train` wrote,
// evaluate it with a confusion matrix, and predict classes with probabilities.
//
// A checkpoint is a run directory (config.toml + model.safetensors), a
// checkpoint directory (<run>/checkpoints/epoch-NNNN/ with model.safetensors),
// or a .safetensors file. The config is looked for beside the weights, then
// in the run directory two levels up (the checkpoints/ layout), unless given.
//
// The model is rebuilt from the config: hidden widths and activation from
// model.*, the output width from the last layer's weights (no label file has
// to be read). The input normalization and the image shape are read from the
// weights' metadata (kMetadata* keys) when the trainer recorded them;
// otherwise they are recomputed from the training images the config names,
// exactly as the Trainer computed them. The activation the trainer recorded
// must be the config's model.activation (the weights' shapes do not show it);
// weights without it (PyTorch's, older runs') take the config's.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sprintnet/data/dataset.h"
#include "sprintnet/io/config.h"
#include "sprintnet/io/safetensors.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/train/batch_loader.h"
#include "sprintnet/train/evaluate.h"

namespace sprintnet::train {

// Metadata keys that make a checkpoint self-contained for inference; see
// inference_metadata(). Values are decimal text (shortest round-trip for doubles).
inline constexpr std::string_view kMetadataNormalizationScale = "sprintnet.normalization.scale";
inline constexpr std::string_view kMetadataNormalizationShift = "sprintnet.normalization.shift";
inline constexpr std::string_view kMetadataSampleShape = "sprintnet.sample_shape";  // e.g. "28x28"
inline constexpr std::string_view kMetadataActivation = "sprintnet.activation";      // e.g. "relu"

// The metadata entries above for a model of `activation` trained with `norm` on samples of `sample_shape`.
Metadata inference_metadata(const Normalization& norm, const Shape& sample_shape, Activation activation);

// The extents other than 1: [1, 28, 28] and [28, 28, 1] are [28, 28], a picture of the same layout.
Shape without_unit_dims(const Shape& shape);

struct CheckpointFiles {
  std::filesystem::path weights;  // the .safetensors file
  std::filesystem::path config;   // the config.toml it was trained with
};

// Resolves a checkpoint argument as described above; `config` overrides the
// search. Throws naming the paths tried when something is missing.
CheckpointFiles find_checkpoint_files(const std::filesystem::path& checkpoint,
                                      const std::optional<std::filesystem::path>& config = std::nullopt);

struct LoadOptions {
  std::optional<std::filesystem::path> config;  // else found beside the weights
  std::vector<std::string> overrides;           // "key=value", applied to the config
  // Where to run. Not the config's device.name: where a model trained says
  // nothing about where it is used ("auto": first GPU, else the CPU).
  std::string device = "auto";
};

struct LoadedModel {
  CheckpointFiles files;
  Config config;
  nn::MlpSpec spec;
  std::unique_ptr<nn::Sequential> model;  // in eval mode
  Normalization normalization;
  Shape sample_shape;  // of one input, e.g. {28, 28}
  Device device;

  std::int64_t num_classes() const { return spec.outputs; }
};

// Out of device memory while the model goes on options.device: an OutOfMemoryError with the advice
// (train/out_of_memory_advice.h, MemoryUse::kInference) naming the config file and its keys.
LoadedModel load_model(const std::filesystem::path& checkpoint, const LoadOptions& options = {});
// One line for people: "MLP 784-32-10 (relu), 25450 parameters".
std::string model_summary(LoadedModel& model);

// Samples of true class t predicted as p. The cells that are not zero are kept, at most one a sample,
// so a model of kMaxClasses classes is evaluated in memory proportional to its samples, not to classes².
class ConfusionMatrix {
 public:
  std::int64_t classes = 0;

  explicit ConfusionMatrix(std::int64_t num_classes = 0);
  std::int64_t at(std::int64_t truth, std::int64_t predicted) const;
  void add(std::int64_t truth, std::int64_t predicted);
  std::int64_t total() const { return total_; }
  std::int64_t correct() const { return correct_; }    // the diagonal
  std::int64_t class_total(std::int64_t truth) const;  // row sum
  // correct / class_total of one true class (recall); NaN when the class has no sample.
  double class_accuracy(std::int64_t truth) const;
  std::int64_t largest_cell() const;  // 0 when empty
  // The cells that are not zero, keyed by (truth, predicted), in row-major order.
  const std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t>& cells() const { return cells_; }

 private:
  void check_cell(std::int64_t truth, std::int64_t predicted) const;

  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> cells_;
  std::vector<std::int64_t> class_totals_;
  std::int64_t total_ = 0, correct_ = 0;
};

struct Evaluation {
  EvalResult result;  // loss, accuracy, samples, correct: the same numbers train::evaluate gives
  ConfusionMatrix confusion;
  std::int64_t samples_not_finite = 0;  // samples with a NaN or an infinity among their outputs
  double largest_output = 0.0;          // the largest magnitude of the finite outputs
};

// train::evaluate plus the confusion matrix: the same ops in the same order
// (so loss and accuracy match it exactly), and each batch's predictions read
// back to the host. Predictions are the first maximum of the logits.
Evaluation evaluate_with_confusion(nn::Module& model, BatchLoader& loader, std::string_view loss_type,
                                   std::int64_t classes);
// A whole data set in batches of config.train.eval_batch_size, with the
// model's normalization and loss (config.loss.type). A loss that is not finite
// is an error naming the weights, and why: outputs that are not finite, or
// finite outputs too large for the loss.
Evaluation evaluate_dataset(LoadedModel& model, const Dataset& data);
// The data set a config names: `split` is "test" or "train", with
// data.test_limit / data.train_limit applied (what the Trainer used); labels
// are checked against the model's classes and the sample size against its inputs.
// Only that split's files are looked for.
Dataset load_split(const LoadedModel& model, std::string_view split);
// Explicit IDX files, checked the same way.
Dataset load_idx_for_model(const LoadedModel& model, const std::filesystem::path& images,
                           const std::filesystem::path& labels);
// The check above, for samples from anywhere (predict's IDX files): their values must be the model's inputs, laid
// out as its samples were ([N, 28, 28], [N, 1, 28, 28] and flat [N, 784] are one layout; [N, 14, 56] is another
// picture). Errors name data.name.
void check_matches_model(const Dataset& data, const LoadedModel& model);

struct ClassProbability {
  std::int64_t label = 0;
  double probability = 0.0;
};

struct Prediction {
  std::int64_t label = 0;             // argmax of the logits (first maximum)
  std::vector<double> probabilities;  // softmax over all classes
  std::vector<ClassProbability> top;  // the top_k most likely, most likely first
};

// Names of the classes of a known data set ("T-shirt/top", ... for
// fashion-mnist); empty when the classes are just numbers (mnist, idx).
std::vector<std::string> class_names(std::string_view dataset, std::int64_t classes);

// images: uint8 [N, D] raw pixels (as data sets hold them), D = product of
// sample_shape; normalised like the training data and run in batches. An output that is not finite
// is an error naming the input: input_names[i] where given (a file), else its position.
std::vector<Prediction> predict(LoadedModel& model, const Tensor& images, std::int64_t top_k,
                                std::span<const std::string> input_names = {});

}  // namespace sprintnet::train
