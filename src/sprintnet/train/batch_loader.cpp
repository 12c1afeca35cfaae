#include "sprintnet/train/batch_loader.h"

#include <algorithm>
#include <numeric>

#include "sprintnet/core/random.h"
#include "sprintnet/io/progress_format.h"
#include "sprintnet/ops/ops.h"

namespace sprintnet::train {
namespace {

// The data set's shapes, checked before anything reads them: [samples, features] images, one label each.
const Dataset& checked(const Dataset& data) {
  SN_CHECK(data.images.defined() && data.labels.defined(), "dataset '{}' has no {}", data.name,
           data.images.defined() ? "labels" : "images");
  SN_CHECK(data.images.dim() == 2, "dataset '{}': images must be [samples, features], got {}", data.name,
           shape_str(data.images.shape()));
  SN_CHECK(data.labels.dim() == 1 && data.labels.size(0) == data.images.size(0),
           "dataset '{}' has {} images and labels of shape {}: one label an image is needed", data.name,
           data.images.size(0), shape_str(data.labels.shape()));
  return data;
}

}  // namespace

BatchLoader::BatchLoader(const Dataset& data, const Normalization& norm, const LoaderOptions& options, Device device,
                         DType dtype)
    : images_(checked(data).images.to(device)), labels_(data.labels.to(device)), norm_(norm), options_(options),
      samples_(data.size()), features_(data.images.size(1)), device_(device), dtype_(dtype) {
  SN_CHECK(options.batch_size >= 1, "batch size must be >= 1, got {}", options.batch_size);
  SN_CHECK(samples_ >= 1, "dataset '{}' is empty", data.name);
  // drop_last is the training loader's (evaluation keeps every sample), so the keys named are train.*.
  SN_CHECK(!options.drop_last || samples_ >= options.batch_size,
           "dataset '{}' has {}, fewer than one batch of {} (train.batch_size), and train.drop_last = true drops "
           "that partial batch, leaving an epoch without a step: set train.batch_size to at most {} or "
           "train.drop_last = false (or raise data.train_limit, if it cut the data set short)",
           data.name, counted(samples_, "sample"), options.batch_size, samples_);
  // No batch holds more rows than the data set: a batch_size beyond it (drop_last off) takes what there is.
  const std::int64_t rows = std::min(options.batch_size, samples_);
  full_batch_ = {Tensor::empty({rows, features_}, dtype, device), Tensor::empty({rows}, DType::kI32, device)};
  start_epoch(0);
}

std::int64_t BatchLoader::batches_per_epoch() const {
  const std::int64_t full = samples_ / options_.batch_size;
  return options_.drop_last || samples_ % options_.batch_size == 0 ? full : full + 1;
}

void BatchLoader::start_epoch(std::int64_t epoch) {
  std::vector<std::int32_t> order;
  if (options_.shuffle) {
    order = epoch_permutation(options_.seed, static_cast<std::uint64_t>(epoch), samples_);
  } else {
    order.resize(static_cast<std::size_t>(samples_));
    std::iota(order.begin(), order.end(), 0);
  }
  order_ = Tensor::from_vector(order, {samples_}, device_);
}

Batch BatchLoader::batch(std::int64_t index) {
  SN_CHECK(index >= 0 && index < batches_per_epoch(), "batch {} out of range [0, {})", index, batches_per_epoch());
  return gathered(order_, index);
}

Batch BatchLoader::batch_in_order(std::int64_t index) {
  SN_CHECK(index >= 0 && index < batches_in_order(), "batch {} out of range [0, {})", index, batches_in_order());
  if (!identity_.defined()) {
    std::vector<std::int32_t> identity(static_cast<std::size_t>(samples_));
    std::iota(identity.begin(), identity.end(), 0);
    identity_ = Tensor::from_vector(identity, {samples_}, device_);
  }
  return gathered(identity_, index);
}

Batch BatchLoader::gathered(const Tensor& order, std::int64_t index) {
  const std::int64_t begin = index * options_.batch_size;
  const std::int64_t end = std::min(samples_, begin + options_.batch_size);
  const Tensor indices = order.slice_rows(begin, end);
  Batch out = end - begin == options_.batch_size
                  ? full_batch_
                  : Batch{Tensor::empty({end - begin, features_}, dtype_, device_),
                          Tensor::empty({end - begin}, DType::kI32, device_)};
  ops::gather_rows_u8(images_, indices, out.inputs, norm_.scale, norm_.shift);
  ops::gather_labels(labels_, indices, out.labels);
  return out;
}

}  // namespace sprintnet::train
