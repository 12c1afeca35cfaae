#pragma once
// Feeds a training or evaluation loop with batches on the training device.
// The uint8 images go to the device once; each batch is gathered and
// normalised there (ops::gather_rows_u8), so the host only supplies the
// epoch's sample order (a Philox permutation, see core/random.h).
#include <cstdint>
#include <vector>

#include "sprintnet/core/tensor.h"
#include "sprintnet/data/dataset.h"

namespace sprintnet::train {

struct Batch {
  Tensor inputs;  // [B, D], float
  Tensor labels;  // [B], int32
};

struct LoaderOptions {
  std::int64_t batch_size = 128;
  bool shuffle = true;
  bool drop_last = true;
  std::uint64_t seed = 0;
};

class BatchLoader {
 public:
  BatchLoader(const Dataset& data, const Normalization& norm, const LoaderOptions& options, Device device,
              DType dtype = DType::kF32);

  std::int64_t batches_per_epoch() const;
  std::int64_t samples() const { return samples_; }
  std::int64_t features() const { return features_; }
  // Samples one epoch visits (fewer than samples() when drop_last drops a partial batch).
  std::int64_t samples_per_epoch() const { return std::min(samples_, batches_per_epoch() * options_.batch_size); }
  Device device() const { return device_; }
  const LoaderOptions& options() const { return options_; }
  const Normalization& normalization() const { return norm_; }
  // The whole data set on the device: uint8 [N, D] images, int32 [N] labels.
  const Tensor& images() const { return images_; }
  const Tensor& labels() const { return labels_; }
  // Fixes the order of epoch `epoch` (0-based); batches then come from batch().
  void start_epoch(std::int64_t epoch);
  // Batch `index` of the current epoch, 0 <= index < batches_per_epoch().
  // The returned tensors are reused by the next call of the same batch size.
  Batch batch(std::int64_t index);
  // For evaluation: every sample once, in the data set's order, whatever the options' shuffle and drop_last
  // (the last batch partial), without touching the epoch's order. 0 <= index < batches_in_order().
  std::int64_t batches_in_order() const {
    return samples_ / options_.batch_size + (samples_ % options_.batch_size != 0 ? 1 : 0);  // no overflow
  }
  Batch batch_in_order(std::int64_t index);

 private:
  Batch gathered(const Tensor& order, std::int64_t index);  // batch `index` of the samples in `order`

  Tensor images_, labels_;   // on the device: uint8 [N, D] and int32 [N]
  Tensor order_;             // int32 [N] sample order of this epoch, on the device
  Tensor identity_;          // int32 [N] 0, 1, ..., N-1 on the device, made by the first batch_in_order()
  Normalization norm_;
  LoaderOptions options_;
  std::int64_t samples_, features_;
  Device device_;
  DType dtype_;
  Batch full_batch_;         // reused buffers for full-size batches
};

}  // namespace sprintnet::train
