// Communicator::join() in a build without CUDA (and so without NCCL).
#include "sprintnet/core/error.h"
#include "sprintnet/dist/communicator.h"

namespace sprintnet::dist {

std::unique_ptr<Communicator> Communicator::join(const RankInfo& info, int, double) {
  SN_FAIL("rank {} of {}: this sprintnet was built without CUDA, so there is no NCCL data parallelism", info.rank,
          info.world);
}

}  // namespace sprintnet::dist
