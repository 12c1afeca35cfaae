#pragma once
// A tensor a module's forward keeps for its backward, with the count of writes it had then (torch's SavedVariable):
// backward refuses it when an op has written into it since (an in-place change of the input, an optimizer step
// between forward and backward), where it would otherwise differentiate the new values without a word.
#include <string_view>
#include <utility>

#include "sprintnet/core/tensor.h"

namespace sprintnet::nn {

class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(Tensor tensor) : tensor_(std::move(tensor)), version_(tensor_.version()) {}

  bool defined() const { return tensor_.defined(); }
  // The tensor, when no op has written into it since it was saved; else throws naming `module` and `what`.
  const Tensor& unpack(std::string_view module, std::string_view what) const;
  // The tensor as saved, unchecked (shapes for messages).
  const Tensor& peek() const { return tensor_; }

 private:
  Tensor tensor_;
  std::uint64_t version_ = 0;
};

}  // namespace sprintnet::nn
