#pragma once
// A small random LoadedData (train and test splits of uint8 images and int32 labels) for the
// on_device() tests.
#include <cstdint>
#include <vector>

#include "sprintnet/core/random.h"
#include "sprintnet/data/dataset_cache.h"
#include "support/test_util.h"

namespace sprintnet::test {

inline Dataset random_split(const char* name, std::int64_t n, std::int64_t features, std::int64_t classes,
                            Generator& gen) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(n * features));
  for (auto& p : pixels) p = static_cast<std::uint8_t>(gen.below(256));
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  for (auto& l : labels) l = static_cast<std::int32_t>(gen.below(static_cast<std::uint64_t>(classes)));
  return Dataset{name, Tensor::from_vector(pixels, {n, features}), Tensor::from_vector(labels, {n}), {features},
                 classes};
}

inline LoadedData random_loaded_data(Generator& gen) {
  LoadedData loaded;
  loaded.data.train = random_split("random/train", 300, 37, 10, gen);
  loaded.data.test = random_split("random/test", 70, 37, 10, gen);
  return loaded;
}

}  // namespace sprintnet::test
