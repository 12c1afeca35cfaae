#include "sprintnet/core/graph_capture_lock.h"

namespace sprintnet {

std::shared_mutex& graph_capture_mutex() {
  static std::shared_mutex mutex;
  return mutex;
}

}  // namespace sprintnet
