#pragma once
// The MLP every config describes: Linear → act → ... → Linear, as an
// nn::Sequential (layer i of PyTorch's equivalent Sequential has index i).
#include <memory>
#include <vector>

#include "sprintnet/nn/init.h"
#include "sprintnet/nn/sequential.h"
#include "sprintnet/ops/backend.h"

namespace sprintnet::nn {

struct MlpSpec {
  std::int64_t inputs = 784;
  std::vector<std::int64_t> hidden;  // empty: one Linear (softmax regression)
  std::int64_t outputs = 10;
  Activation activation = Activation::kReLU;
  bool bias = true;
  Init init = Init::kPyTorch;
};

// Built on the CPU from `gen` (layer by layer, weight then bias), then moved to `device`.
std::unique_ptr<Sequential> make_mlp(const MlpSpec& spec, Generator& gen, Device device = Device::cpu(),
                                     DType dtype = DType::kF32);
// FLOPs of one training step (forward + input and weight gradients) for a batch.
double mlp_train_flops(const MlpSpec& spec, std::int64_t batch);

}  // namespace sprintnet::nn
