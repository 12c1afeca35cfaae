#pragma once
// Weight initialisation schemes, with PyTorch's definitions.
#include <string_view>

#include "sprintnet/core/random.h"
#include "sprintnet/core/tensor.h"

namespace sprintnet::nn {

enum class Init {
  kPyTorch,         // nn.Linear's default: weight, bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  kXavierUniform,   // U(-b, b), b = sqrt(6 / (fan_in + fan_out)); bias 0
  kXavierNormal,    // N(0, 2 / (fan_in + fan_out)); bias 0
  kKaimingUniform,  // U(-b, b), b = sqrt(6 / fan_in) (ReLU gain); bias 0
  kKaimingNormal,   // N(0, 2 / fan_in); bias 0
};

Init parse_init(std::string_view name);
std::string_view init_name(Init init);

// Fills a CPU tensor with U(low, high), in row-major order from `gen`.
void fill_uniform(const Tensor& t, Generator& gen, double low, double high);
void fill_normal(const Tensor& t, Generator& gen, double mean, double stddev);

}  // namespace sprintnet::nn
