#pragma once
// Labelled image data sets held in memory as raw bytes: images stay uint8
// (a quarter of fp32's memory, and what the GPU gathers from), converted to
// floats per batch with a Normalization (see ops::gather_rows_u8).
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "sprintnet/core/tensor.h"
#include "sprintnet/io/config.h"

namespace sprintnet {

struct Dataset {
  std::string name;     // e.g. "mnist/train"
  Tensor images;        // uint8 [N, D], D = product of sample_shape
  Tensor labels;        // int32 [N], each in [0, num_classes)
  Shape sample_shape;   // e.g. {28, 28}
  std::int64_t num_classes = 0;

  std::int64_t size() const { return labels.defined() ? labels.numel() : 0; }
};

// Labels are accepted up to this many classes; more means a corrupt file
// (and an output layer nobody meant to build).
inline constexpr std::int64_t kMaxClasses = 1 << 16;

// Loads an IDX image file (uint8, [N, sample dims...], any image size) and an
// IDX label file (uint8 or int32, [N]). With num_classes > 0 every label must
// lie in [0, num_classes); with 0 it becomes max label + 1. Labels are checked
// and num_classes inferred over the whole file, then limit > 0 keeps the
// first `limit` samples (all of them when the file has fewer).
Dataset load_idx_dataset(const std::filesystem::path& images, const std::filesystem::path& labels,
                         std::int64_t num_classes = 0, std::int64_t limit = 0);

// The images half of load_idx_dataset, for inputs without labels, from an IDX file's bytes already in memory (idx.h's
// parse_idx: `predict` reads each input once): the same file checks and the same images [N, D] and sample_shape;
// labels stay undefined (images.size(0) counts the samples). `origin` names the file in errors and is the data
// set's name.
Dataset parse_idx_images(std::span<const std::uint8_t> file_bytes, const std::string& origin);

struct DatasetFiles {
  std::filesystem::path train_images, train_labels, test_images, test_labels;
};

// The four IDX files a DataConfig names: <dir>/mnist/ or <dir>/fashion-mnist/
// (each file raw or with ".gz"; raw preferred when both exist) as laid out by
// scripts/get-data, or the explicit data.* paths for dataset = "idx". Throws
// naming the config key or the missing path.
DatasetFiles dataset_files(const DataConfig& config);

enum class Split { kTrain, kTest };
struct SplitFiles {
  std::filesystem::path images, labels;
};
// The two files of one split, found as dataset_files finds them, without looking for the other split's: what
// evaluating one split needs (the test files of a data set whose training files are elsewhere).
SplitFiles dataset_split_files(const DataConfig& config, Split split);

struct TrainTestData {
  Dataset train, test;
};

// Both splits, with data.train_limit / data.test_limit applied. The test
// labels are checked against the training set's number of classes, and both
// splits must share one sample shape. `classes` > 0 (model.classes) fixes the class count, and
// a training label at or above it is an error naming the file; 0 takes the largest label + 1.
// A warning on stderr names the classes the training samples leave empty.
TrainTestData load_train_test(const DataConfig& config, std::int64_t classes = 0);

// Pixel transform applied when a batch is gathered: x = x_u8 * scale + shift.
struct Normalization {
  double scale = 1.0 / 255;
  double shift = 0.0;
};

// data.normalize: "unit" maps pixels to [0, 1]; "standard" further subtracts
// the mean and divides by the standard deviation of all training pixels
// (MNIST: 0.1307 and 0.3081), so inputs have zero mean and unit variance.
Normalization make_normalization(const Dataset& train, std::string_view mode);

}  // namespace sprintnet
