#include "sprintnet/nn/module.h"

namespace sprintnet::nn {

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out;
  for (auto& [name, param] : named_parameters()) out.push_back(param);
  return out;
}

std::int64_t Module::parameter_count() {
  std::int64_t count = 0;
  for (Parameter* p : parameters()) count += p->value.numel();
  return count;
}

}  // namespace sprintnet::nn
