#include "sprintnet/train/model_io.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "sprintnet/ops/ops.h"

namespace sprintnet::train {

TensorList model_weights(nn::Module& model) {
  TensorList out;
  for (auto& [name, param] : model.named_parameters()) out.emplace_back(name, param->value);
  return out;
}

TensorList host_copy(const TensorList& tensors) {
  TensorList out;
  out.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    out.emplace_back(name, tensor.device().is_cpu() ? tensor.clone() : tensor.to(Device::cpu()));
  }
  return out;
}

std::optional<std::string> first_non_finite(const TensorList& host_tensors) {
  for (const auto& [name, tensor] : host_tensors) {
    if (tensor.dtype() != DType::kF32) continue;
    const auto values = tensor.span<float>();
    const auto bad = std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
    if (bad != values.end()) {
      return fmt::format("tensor '{}' holds a non-finite value ({} at element {})", name, *bad, bad - values.begin());
    }
  }
  return std::nullopt;
}

void load_model_weights(nn::Module& model, const TensorList& weights, std::string_view origin) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, tensor] : weights) {
    SN_CHECK(by_name.emplace(name, &tensor).second, "{}: tensor '{}' appears twice", origin, name);
  }
  // Every tensor is checked before any is copied, so rejected weights leave the model as it was.
  const nn::NamedParameters params = model.named_parameters();
  std::vector<std::pair<nn::Parameter*, Tensor>> copies;
  for (const auto& [name, param] : params) {
    auto it = by_name.find(name);
    SN_CHECK(it != by_name.end(), "{}: no tensor '{}' for the model's parameter of shape {}", origin, name,
             shape_str(param->value.shape()));
    const Tensor& source = *it->second;
    SN_CHECK(source.shape() == param->value.shape(), "{}: tensor '{}' has shape {}, the model expects {}", origin,
             name, shape_str(source.shape()), shape_str(param->value.shape()));
    SN_CHECK(source.dtype() == param->value.dtype(), "{}: tensor '{}' is {}, the model expects {}", origin, name,
             dtype_name(source.dtype()), dtype_name(param->value.dtype()));
    const Tensor host = source.device().is_cpu() ? source : source.to(Device::cpu());
    // A NaN or inf weight would train or predict NaN, naming nothing.
    const std::optional<std::string> bad = first_non_finite({{name, host}});
    SN_CHECK(!bad, "{}: {}", origin, *bad);
    copies.emplace_back(param, host);
    by_name.erase(it);
  }
  SN_CHECK(by_name.empty(), "{}: tensor '{}' matches no parameter of the model", origin,
           by_name.empty() ? "" : by_name.begin()->first);
  for (const auto& [param, host] : copies) ops::copy(param->value, host.to(param->value.device()));
}

}  // namespace sprintnet::train
