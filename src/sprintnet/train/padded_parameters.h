#pragma once
// The eager model's weights and optimizer state as flat fp32 host images in a
// padded layout (the fused engine's: weight rows padded to 16 elements, the bias
// a column of its weight rows), and back from wherever those buffers are. Dense
// layouts use flat_parameters.h's device views instead; the counters logic is
// shared (step_counters()).
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "sprintnet/io/config.h"
#include "sprintnet/nn/linear.h"
#include "sprintnet/nn/sequential.h"
#include "sprintnet/ops/cuda/step_launch.h"
#include "sprintnet/optim/optimizer.h"
#include "sprintnet/train/flat_parameters.h"
#include "sprintnet/train/loss_scaling.h"

namespace sprintnet::train {

// One parameter's place in the flat buffers: `rows` rows of `cols` values, `row_stride` apart
// (a bias is one row).
struct FlatSlot {
  std::int64_t offset = 0, rows = 1, cols = 0, row_stride = 0;
};

// Host images of the flat buffers (state1: momentum or exp_avg; state2: exp_avg_sq; empty when
// the optimizer keeps no such state).
struct FlatImages {
  std::vector<float> master, state1, state2;
};

// The slots of `layers`' parameters in parameters() order (weight, then bias, layer by layer).
// Reads the model's weights and the optimizer's state into images of `length` elements (zeros elsewhere).
FlatImages export_to_flat(const std::vector<nn::Linear*>& layers, optim::Optimizer& optimizer,
                          const std::vector<FlatSlot>& slots, std::int64_t length, const OptimConfig& optim,
                          std::string_view engine);
// The step counters the flat update starts from (fp16: torch.amp.GradScaler's initial scale).
cuda::StepState step_state_from(const optim::Counters& counters, bool fp16);
// fp16's loss scaling in the step state both GPU engines keep on the device, and `state` with `scaling`
// put in (checked: loss_scaling_problem's error names `engine`).
LossScaling loss_scaling_of(const cuda::StepState& state);
cuda::StepState with_loss_scaling(cuda::StepState state, const LossScaling& scaling, std::string_view engine);
// Writes the flat buffers back into the model and the optimizer, with the counters of `state`:
// `read(buffer, slot, shape, device)` gives a slot of buffer 0 (master), 1 (state1) or 2 (state2) as
// a tensor of `shape` on `device` (the fused engine copies it on the device, no round trip through
// the host).
using FlatSlotReader = std::function<Tensor(int buffer, const FlatSlot& slot, const Shape& shape, Device device)>;
void import_from_flat(const FlatSlotReader& read, bool has_state1, const std::vector<FlatSlot>& slots,
                      const std::vector<nn::Linear*>& layers, optim::Optimizer& optimizer, const OptimConfig& optim,
                      const cuda::StepState& state, std::string_view engine);
// The update's hyper-parameters from the config, for every GPU engine (pointers and sizes left for
// the engine to set).
cuda::FlatOptimizerArgs flat_optimizer_config(const OptimConfig& optim, bool check_finite);

}  // namespace sprintnet::train
