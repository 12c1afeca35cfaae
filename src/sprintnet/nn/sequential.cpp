#include "sprintnet/nn/sequential.h"

namespace sprintnet::nn {

Sequential& Sequential::add(std::unique_ptr<Module> module) {
  SN_CHECK(module != nullptr, "Sequential::add: null module");
  module->train(training_);
  children_.push_back(std::move(module));
  // Only the first child sees the network's input; every later one must pass gradients on.
  for (std::size_t i = 0; i < children_.size(); ++i) {
    children_[i]->set_input_requires_grad(i == 0 ? input_requires_grad_ : true);
  }
  return *this;
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (auto& child : children_) x = child->forward(x);
  return x;
}

Tensor Sequential::backward(const Tensor& grad_output) {
  Tensor g = grad_output;
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) g = (*it)->backward(g);
  return g;
}

NamedParameters Sequential::named_parameters() {
  NamedParameters out;
  for (std::size_t i = 0; i < children_.size(); ++i) {
    for (auto& [name, param] : children_[i]->named_parameters()) out.emplace_back(fmt::format("{}.{}", i, name), param);
  }
  return out;
}

std::string Sequential::describe() const {
  std::string out = "Sequential(\n";
  for (std::size_t i = 0; i < children_.size(); ++i) out += fmt::format("  ({}): {}\n", i, children_[i]->describe());
  return out + ")";
}

void Sequential::train(bool on) {
  Module::train(on);
  for (auto& child : children_) child->train(on);
}

void Sequential::set_input_requires_grad(bool on) {
  Module::set_input_requires_grad(on);
  if (!children_.empty()) children_.front()->set_input_requires_grad(on);
}

}  // namespace sprintnet::nn
