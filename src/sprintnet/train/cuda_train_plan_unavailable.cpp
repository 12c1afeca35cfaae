// make_cuda_train_plan() in a build without CUDA.
#include "sprintnet/train/train_plan.h"

namespace sprintnet::train {

std::unique_ptr<TrainPlan> make_cuda_train_plan(const TrainPlanSpec&, Device device) {
  SN_FAIL("{}: this sprintnet was built without CUDA, so there is no compiled GPU step", device.str());
}

}  // namespace sprintnet::train
