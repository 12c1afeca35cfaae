#include "sprintnet/data/dataset.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "sprintnet/data/class_coverage.h"
#include "sprintnet/data/idx.h"

namespace sprintnet {
namespace {

// Label values in host order, whatever the file's element type.
std::vector<std::int32_t> decode_labels(const IdxArray& labels) {
  const auto n = static_cast<std::size_t>(labels.dims[0]);
  std::vector<std::int32_t> values(n);
  const std::uint8_t* p = labels.bytes.data();
  if (labels.type == IdxType::kU8) {
    std::copy(p, p + n, values.begin());
    return values;
  }
  for (std::size_t i = 0; i < n; ++i, p += 4) {  // int32, big-endian
    const std::uint32_t u = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
                            std::uint32_t{p[3]};
    values[i] = static_cast<std::int32_t>(u);
  }
  return values;
}

// Checks every label against num_classes (> 0), or infers it; returns the number of classes.
std::int64_t check_labels(const std::vector<std::int32_t>& values, std::int64_t num_classes, const std::string& what) {
  std::int64_t max_label = -1;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::int64_t v = values[i];
    if (num_classes > 0) {
      SN_CHECK(v >= 0 && v < num_classes, "{}: label {} at index {} is outside [0, {}) (model.classes, or the training "
               "labels' largest + 1)", what, v, i, num_classes);
    } else {
      SN_CHECK(v >= 0, "{}: label {} at index {} is negative", what, v, i);
    }
    max_label = std::max(max_label, v);
  }
  if (num_classes > 0) return num_classes;
  SN_CHECK(max_label < kMaxClasses, "{}: largest label is {}, which would mean {} classes (at most {} are accepted)",
           what, max_label, max_label + 1, kMaxClasses);
  return max_label + 1;
}

// An IDX file of images: uint8, [N, sample dims...]. `what` names it in errors.
IdxArray checked_images(IdxArray images, const std::string& what) {
  SN_CHECK(images.type == IdxType::kU8, "{}: elements are {}; images must be uint8", what, idx_type_name(images.type));
  SN_CHECK(images.dims.size() >= 2,
           "{}: has 1 dimension ({} values); images need [N, sample dims...] such as [60000, 28, 28] "
           "(is this a labels file?)",
           what, images.dims[0]);
  return images;
}

// The first `kept` samples of `images` as a uint8 [kept, D] tensor, with their sample shape.
void take_samples(const IdxArray& images, std::int64_t kept, Dataset& data) {
  data.sample_shape.assign(images.dims.begin() + 1, images.dims.end());
  data.images = Tensor::empty({kept, shape_numel(data.sample_shape)}, DType::kU8);
  std::memcpy(data.images.raw_data(), images.bytes.data(), data.images.nbytes());
}

}  // namespace

Dataset parse_idx_images(std::span<const std::uint8_t> file_bytes, const std::string& origin) {
  const IdxArray images = checked_images(parse_idx(file_bytes, origin), fmt::format("images file {}", origin));
  Dataset data;
  data.name = origin;
  take_samples(images, images.dims[0], data);
  return data;
}

Dataset load_idx_dataset(const std::filesystem::path& images_path, const std::filesystem::path& labels_path,
                         std::int64_t num_classes, std::int64_t limit) {
  SN_CHECK(num_classes >= 0 && num_classes <= kMaxClasses, "load_idx_dataset({}): num_classes {} is outside [0, {}]",
           images_path.string(), num_classes, kMaxClasses);
  SN_CHECK(limit >= 0, "load_idx_dataset({}): limit {} is negative (0 keeps every sample)", images_path.string(), limit);

  const std::string images_what = fmt::format("images file {}", images_path.string());
  const std::string labels_what = fmt::format("labels file {}", labels_path.string());
  const IdxArray images = checked_images(read_idx(images_path), images_what);
  const IdxArray labels = read_idx(labels_path);
  SN_CHECK(labels.type == IdxType::kU8 || labels.type == IdxType::kI32, "{}: elements are {}; labels must be uint8 or int32",
           labels_what, idx_type_name(labels.type));
  SN_CHECK(labels.dims.size() == 1, "{}: has {} dimensions; labels need exactly one, [N] (is this an images file?)",
           labels_what, labels.dims.size());
  const std::int64_t count = images.dims[0];
  SN_CHECK(labels.dims[0] == count, "{} has {} samples, {} has {}; they must match", images_what, count, labels_what,
           labels.dims[0]);

  std::vector<std::int32_t> values = decode_labels(labels);
  Dataset data;
  data.name = images_path.filename().string();
  data.num_classes = check_labels(values, num_classes, labels_what);
  const std::int64_t kept = limit > 0 ? std::min(limit, count) : count;
  take_samples(images, kept, data);
  values.resize(static_cast<std::size_t>(kept));
  data.labels = Tensor::from_vector(values, {kept});
  return data;
}

TrainTestData load_train_test(const DataConfig& config, std::int64_t classes) {
  SN_CHECK(config.train_limit >= 0, "data.train_limit = {} is negative (0 keeps every sample)", config.train_limit);
  SN_CHECK(config.test_limit >= 0, "data.test_limit = {} is negative (0 keeps every sample)", config.test_limit);
  const DatasetFiles files = dataset_files(config);
  TrainTestData data;
  data.train = load_idx_dataset(files.train_images, files.train_labels, classes, config.train_limit);
  if (const auto warning = empty_classes_warning(data.train, files.train_labels.string())) {
    std::fprintf(stderr, "sprintnet: warning: %s\n", warning->c_str());
  }
  // The model's output width comes from the training labels; a test label past it could never be predicted.
  data.test = load_idx_dataset(files.test_images, files.test_labels, data.train.num_classes, config.test_limit);
  SN_CHECK(data.train.sample_shape == data.test.sample_shape,
           "training images {} hold samples of shape {}, test images {} hold {}; they must match",
           files.train_images.string(), shape_str(data.train.sample_shape), files.test_images.string(),
           shape_str(data.test.sample_shape));
  data.train.name = config.dataset + "/train";
  data.test.name = config.dataset + "/test";
  return data;
}

}  // namespace sprintnet
