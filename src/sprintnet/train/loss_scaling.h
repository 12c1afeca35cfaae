#pragma once
// fp16's dynamic loss scaling, torch.amp.GradScaler's state: the factor the loss is multiplied by
// before the backward, and the finite steps since it last changed (it halves on a step whose
// gradient is not finite, whose update is skipped, and doubles after 2000 finite steps in a row:
// flat_update.cuh's advance_step_state). Part of an fp16 run's state like the optimizer's: a
// checkpoint keeps it, so a resumed run skips and grows where the uninterrupted run did.
#include <cstdint>
#include <optional>
#include <string>

namespace sprintnet::train {

inline constexpr float kInitialLossScale = 65536.0f;  // torch.amp.GradScaler's init_scale
inline constexpr std::int64_t kLossScaleGrowthInterval = 2000;  // its growth_interval

struct LossScaling {
  float scale = kInitialLossScale;
  std::int64_t good_steps = 0;  // in [0, kLossScaleGrowthInterval)
  friend bool operator==(const LossScaling&, const LossScaling&) = default;
};

// Why `scaling` is no state a run writes (a scale that is not a positive, finite power of two: it starts at 2^16
// and only doubles or halves; a count of good steps outside [0, 2000)), or nullopt when it is one.
std::optional<std::string> loss_scaling_problem(const LossScaling& scaling);

}  // namespace sprintnet::train
