#pragma once
// Clears the process's stop request (core/stop_request.h) when the scope ends, however it ends: a test that
// requests a stop must not leave the later tests of its binary stopping after one epoch.
#include "sprintnet/core/stop_request.h"

namespace sprintnet::test {

struct StopRequestCleared {
  StopRequestCleared() = default;
  StopRequestCleared(const StopRequestCleared&) = delete;
  StopRequestCleared& operator=(const StopRequestCleared&) = delete;
  ~StopRequestCleared() { clear_stop_request(); }
};

}  // namespace sprintnet::test
