#pragma once
// Makes a CUDA device current for a scope and restores the previous one, so a
// backend's calls go to its own device whatever the caller had selected.
#include <cuda_runtime_api.h>

#include "sprintnet/core/cuda_check.h"

namespace sprintnet::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    SN_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != index) SN_CUDA_CHECK(cudaSetDevice(index));
    index_ = index;
  }
  ~DeviceGuard() {
    if (previous_ != index_) SN_CUDA_WARN(cudaSetDevice(previous_));
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int index_ = 0;
};

}  // namespace sprintnet::cuda
