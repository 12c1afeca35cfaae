// The GPU engines' factories in a build without CUDA.
#include "sprintnet/train/fused_fit.h"
#include "sprintnet/train/train_plan.h"

namespace sprintnet::train {

std::unique_ptr<TrainPlan> make_cuda_train_plan(const TrainPlanSpec&, Device device) {
  SN_FAIL("{}: this sprintnet was built without CUDA, so there is no compiled GPU step", device.str());
}

std::unique_ptr<TrainPlan> make_fused_train_plan(const TrainPlanSpec&, Device device) {
  SN_FAIL("{}: this sprintnet was built without CUDA, so there is no fused engine", device.str());
}

std::int64_t gpu_on_chip_bytes(int) { return 0; }

bool gpu_runs_cluster_kernel(int, const nn::MlpSpec&) { return false; }
bool gpu_runs_split_kernel(int, std::int64_t, std::int64_t) { return false; }
bool gpu_runs_regression_kernel(int) { return false; }
bool gpu_runs_rows_kernel(int, const nn::MlpSpec&) { return false; }
bool gpu_runs_quads_kernel(int, const nn::MlpSpec&) { return false; }
bool gpu_shared_with_other_runs(int) { return false; }

}  // namespace sprintnet::train
