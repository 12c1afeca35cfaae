#include "sprintnet/dist/communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <cstdlib>
#include <string>
#include <thread>

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/error.h"
#include "sprintnet/ops/cuda/device_guard.h"

namespace sprintnet::dist {
namespace {

using Clock = std::chrono::steady_clock;

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(RankInfo info, ncclComm_t comm) : Communicator(std::move(info)), comm_(comm) {}
  // Abort, not destroy: the job's last collective (the epoch's sums) is done when this runs, and
  // ncclCommDestroy can wait on peers that have already left (a 2-GPU run hung at exit on H200s).
  ~NcclCommunicator() override {
    if (comm_ != nullptr && !aborted_) static_cast<void>(ncclCommAbort(comm_));
  }

  void* nccl_handle() const override { return comm_; }

  void check() override {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &async);
    if (r == ncclSuccess && async == ncclSuccess) return;
    fail(fmt::format("NCCL reported {}", ncclGetErrorString(r != ncclSuccess ? r : async)));
  }

  void wait(void* stream, double timeout_s) override {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    auto pause = std::chrono::microseconds(20);
    while (true) {
      const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream));
      if (e == cudaSuccess) return;
      SN_CHECK(e == cudaErrorNotReady, "rank {}: {}", info_.rank, cudaGetErrorString(e));
      check();
      if (Clock::now() > deadline) {
        fail(fmt::format("no progress for {:.0f} s: another rank has stopped or hangs", timeout_s));
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    static_cast<void>(ncclCommAbort(comm_));
    aborted_ = true;
    SN_FAIL("rank {} of {}: {}; the job stops", info_.rank, info_.world, why);
  }

  ncclComm_t comm_;
  bool aborted_ = false;
};

}  // namespace

std::unique_ptr<Communicator> Communicator::join(const RankInfo& info, int device, double timeout_s) {
  const cuda::DeviceGuard guard(device);
  // NCCL_COMM_ID: every rank derives the same unique id from the address, and rank 0 hosts the
  // bootstrap root there; no other channel is needed to share the id (docs/DISTRIBUTED.md).
  const std::string address = fmt::format("{}:{}", info.master_addr, info.master_port);
  setenv("NCCL_COMM_ID", address.c_str(), 1);
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  SN_CHECK(r == ncclSuccess, "rank {}: ncclGetUniqueId for {}: {}", info.rank, address, ncclGetErrorString(r));
  // Blocking init, watched: if the job has not assembled by the deadline, this rank reports it
  // and exits (a blocked ncclCommInitRank cannot be interrupted; the process can).
  std::mutex mutex;
  std::condition_variable done;
  bool joined = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (done.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return joined; })) return;
    std::fprintf(stderr,
                 "sprintnet: error: rank %d of %d: the job did not assemble within %.0f s at MASTER_ADDR:MASTER_PORT = "
                 "%s (is rank 0 running there, and WORLD_SIZE the same on every rank?)\n",
                 info.rank, info.world, timeout_s, address.c_str());
    std::_Exit(1);
  });
  ncclComm_t comm = nullptr;
  const ncclResult_t state = ncclCommInitRank(&comm, info.world, id, info.rank);
  {
    const std::lock_guard lock(mutex);
    joined = true;
  }
  done.notify_all();
  watchdog.join();
  if (state != ncclSuccess) {
    if (comm != nullptr) static_cast<void>(ncclCommAbort(comm));
    SN_FAIL("rank {} of {} (GPU {}): NCCL could not join the job at {}: {}{}", info.rank, info.world, device, address,
            ncclGetErrorString(state),
            state == ncclInvalidUsage ? " (two ranks on one GPU? LOCAL_RANK must differ on each machine)" : "");
  }
  return std::make_unique<NcclCommunicator>(info, comm);
}

}  // namespace sprintnet::dist
