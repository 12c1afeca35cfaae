#pragma once
// The job's NCCL communicator, joined with a deadline and watched for asynchronous errors, so a
// rank that dies or hangs ends the others with an error naming the rank instead of a silent hang.
// Free of NCCL's headers (the handle is opaque) so CPU-only builds compile the callers.
#include <memory>

#include "sprintnet/dist/rank_info.h"

namespace sprintnet::dist {

class Communicator {
 public:
  // Joins the job on CUDA device `device`: every rank bootstraps through NCCL_COMM_ID =
  // MASTER_ADDR:MASTER_PORT, where rank 0 hosts NCCL's bootstrap root (docs/DISTRIBUTED.md).
  // Fails after `timeout_s` naming the rank and the address when the job does not assemble.
  static std::unique_ptr<Communicator> join(const RankInfo& info, int device, double timeout_s = 60.0);
  virtual ~Communicator() = default;

  virtual void* nccl_handle() const = 0;  // ncclComm_t
  const RankInfo& info() const { return info_; }
  // Throws (after aborting the communicator) when NCCL reported an asynchronous error.
  virtual void check() = 0;
  // Records a progress mark on `stream` (a cudaStream_t) behind the work enqueued so far. A watchdog
  // thread watches the marks (dist/stall_detector.h): when one stays pending for
  // kStallLimitSeconds with none passed, a peer has died or hangs, and the watchdog ends this
  // process with an error naming this rank, wherever its threads are blocked (a wait, a graph
  // launch on a full queue, a collective).
  virtual void mark(void* stream) = 0;
  // Waits for `stream`, checking NCCL's asynchronous errors while it waits (the watchdog bounds
  // the wait: it marks the stream first).
  virtual void wait(void* stream) = 0;

 protected:
  explicit Communicator(RankInfo info) : info_(std::move(info)) {}
  RankInfo info_;
};

}  // namespace sprintnet::dist
