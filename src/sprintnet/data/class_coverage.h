#pragma once
// Classes a data set leaves without samples: a training labels file whose labels are all 200
// would otherwise train a 201-class model without a word.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sprintnet/data/dataset.h"

namespace sprintnet {

// The classes in [0, data.num_classes) no sample of `data` has, ascending.
std::vector<std::int64_t> classes_without_samples(const Dataset& data);
// "0-2, 5, 7-9": ascending classes as ranges.
std::string format_class_list(const std::vector<std::int64_t>& classes);
// A warning naming the training set's empty classes and the labels file, or nothing when every class has samples.
std::optional<std::string> empty_classes_warning(const Dataset& train, const std::string& labels_file);

}  // namespace sprintnet
