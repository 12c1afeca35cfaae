#pragma once
// A model's weights as named tensors and back, by torch.nn.Sequential names
// ("0.weight", "0.bias", ...). Loading demands an exact match: every parameter
// present once with its shape and dtype, and no stray tensor, so a checkpoint
// of another architecture is rejected with the name that differs.
#include <optional>
#include <string>
#include <string_view>

#include "sprintnet/io/safetensors.h"
#include "sprintnet/nn/module.h"

namespace sprintnet::train {

// The parameter values (shared, not copied), in parameter order.
TensorList model_weights(nn::Module& model);
// Copies of `tensors` on the host, sharing no storage with them (a snapshot to write while they change).
TensorList host_copy(const TensorList& tensors);
// The first fp32 host tensor holding a NaN or an infinity, as "tensor '0.weight' holds a non-finite value
// (nan at element 3)"; nullopt when every value is finite.
std::optional<std::string> first_non_finite(const TensorList& host_tensors);
// Copies `weights` into the model's parameters (any device); `origin` names the source in errors.
void load_model_weights(nn::Module& model, const TensorList& weights, std::string_view origin);

}  // namespace sprintnet::train
