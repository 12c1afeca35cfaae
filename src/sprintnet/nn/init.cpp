#include "sprintnet/nn/init.h"

#include <cmath>

#include "sprintnet/core/error.h"

namespace sprintnet::nn {

namespace {
constexpr std::pair<Init, std::string_view> kInitNames[] = {
    {Init::kPyTorch, "pytorch"},
    {Init::kXavierUniform, "xavier_uniform"},
    {Init::kXavierNormal, "xavier_normal"},
    {Init::kKaimingUniform, "kaiming_uniform"},
    {Init::kKaimingNormal, "kaiming_normal"},
};

template <typename Draw>
void fill_with(const Tensor& t, Draw draw) {
  SN_CHECK(t.device().is_cpu(), "initialisers fill CPU tensors; move the module to {} afterwards", t.device().str());
  if (t.dtype() == DType::kF32) {
    for (float& v : t.span<float>()) v = static_cast<float>(draw());
  } else {
    for (double& v : t.span<double>()) v = draw();
  }
}
}  // namespace

Init parse_init(std::string_view name) {
  for (auto [init, text] : kInitNames) {
    if (text == name) return init;
  }
  SN_FAIL("unknown init '{}' (expected pytorch, xavier_uniform, xavier_normal, kaiming_uniform or kaiming_normal)",
          name);
}

std::string_view init_name(Init init) {
  for (auto [candidate, text] : kInitNames) {
    if (candidate == init) return text;
  }
  return "?";
}

void fill_uniform(const Tensor& t, Generator& gen, double low, double high) {
  SN_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high,
           "fill_uniform: the bounds [{}, {}] are not finite with low <= high (torch's uniform_ refuses them too)", low,
           high);
  fill_with(t, [&] { return gen.uniform(low, high); });
}

void fill_normal(const Tensor& t, Generator& gen, double mean, double stddev) {
  SN_CHECK(std::isfinite(mean) && std::isfinite(stddev) && stddev >= 0.0,
           "fill_normal: mean {} and std {} must be finite, the std >= 0 (torch's normal_ refuses them too)", mean,
           stddev);
  fill_with(t, [&] { return mean + stddev * gen.normal(); });
}

}  // namespace sprintnet::nn
