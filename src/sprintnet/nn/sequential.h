#pragma once
// nn::Sequential: runs its children in order forward and in reverse backward.
// Parameters are named "<index>.<name>" like torch.nn.Sequential's state_dict,
// so a checkpoint loads into the same PyTorch model without renaming.
#include <memory>
#include <vector>

#include "sprintnet/core/error.h"
#include "sprintnet/nn/module.h"

namespace sprintnet::nn {

class Sequential final : public Module {
 public:
  Sequential() = default;

  template <typename M, typename... Args>
  M& emplace(Args&&... args) {
    auto module = std::make_unique<M>(std::forward<Args>(args)...);
    M& ref = *module;
    add(std::move(module));
    return ref;
  }
  Sequential& add(std::unique_ptr<Module> module);

  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  NamedParameters named_parameters() override;
  std::string describe() const override;
  void train(bool on = true) override;
  void set_input_requires_grad(bool on) override;

  std::size_t size() const { return children_.size(); }
  Module& operator[](std::size_t i) {
    SN_CHECK(i < children_.size(), "Sequential[{}]: it holds {} modules", i, children_.size());
    return *children_[i];
  }

 private:
  std::vector<std::unique_ptr<Module>> children_;
};

}  // namespace sprintnet::nn
