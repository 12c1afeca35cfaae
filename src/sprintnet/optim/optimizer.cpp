#include "sprintnet/optim/optimizer.h"

#include <cmath>

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

}  // namespace

Optimizer::Optimizer(std::vector<nn::Parameter*> params, double lr) : params_(std::move(params)), lr_(lr) {
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

std::string Adam::describe() const {
  return fmt::format("{}(lr={}, betas=({}, {}), eps={}, weight_decay={})", decoupled_ ? "AdamW" : "Adam", lr_,
                     options_.beta1, options_.beta2, options_.eps, options_.weight_decay);
}

}  // namespace sprintnet::optim
