#include "sprintnet/nn/saved_tensor.h"

#include "sprintnet/core/error.h"

namespace sprintnet::nn {

const Tensor& SavedTensor::unpack(std::string_view module, std::string_view what) const {
  SN_CHECK(tensor_.version() == version_,
           "{}.backward: {} that forward saved was modified in place since ({} write(s) by ops after forward): the "
           "gradient would be computed from the new values. Clone it before changing it, or run forward again (torch "
           "refuses this too: \"one of the variables needed for gradient computation has been modified by an inplace "
           "operation\")", module, what, tensor_.version() - version_);
  return tensor_;
}

}  // namespace sprintnet::nn
