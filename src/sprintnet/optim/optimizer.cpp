#include "sprintnet/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "sprintnet/ops/ops.h"

namespace sprintnet::optim {
namespace {

void check_hyper(bool ok, std::string_view optimizer, std::string_view name, double value) {
  SN_CHECK(ok, "{}: invalid {} {}", optimizer, name, value);
}

std::vector<Tensor> zeros_like_params(const std::vector<nn::Parameter*>& params) {
  std::vector<Tensor> out;
  for (auto* p : params) out.push_back(Tensor::zeros(p->value.shape(), p->value.dtype(), p->value.device()));
  return out;
}

NamedTensors name_state(const std::vector<Tensor>& tensors, std::string_view name) {
  NamedTensors out;
  for (std::size_t i = 0; i < tensors.size(); ++i) out.emplace_back(fmt::format("{}.{}", i, name), tensors[i]);
  return out;
}

// The step count of counters read from a checkpoint.
std::int64_t checked_steps(const Counters& counters, std::string_view origin) {
  const std::int64_t steps = counters.at("steps");
  SN_CHECK(steps >= 0, "{}: optimizer counter 'steps' is {}, expected a count of steps (0 or more)", origin, steps);
  return steps;
}

// The per-parameter counters `names` against the step count `steps`, as `updates` says. `full` is a
// counter's value when its parameter was updated at every step: Adam's step count is `steps`, SGD's
// "momentum started" flag min(steps, 1).
void check_parameter_counters(const Counters& counters, const std::vector<std::string>& names, std::int64_t steps,
                              std::int64_t full, UpdateCounts updates, std::string_view origin) {
  for (const std::string& name : names) {
    const std::int64_t value = counters.at(name);
    SN_CHECK(value >= 0 && value <= full, "{}: optimizer counter '{}' is {}, expected a value in [0, {}] after {} "
             "steps ('steps')", origin, name, value, full, steps);
    if (updates == UpdateCounts::kEveryStep) {
      SN_CHECK(value == full, "{}: optimizer counter '{}' is {}, expected {}: every parameter is updated at every "
               "step, and the optimizer took {} steps ('steps')", origin, name, value, full, steps);
    } else if (updates == UpdateCounts::kEveryStepUnlessSkipped) {
      const std::int64_t first = counters.at(names.front());
      SN_CHECK(value == first, "{}: optimizer counters '{}' ({}) and '{}' ({}) differ, where every parameter is "
               "updated at every step whose update is not skipped", origin, names.front(), first, name, value);
    }
  }
}

std::vector<std::string> parameter_counter_names(std::size_t params, std::string_view counter) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < params; ++i) names.push_back(fmt::format("{}.{}", i, counter));
  return names;
}

}  // namespace

void Optimizer::load_state(const NamedTensors& tensors, const Counters& counters, std::string_view origin,
                           UpdateCounts updates) {
  // Everything is checked before anything is changed, so a rejected state leaves the optimizer as it was.
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, tensor] : tensors) {
    SN_CHECK(by_name.emplace(name, &tensor).second, "{}: optimizer state '{}' appears twice", origin, name);
  }
  std::vector<std::pair<Tensor, const Tensor*>> copies;  // (destination, source)
  for (const auto& [name, target] : state()) {
    const auto it = by_name.find(name);
    SN_CHECK(it != by_name.end(), "{}: no optimizer state '{}' ({} {}), which {} needs", origin, name,
             dtype_name(target.dtype()), shape_str(target.shape()), describe());
    const Tensor& source = *it->second;
    SN_CHECK(source.shape() == target.shape() && source.dtype() == target.dtype(),
             "{}: optimizer state '{}' is {} {}, {} expects {} {}", origin, name, dtype_name(source.dtype()),
             shape_str(source.shape()), describe(), dtype_name(target.dtype()), shape_str(target.shape()));
    copies.emplace_back(target, &source);
    by_name.erase(it);
  }
  SN_CHECK(by_name.empty(), "{}: optimizer state '{}' is not part of {} (saved by another optimizer?)", origin,
           by_name.empty() ? "" : by_name.begin()->first, describe());

  const Counters expected = this->counters();
  for (const auto& [name, value] : expected) {
    SN_CHECK(counters.count(name) == 1, "{}: no optimizer counter '{}', which {} needs", origin, name, describe());
  }
  for (const auto& [name, value] : counters) {
    SN_CHECK(expected.count(name) == 1, "{}: optimizer counter '{}' is not part of {} (saved by another optimizer?)",
             origin, name, describe());
  }
  set_counters(counters, updates, origin);
  for (auto& [target, source] : copies) ops::copy(target, source->to(target.device()));
}

void Optimizer::set_counters(const Counters& counters, UpdateCounts /*updates*/, std::string_view origin) {
  steps_ = checked_steps(counters, origin);
}

Optimizer::Optimizer(std::vector<nn::Parameter*> params, double lr) : params_(std::move(params)), lr_(lr) {
  // As PyTorch: nothing to optimize, or one tensor updated twice a step, is a mistake to name, not to run.
  SN_CHECK(!params_.empty(), "optimizer got an empty parameter list");
  std::set<const nn::Parameter*> seen;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    SN_CHECK(params_[i] != nullptr, "optimizer parameter {} is null", i);
    SN_CHECK(seen.insert(params_[i]).second, "optimizer parameter {} appears twice in the list (it would be updated "
             "twice a step)", i);
    // Two Parameter objects can hold one value tensor (a copied Parameter shares its storage): the same mistake.
    for (std::size_t j = 0; j < i; ++j) {
      SN_CHECK(!params_[i]->value.overlaps(params_[j]->value), "optimizer parameters {} and {} share memory (one "
               "tensor, or overlapping views of one): it would be updated twice a step", j, i);
    }
  }
  set_lr(lr);
}

void Optimizer::zero_grad() {
  for (auto* p : params_) p->has_grad = false;
}

void Optimizer::set_lr(double lr) {
  check_hyper(std::isfinite(lr) && lr >= 0.0, "optimizer", "learning rate", lr);
  lr_ = lr;
}

SGD::SGD(std::vector<nn::Parameter*> params, const SgdOptions& options)
    : Optimizer(std::move(params), options.lr), options_(options) {
  check_hyper(std::isfinite(options.momentum) && options.momentum >= 0.0, "SGD", "momentum", options.momentum);
  check_hyper(std::isfinite(options.weight_decay) && options.weight_decay >= 0.0, "SGD", "weight_decay",
              options.weight_decay);
  check_hyper(std::isfinite(options.dampening) && options.dampening >= 0.0 && options.dampening <= 1.0, "SGD",
              "dampening", options.dampening);
  SN_CHECK(!options.nesterov || (options.momentum > 0.0 && options.dampening == 0.0),
           "SGD: Nesterov momentum requires a momentum and zero dampening");
  if (options.momentum > 0.0) momentum_ = zeros_like_params(params_);
  momentum_started_.assign(params_.size(), false);
}

void SGD::step() {
  SgdHyper h{lr_, options_.momentum, options_.dampening, options_.weight_decay, options_.nesterov, false};
  for (std::size_t i = 0; i < params_.size(); ++i) {
    nn::Parameter* p = params_[i];
    if (!p->has_grad) continue;
    h.first_step = !momentum_started_[i];
    momentum_started_[i] = true;
    ops::sgd_step(p->value, p->grad, momentum_.empty() ? nullptr : &momentum_[i], h);
  }
  ++steps_;
}

NamedTensors SGD::state() { return name_state(momentum_, "momentum_buffer"); }

Counters SGD::counters() const {
  Counters out = Optimizer::counters();
  for (std::size_t i = 0; i < params_.size(); ++i) out[fmt::format("{}.momentum_started", i)] = momentum_started_[i];
  return out;
}

void SGD::set_counters(const Counters& counters, UpdateCounts updates, std::string_view origin) {
  // Everything is checked before anything is set. A flag is 1 from its parameter's first update on (with or
  // without momentum), so none is before the first step.
  const std::vector<std::string> names = parameter_counter_names(params_.size(), "momentum_started");
  const std::int64_t steps = checked_steps(counters, origin);
  check_parameter_counters(counters, names, steps, std::min<std::int64_t>(steps, 1), updates, origin);
  Optimizer::set_counters(counters, updates, origin);
  for (std::size_t i = 0; i < params_.size(); ++i) momentum_started_[i] = counters.at(names[i]) == 1;
}

std::string SGD::describe() const {
  return fmt::format("SGD(lr={}, momentum={}, dampening={}, weight_decay={}, nesterov={})", lr_, options_.momentum,
                     options_.dampening, options_.weight_decay, options_.nesterov);
}

Adam::Adam(std::vector<nn::Parameter*> params, const AdamOptions& options, bool decoupled)
    : Optimizer(std::move(params), options.lr), options_(options), decoupled_(decoupled) {
  check_hyper(options.beta1 >= 0.0 && options.beta1 < 1.0, "Adam", "beta1", options.beta1);
  check_hyper(options.beta2 >= 0.0 && options.beta2 < 1.0, "Adam", "beta2", options.beta2);
  check_hyper(std::isfinite(options.eps) && options.eps > 0.0, "Adam", "eps", options.eps);
  check_hyper(std::isfinite(options.weight_decay) && options.weight_decay >= 0.0, "Adam", "weight_decay",
              options.weight_decay);
  exp_avg_ = zeros_like_params(params_);
  exp_avg_sq_ = zeros_like_params(params_);
  param_steps_.assign(params_.size(), 0);
}

void Adam::step() {
  AdamHyper h{lr_, options_.beta1, options_.beta2, options_.eps, options_.weight_decay, decoupled_, 0};
  for (std::size_t i = 0; i < params_.size(); ++i) {
    nn::Parameter* p = params_[i];
    if (!p->has_grad) continue;
    h.step = ++param_steps_[i];  // bias correction counts this parameter's updates, from 1
    ops::adam_step(p->value, p->grad, exp_avg_[i], exp_avg_sq_[i], h);
  }
  ++steps_;
}

NamedTensors Adam::state() {
  NamedTensors out = name_state(exp_avg_, "exp_avg");
  for (auto& entry : name_state(exp_avg_sq_, "exp_avg_sq")) out.push_back(std::move(entry));
  return out;
}

Counters Adam::counters() const {
  Counters out = Optimizer::counters();
  for (std::size_t i = 0; i < params_.size(); ++i) out[fmt::format("{}.step", i)] = param_steps_[i];
  return out;
}

void Adam::set_counters(const Counters& counters, UpdateCounts updates, std::string_view origin) {
  // A parameter is updated at most once per step; everything is checked before anything is set.
  const std::vector<std::string> names = parameter_counter_names(params_.size(), "step");
  const std::int64_t steps = checked_steps(counters, origin);
  check_parameter_counters(counters, names, steps, steps, updates, origin);
  Optimizer::set_counters(counters, updates, origin);
  for (std::size_t i = 0; i < params_.size(); ++i) param_steps_[i] = counters.at(names[i]);
}

std::string Adam::describe() const {
  return fmt::format("{}(lr={}, betas=({}, {}), eps={}, weight_decay={})", decoupled_ ? "AdamW" : "Adam", lr_,
                     options_.beta1, options_.beta2, options_.eps, options_.weight_decay);
}

}  // namespace sprintnet::optim
