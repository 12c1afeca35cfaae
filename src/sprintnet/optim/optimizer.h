#pragma once
// Optimizers with torch.optim's semantics. Parameters whose gradient is empty
// (has_grad false, like PyTorch's grad None) are skipped. State tensors live
// on the parameters' device and are exposed by name for checkpoints.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sprintnet/nn/module.h"
#include "sprintnet/ops/backend.h"

namespace sprintnet::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
// Integer state by name: step counts and per-parameter flags.
using Counters = std::map<std::string, std::int64_t>;

// How the per-parameter counters that load_state() accepts relate to the step count "steps".
enum class UpdateCounts {
  // torch.optim's semantics: a parameter is updated at the steps where it has a gradient, so its
  // counters may lag: Adam's "i.step" in [0, steps], SGD's "i.momentum_started" 0 or 1 (0 before any step).
  kPerParameter,
  // Every parameter has a gradient at every step (sprintnet's trainer, fp32 and bf16): each "i.step"
  // is steps and each "i.momentum_started" 1 once steps > 0.
  kEveryStep,
  // As kEveryStep, except that whole updates may be skipped (fp16's dynamic loss scaling skips the
  // update of a step whose gradient is not finite, for every parameter at once): the counters
  // count the updates made, one count in [0, steps] for every parameter.
  kEveryStepUnlessSkipped,
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual void step() = 0;
  // Marks every gradient empty: the next backward overwrites instead of adding.
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr);
  // Calls of step() so far.
  std::int64_t steps_taken() const { return steps_; }
  // State tensors named "<param index>.<state name>", e.g. "0.momentum_buffer".
  virtual NamedTensors state() { return {}; }
  // The integer state beside state(): "steps" (steps_taken) and per-parameter counters
  // such as SGD's "0.momentum_started" (0 or 1) and Adam's "0.step". With state() it is
  // everything a checkpoint needs to continue bit-exactly.
  virtual Counters counters() const { return {{"steps", steps_}}; }
  // Restores what state() and counters() exported from an optimizer of the same type over
  // parameters of the same shapes. Every name must be present with its shape and dtype and
  // nothing else may be, and the per-parameter counters must agree with "steps" as `updates`
  // says; `origin` names the source in errors. A rejected state changes nothing.
  void load_state(const NamedTensors& tensors, const Counters& counters, std::string_view origin,
                  UpdateCounts updates = UpdateCounts::kPerParameter);
  virtual std::string describe() const = 0;

 protected:
  // Checks and sets the counters, whose names load_state() has matched with counters().
  virtual void set_counters(const Counters& counters, UpdateCounts updates, std::string_view origin);
  Optimizer(std::vector<nn::Parameter*> params, double lr);
  std::vector<nn::Parameter*> params_;
  double lr_;
  std::int64_t steps_ = 0;
};

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD final : public Optimizer {
 public:
  SGD(std::vector<nn::Parameter*> params, const SgdOptions& options);
  void step() override;
  NamedTensors state() override;
  Counters counters() const override;
  std::string describe() const override;

 protected:
  void set_counters(const Counters& counters, UpdateCounts updates, std::string_view origin) override;

 private:
  SgdOptions options_;
  std::vector<Tensor> momentum_;       // one per parameter when momentum > 0
  std::vector<bool> momentum_started_;  // per parameter, as PyTorch: the buffer starts as the first gradient
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// Adam (L2 penalty added to the gradient) or, with decoupled = true, AdamW.
class Adam : public Optimizer {
 public:
  Adam(std::vector<nn::Parameter*> params, const AdamOptions& options, bool decoupled = false);
  void step() override;
  NamedTensors state() override;
  Counters counters() const override;
  std::string describe() const override;

 protected:
  void set_counters(const Counters& counters, UpdateCounts updates, std::string_view origin) override;

 private:
  AdamOptions options_;
  bool decoupled_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  std::vector<std::int64_t> param_steps_;  // per parameter, as PyTorch's state['step']: drives bias correction
};

class AdamW final : public Adam {
 public:
  // Note: torch.optim.AdamW defaults weight_decay to 0.01; here it is whatever the options say
  // (the config key optim.weight_decay), so a config states its decay explicitly.
  AdamW(std::vector<nn::Parameter*> params, const AdamOptions& options) : Adam(std::move(params), options, true) {}
};

}  // namespace sprintnet::optim
