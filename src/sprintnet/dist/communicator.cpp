#include "sprintnet/dist/communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <cstdlib>
#include <string>
#include <thread>

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/error.h"
#include "sprintnet/dist/stall_detector.h"
#include "sprintnet/ops/cuda/device_guard.h"
#include "sprintnet/ops/cuda/launch.h"

namespace sprintnet::dist {
namespace {

using Clock = std::chrono::steady_clock;

// The marks a rank records on its stream, and the watchdog thread that notices when the device
// passes them and ends the process when none passes for the stall limit (dist/stall_detector.h).
// A mark is a one-element fill kernel that writes the mark's number into pinned host memory, so
// the watchdog reads progress from plain memory and makes no CUDA call. (A first version that
// queried CUDA events never fired on 4 H200s when a peer was killed; the likely cause, not pinned
// down, is a CUDA call blocking behind the rank's own thread stuck in a launch on a full queue.)
class ProgressWatchdog {
 public:
  explicit ProgressWatchdog(const RankInfo& info) : info_(info) {
    SN_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&passed_), sizeof(*passed_), cudaHostAllocMapped));
    *passed_ = 0;
    SN_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&passed_on_device_), passed_, 0));
    thread_ = std::thread([this] { watch(); });
  }
  ~ProgressWatchdog() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
    count_passed();
    // cudaFreeHost waits for the device: with marks still pending (a failed job) the device may
    // never get there, so the page stays with the process that is about to end.
    if (detector_.pending() == 0) static_cast<void>(cudaFreeHost(passed_));
  }
  ProgressWatchdog(const ProgressWatchdog&) = delete;
  ProgressWatchdog& operator=(const ProgressWatchdog&) = delete;

  // Called by one thread only (the trainer's), outside the lock while it enqueues: a full launch
  // queue blocks the launch, and the watchdog must still run then.
  void mark(cudaStream_t stream) {
    const std::uint64_t number = ++issued_;
    SN_CUDA_CHECK(cuda::launch_fill(passed_on_device_, 1, sizeof(number), number, stream));
    const std::lock_guard lock(mutex_);
    detector_.recorded(seconds());
  }

 private:
  static constexpr auto kPoll = std::chrono::milliseconds(100);

  static double seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

  void count_passed() {
    const std::uint64_t passed = __atomic_load_n(passed_, __ATOMIC_ACQUIRE);
    for (; seen_ < passed && detector_.pending() > 0; ++seen_) detector_.passed(seconds());
  }

  void watch() {
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, kPoll, [this] { return stop_; })) {
      count_passed();
      if (detector_.stalled(seconds())) {
        // Exit from here, with no CUDA or NCCL call (either may block behind the stuck thread):
        // files the rank writes are written atomically, so none is left half-written.
        std::fprintf(stderr,
                     "sprintnet: error: rank %d of %d: no progress for %.0f s: another rank has stopped or hangs; "
                     "the job stops\n",
                     info_.rank, info_.world, detector_.limit_s());
        std::fflush(stderr);
        std::_Exit(1);
      }
    }
  }

  RankInfo info_;
  std::uint64_t* passed_ = nullptr;            // pinned host memory: the number of the last mark passed
  std::uint64_t* passed_on_device_ = nullptr;  // the same memory as the device addresses it
  std::uint64_t issued_ = 0;                   // marks recorded (the trainer's thread only)
  std::uint64_t seen_ = 0;                     // marks the watchdog has counted as passed
  StallDetector detector_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(RankInfo info, ncclComm_t comm)
      : Communicator(std::move(info)), comm_(comm), watchdog_(std::make_unique<ProgressWatchdog>(info_)) {}
  // Abort, not destroy: the job's last collective (the epoch's sums) is done when this runs, and
  // ncclCommDestroy can wait on peers that have already left (a 2-GPU run hung at exit on H200s).
  ~NcclCommunicator() override {
    watchdog_.reset();  // before the abort: it must not report the aborted communicator's work as a stall
    if (comm_ != nullptr && !aborted_) static_cast<void>(ncclCommAbort(comm_));
  }

  void* nccl_handle() const override { return comm_; }

  void check() override {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &async);
    if (r == ncclSuccess && async == ncclSuccess) return;
    fail(fmt::format("NCCL reported {}", ncclGetErrorString(r != ncclSuccess ? r : async)));
  }

  void mark(void* stream) override { watchdog_->mark(static_cast<cudaStream_t>(stream)); }

  void wait(void* stream) override {
    mark(stream);
    auto pause = std::chrono::microseconds(20);
    while (true) {
      const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream));
      if (e == cudaSuccess) return;
      SN_CHECK(e == cudaErrorNotReady, "rank {}: {}", info_.rank, cudaGetErrorString(e));
      check();
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    }
  }

 private:
  // The watchdog stays: if the abort, or freeing memory while the exception unwinds, blocks
  // behind the stuck device, it still ends the process.
  [[noreturn]] void fail(const std::string& why) {
    static_cast<void>(ncclCommAbort(comm_));
    aborted_ = true;
    SN_FAIL("rank {} of {}: {}; the job stops", info_.rank, info_.world, why);
  }

  ncclComm_t comm_;
  bool aborted_ = false;
  std::unique_ptr<ProgressWatchdog> watchdog_;
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
