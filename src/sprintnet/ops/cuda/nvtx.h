#pragma once
// An NVTX range around each launcher, so Nsight Systems timelines read like the
// code. NVTX v3 is header-only and costs almost nothing when no profiler is attached.
#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>

namespace sprintnet::cuda {
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};
}  // namespace sprintnet::cuda

#else  // a toolkit without NVTX headers: ranges compile to nothing

namespace sprintnet::cuda {
class NvtxRange {
 public:
  explicit NvtxRange(const char*) {}
};
}  // namespace sprintnet::cuda

#endif
