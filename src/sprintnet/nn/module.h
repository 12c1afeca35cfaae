#pragma once
// nn::Module: the PyTorch-shaped building block. There is no general autograd:
// each module implements its own backward, using what its forward saved.
//
//   Tensor y = model.forward(x);      // saves activations while training
//   Tensor dx = model.backward(dy);   // accumulates parameter gradients, returns dL/dx
//
// Gradients accumulate like PyTorch's; Optimizer::zero_grad() marks them empty
// (set_to_none semantics), so the next backward writes instead of adding.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sprintnet/core/tensor.h"

namespace sprintnet::nn {

struct Parameter {
  Tensor value;
  Tensor grad;            // same shape as value, allocated with it
  bool has_grad = false;  // false: grad's contents are stale and the next backward overwrites them
};

using NamedParameters = std::vector<std::pair<std::string, Parameter*>>;

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(const Tensor& input) = 0;
  // Gradient of the loss w.r.t. this module's input, given the gradient w.r.t.
  // its output. Returns an undefined Tensor when input gradients are not needed.
  virtual Tensor backward(const Tensor& grad_output) = 0;
  // Parameters with their local names ("weight", "bias"; "0.weight" inside a Sequential).
  virtual NamedParameters named_parameters() { return {}; }
  // One-line description, e.g. "Linear(in=784, out=256, bias=true)".
  virtual std::string describe() const = 0;

  std::vector<Parameter*> parameters();
  std::int64_t parameter_count();
  // Training mode saves what backward needs; eval mode saves nothing.
  virtual void train(bool on = true) { training_ = on; }
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // The first layer of a network needs no gradient for its input (the data).
  virtual void set_input_requires_grad(bool on) { input_requires_grad_ = on; }
  bool input_requires_grad() const { return input_requires_grad_; }

 protected:
  bool training_ = true;
  bool input_requires_grad_ = true;
};

}  // namespace sprintnet::nn
