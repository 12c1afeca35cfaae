#pragma once
// Small helpers shared by the benchmark programs.
#include <charconv>
#include <string_view>
#include <vector>

#include "sprintnet/core/error.h"
#include "sprintnet/core/random.h"
#include "sprintnet/core/tensor.h"
#include "sprintnet/data/dataset.h"

namespace sprintnet::bench {

// "LxHxB": L linear layers, hidden width H, batch B (BASELINES.md's notation).
struct MlpShape {
  std::int64_t layers = 0, width = 0, batch = 0;
};

inline MlpShape parse_shape(std::string_view text) {
  MlpShape shape;
  std::int64_t* fields[] = {&shape.layers, &shape.width, &shape.batch};
  std::size_t pos = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t end = i < 2 ? text.find('x', pos) : text.size();
    SN_CHECK(end != std::string_view::npos, "config '{}': expected LxHxB, e.g. 4x784x128", text);
    auto [ptr, ec] = std::from_chars(text.data() + pos, text.data() + end, *fields[i]);
    SN_CHECK(ec == std::errc() && ptr == text.data() + end && *fields[i] >= 1,
             "config '{}': expected LxHxB with positive integers", text);
    pos = end + 1;
  }
  return shape;
}

inline Tensor random_tensor(const Shape& shape, Generator& gen, Device device) {
  std::vector<float> values(static_cast<std::size_t>(shape_numel(shape)));
  for (float& v : values) v = static_cast<float>(gen.normal());
  return Tensor::from_vector(values, shape, device);
}

// A data set of `n` random uint8 images of `features` pixels and random labels.
inline Dataset random_dataset(std::int64_t n, std::int64_t features, std::int64_t classes, Generator& gen) {
  Dataset data;
  data.name = "random";
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(n * features));
  for (auto& p : pixels) p = static_cast<std::uint8_t>(gen.below(256));
  data.images = Tensor::from_vector(pixels, {n, features});
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  for (auto& y : labels) y = static_cast<std::int32_t>(gen.below(static_cast<std::uint64_t>(classes)));
  data.labels = Tensor::from_vector(labels, {n});
  data.sample_shape = {features};
  data.num_classes = classes;
  return data;
}

inline Tensor random_labels(std::int64_t n, std::int64_t classes, Generator& gen, Device device) {
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  for (auto& y : labels) y = static_cast<std::int32_t>(gen.below(static_cast<std::uint64_t>(classes)));
  return Tensor::from_vector(labels, {n}, device);
}

}  // namespace sprintnet::bench
