#include "sprintnet/data/class_coverage.h"

#include <fmt/format.h>

namespace sprintnet {

std::vector<std::int64_t> classes_without_samples(const Dataset& data) {
  std::vector<bool> seen(static_cast<std::size_t>(data.num_classes), false);
  for (const std::int32_t label : data.labels.span<std::int32_t>()) {
    if (label >= 0 && label < data.num_classes) seen[static_cast<std::size_t>(label)] = true;
  }
  std::vector<std::int64_t> empty;
  for (std::int64_t c = 0; c < data.num_classes; ++c) {
    if (!seen[static_cast<std::size_t>(c)]) empty.push_back(c);
  }
  return empty;
}

std::string format_class_list(const std::vector<std::int64_t>& classes) {
  std::string out;
  for (std::size_t i = 0; i < classes.size();) {
    std::size_t j = i;
    while (j + 1 < classes.size() && classes[j + 1] == classes[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? fmt::format("{}", classes[i]) : fmt::format("{}-{}", classes[i], classes[j]);
    i = j + 1;
  }
  return out;
}

std::optional<std::string> empty_classes_warning(const Dataset& train, const std::string& labels_file) {
  const std::vector<std::int64_t> empty = classes_without_samples(train);
  if (empty.empty()) return std::nullopt;
  return fmt::format("{}: {} of the model's {} classes have no training samples: {} (the class count is model.classes, "
                     "or the largest training label + 1 when that is 0)",
                     labels_file, empty.size(), train.num_classes, format_class_list(empty));
}

}  // namespace sprintnet
