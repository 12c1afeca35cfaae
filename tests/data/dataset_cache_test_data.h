#pragma once
// A small random LoadedData (train and test splits of uint8 images and int32 labels) for the
// on_device() tests.
#include <cstdint>

#include "sprintnet/core/random.h"
#include "sprintnet/data/dataset_cache.h"
#include "support/test_util.h"

namespace sprintnet::test {

inline LoadedData random_loaded_data(Generator& gen) {
  LoadedData loaded;
  loaded.data.train = random_dataset("random/train", 300, 37, 10, gen);
  loaded.data.test = random_dataset("random/test", 70, 37, 10, gen);
  return loaded;
}

}  // namespace sprintnet::test
