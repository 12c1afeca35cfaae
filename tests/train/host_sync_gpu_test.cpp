// "No host in the loop", counted: this test executable interposes the CUDA runtime calls that make
// the host wait for the device (or allocate device or pinned memory, or poll the device) and counts
// every call our code makes while an epoch of the compiled step or the fused engine is enqueued. The
// interposed functions forward to the real ones (dlsym RTLD_NEXT), so the run itself is unchanged;
// calls from sprintnet's static library bind to these definitions when this executable is linked.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <cuda_runtime_api.h>

#include "sprintnet/train/fused_fit.h"
#include "sprintnet/train/trainer.h"
#include "support/gpu.h"
#include "support/scoped_env.h"
#include "support/test_util.h"

namespace {

std::atomic<bool> counting{false};
std::atomic<int> waits{0};            // calls that block the host until device work finishes
std::atomic<int> pageable_copies{0};  // cudaMemcpyAsync to or from pageable host memory: it waits for the copy
std::atomic<int> allocations{0};      // calls that allocate, free, pin or unpin device or host memory
// cudaStreamQuery and cudaEventQuery: a look that returns at once is no wait, but a loop of them is one.
std::atomic<int> polls{0};
std::atomic<int> cooperative_launches{0}, cluster_launches{0}, graph_launches{0};

// Every counter to zero: each counted window of each test starts from it (CountingWindow).
void reset_counters() {
  for (std::atomic<int>* c : {&waits, &pageable_copies, &allocations, &polls, &cooperative_launches,
                              &cluster_launches, &graph_launches}) {
    *c = 0;
  }
}

template <typename F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

void count(std::atomic<int>& counter) {
  if (counting) ++counter;
}

// Host memory the driver has not pinned (cudaHostAlloc, cudaMallocHost, cudaHostRegister): a copy from or to
// it goes through a staging buffer, and the call returns only once the host's side of it is done (a copy to
// the host: after the stream's earlier work).
bool pageable(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // older runtimes answer an error for such memory: not the caller's
    return true;
  }
  return attributes.type == cudaMemoryTypeUnregistered;
}

// Only while counting (the pointer query costs a driver call): whether a copy of `kind` reads or writes
// pageable host memory (cudaMemcpyDefault: either side may be the host's).
bool copies_pageable_memory(void* dst, const void* src, cudaMemcpyKind kind) {
  if (!counting) return false;
  const bool host_src = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost || kind == cudaMemcpyDefault;
  const bool host_dst = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost || kind == cudaMemcpyDefault;
  return (host_src && pageable(src)) || (host_dst && pageable(dst));
}

}  // namespace

// The interposed calls. Each has the CUDA runtime's signature and forwards unchanged.
extern "C" {
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  count(waits);
  static const auto f = real<cudaError_t (*)(cudaStream_t)>("cudaStreamSynchronize");
  return f(s);
}
cudaError_t cudaDeviceSynchronize() {
  count(waits);
  static const auto f = real<cudaError_t (*)()>("cudaDeviceSynchronize");
  return f();
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  count(waits);
  static const auto f = real<cudaError_t (*)(cudaEvent_t)>("cudaEventSynchronize");
  return f(e);
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
  count(polls);
  static const auto f = real<cudaError_t (*)(cudaStream_t)>("cudaStreamQuery");
  return f(s);
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  count(polls);
  static const auto f = real<cudaError_t (*)(cudaEvent_t)>("cudaEventQuery");
  return f(e);
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  count(waits);
  static const auto f = real<cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind)>("cudaMemcpy");
  return f(dst, src, n, kind);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  if (copies_pageable_memory(dst, src, kind)) count(pageable_copies);
  static const auto f =
      real<cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t)>("cudaMemcpyAsync");
  return f(dst, src, n, kind, s);
}
cudaError_t cudaMemset(void* p, int v, size_t n) {
  count(waits);
  static const auto f = real<cudaError_t (*)(void*, int, size_t)>("cudaMemset");
  return f(p, v, n);
}
cudaError_t cudaLaunchCooperativeKernel(const void* kernel, dim3 grid, dim3 block, void** args, size_t shared,
                                        cudaStream_t s) {
  count(cooperative_launches);
  static const auto f =
      real<cudaError_t (*)(const void*, dim3, dim3, void**, size_t, cudaStream_t)>("cudaLaunchCooperativeKernel");
  return f(kernel, grid, block, args, shared, s);
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* kernel, void** args) {
  count(cluster_launches);
  static const auto f = real<cudaError_t (*)(const cudaLaunchConfig_t*, const void*, void**)>("cudaLaunchKernelExC");
  return f(config, kernel, args);
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t s) {
  count(graph_launches);
  static const auto f = real<cudaError_t (*)(cudaGraphExec_t, cudaStream_t)>("cudaGraphLaunch");
  return f(g, s);
}
cudaError_t cudaMalloc(void** p, size_t n) {
  count(allocations);
  static const auto f = real<cudaError_t (*)(void**, size_t)>("cudaMalloc");
  return f(p, n);
}
cudaError_t cudaFree(void* p) {
  count(allocations);
  static const auto f = real<cudaError_t (*)(void*)>("cudaFree");
  return f(p);
}
cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t s) {
  count(allocations);
  static const auto f = real<cudaError_t (*)(void**, size_t, cudaStream_t)>("cudaMallocAsync");
  return f(p, n, s);
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
  count(allocations);
  static const auto f = real<cudaError_t (*)(void*, cudaStream_t)>("cudaFreeAsync");
  return f(p, s);
}
cudaError_t cudaMallocHost(void** p, size_t n) {
  count(allocations);
  static const auto f = real<cudaError_t (*)(void**, size_t)>("cudaMallocHost");
  return f(p, n);
}
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned int flags) {  // the pinned pool's (pinned_host_pool.cpp)
  count(allocations);
  static const auto f = real<cudaError_t (*)(void**, size_t, unsigned int)>("cudaHostAlloc");
  return f(p, n, flags);
}
cudaError_t cudaFreeHost(void* p) {
  count(allocations);
  static const auto f = real<cudaError_t (*)(void*)>("cudaFreeHost");
  return f(p);
}
cudaError_t cudaHostRegister(void* p, size_t n, unsigned int flags) {
  count(allocations);
  static const auto f = real<cudaError_t (*)(void*, size_t, unsigned int)>("cudaHostRegister");
  return f(p, n, flags);
}
cudaError_t cudaHostUnregister(void* p) {
  count(allocations);
  static const auto f = real<cudaError_t (*)(void*)>("cudaHostUnregister");
  return f(p);
}
}

namespace sprintnet::train {
namespace {

// Counts, from zero, the calls made while it lives (each window of each test starts afresh: a test does not
// depend on what ran before it, under --gtest_repeat or --gtest_shuffle too).
class CountingWindow {
 public:
  CountingWindow() {
    reset_counters();
    counting = true;
  }
  ~CountingWindow() { counting = false; }
  CountingWindow(const CountingWindow&) = delete;
  CountingWindow& operator=(const CountingWindow&) = delete;
};

// The test seed (printed by the test main): nothing this file checks depends on the draw.
Config run_config(const std::string& allocator, const std::string& engine = "compiled",
                  const std::string& hidden = "[256, 256]") {
  return config_from_overrides({
      fmt::format("seed={}", test::config_seed()),
      fmt::format("data.dir=\"{}\"", test::data_dir().string()),
      "data.train_limit=10000",
      "data.test_limit=1000",
      fmt::format("model.hidden={}", hidden),
      "train.epochs=3",
      "train.log_every=5",  // many progress reads: each must be asynchronous
      "device.name=\"cuda\"",
      fmt::format("device.engine=\"{}\"", engine),
      fmt::format("device.allocator=\"{}\"", allocator),
      fmt::format("output.dir=\"{}\"", test::temp_dir("host-sync").string()),
      "output.progress=\"none\"",
  });
}

// The interposers see the calls they stand for, and a copy counts as pageable exactly when its host side is:
// the same buffer is counted before it is registered and after it is unregistered, not while it is pinned.
TEST(HostSync, TheCountersSeeTheCallsTheyCount) {
  SN_REQUIRE_GPU();
  constexpr std::size_t kBytes = 4096;
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  void* host = std::aligned_alloc(kBytes, kBytes);  // page-aligned, for cudaHostRegister
  ASSERT_NE(host, nullptr);
  std::memset(host, 0, kBytes);
  void* device = nullptr;
  void* pinned = nullptr;
  {
    const CountingWindow window;
    EXPECT_EQ(cudaMalloc(&device, kBytes), cudaSuccess);
    EXPECT_EQ(cudaHostAlloc(&pinned, kBytes, cudaHostAllocMapped), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(device, host, kBytes, cudaMemcpyHostToDevice, stream), cudaSuccess);  // pageable
    EXPECT_EQ(cudaMemcpyAsync(pinned, device, kBytes, cudaMemcpyDeviceToHost, stream), cudaSuccess);
    EXPECT_EQ(cudaHostRegister(host, kBytes, cudaHostRegisterDefault), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(host, device, kBytes, cudaMemcpyDeviceToHost, stream), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(device, host, kBytes, cudaMemcpyDefault, stream), cudaSuccess);
    EXPECT_EQ(cudaEventRecord(event, stream), cudaSuccess);
    for (const cudaError_t looked : {cudaEventQuery(event), cudaStreamQuery(stream)}) {
      EXPECT_TRUE(looked == cudaSuccess || looked == cudaErrorNotReady) << cudaGetErrorString(looked);
    }
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(cudaHostUnregister(host), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(host, device, kBytes, cudaMemcpyDefault, stream), cudaSuccess);  // pageable again
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
    EXPECT_EQ(cudaFree(device), cudaSuccess);
  }
  EXPECT_EQ(allocations.load(), 6) << "cudaMalloc, cudaHostAlloc, cudaHostRegister, cudaHostUnregister, cudaFreeHost, "
                                      "cudaFree";
  EXPECT_EQ(pageable_copies.load(), 2) << "the copies from and to the buffer while it was not registered";
  EXPECT_EQ(polls.load(), 2) << "cudaEventQuery, cudaStreamQuery";
  EXPECT_EQ(waits.load(), 2) << "the two cudaStreamSynchronize";
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  std::free(host);
}

TEST(HostSync, AnEpochOfTheCompiledStepNeverWaitsForTheDeviceNorAllocates) {
  SN_REQUIRE_GPU();
  Trainer trainer(run_config("caching"));
  TrainPlan* plan = trainer.plan();
  ASSERT_NE(plan, nullptr) << "the config should compile";
  const std::int64_t steps = trainer.steps_per_epoch();
  // The first epoch captures the graph (allowed to allocate and wait).
  plan->start_epoch(0);
  for (std::int64_t s = 0; s < steps; ++s) plan->step();
  plan->finish_epoch();

  std::int64_t reads = 0, snapshots = 0;
  {
    const CountingWindow window;
    plan->start_epoch(1);
    for (std::int64_t s = 0; s < steps; ++s) {
      plan->step();
      if ((s + 1) % 5 == 0) {
        ++reads;
        if (plan->progress(s + 1)) ++snapshots;
      }
    }
  }
  EXPECT_EQ(waits.load(), 0) << "synchronising CUDA calls while enqueuing an epoch";
  EXPECT_EQ(pageable_copies.load(), 0) << "copies to or from pageable host memory while enqueuing an epoch";
  EXPECT_EQ(allocations.load(), 0) << "device or pinned allocations while enqueuing an epoch";
  // A progress read looks (cudaEventQuery, which returns at once) whether the reads it asked for earlier
  // have arrived: each arrived one once, and at most one that has not, a call; so at most 2 a call. More
  // would be a wait by polling. The reads do look, so the count shows the poll counter sees the plan's calls.
  EXPECT_GT(polls.load(), 0) << "the progress reads' event queries went uncounted";
  EXPECT_LE(polls.load(), 2 * reads) << "cudaEventQuery/cudaStreamQuery polled while enqueuing an epoch";

  // The counters do count: finishing the epoch waits exactly once (its one read, into pinned memory).
  const EpochTotals totals = [&] {
    const CountingWindow window;
    return plan->finish_epoch();
  }();
  EXPECT_EQ(waits.load(), 1);
  EXPECT_EQ(pageable_copies.load(), 0);
  EXPECT_GT(totals.loss_sum, 0.0);
  std::printf("epoch of %lld steps: 0 waits, 0 allocations while enqueued; %lld progress snapshots seen on the way\n",
              static_cast<long long>(steps), static_cast<long long>(snapshots));
}

// The fused engine: an epoch is one cooperative launch of its kernel (after the permutation's
// sort), no graph, no wait, no allocation; progress comes from host-mapped memory (no poll).
// The grid kernel (one cooperative launch), the cluster, rows and split kernels (one launch with a
// cluster shape each; "split_narrow": its 256-wide shape), each asked for.
class FusedKernels : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedKernels, AnEpochOfTheFusedEngineIsOneLaunchAndNoWait) {
  SN_REQUIRE_GPU();
  const bool narrow = GetParam() == "split_narrow";
  const std::string kernel = narrow ? "split" : GetParam();
  if (kernel == "split" && !gpu_runs_split_kernel(0, narrow ? 256 : 784, narrow ? 2 : 3)) {
    GTEST_SKIP() << "this GPU or build does not run the split kernel";
  }
  if (kernel == "regression" && !gpu_runs_regression_kernel(0)) {
    GTEST_SKIP() << "this GPU or build does not run the regression kernel";
  }
  nn::MlpSpec rows_model;
  rows_model.hidden = {128, 128};
  if (kernel == "rows" && !gpu_runs_rows_kernel(0, rows_model)) GTEST_SKIP() << "this GPU or build does not run the rows kernel";
  nn::MlpSpec quads_model;
  quads_model.hidden = {256, 256};
  if (kernel == "quads" && !gpu_runs_quads_kernel(0, quads_model)) {
    GTEST_SKIP() << "this GPU or build does not run the quads kernel";
  }
  const std::string hidden = kernel == "cluster" || kernel == "rows" ? "[128, 128]"
                             : kernel == "split"      ? (narrow ? "[256, 256]" : "[784, 784, 784]")
                             : kernel == "regression" ? "[]"
                                                      : "[256, 256]";
  std::optional<Trainer> made;
  {
    const test::ScopedEnv choice("SPRINTNET_FUSED_KERNEL", kernel);  // the plan reads it when built
    made.emplace(run_config("caching", "fused", hidden));
  }
  Trainer& trainer = *made;
  ASSERT_EQ(trainer.describe().find("16-block cluster") != std::string::npos, kernel == "cluster") << trainer.describe();
  ASSERT_EQ(trainer.describe().find("blocks in clusters of") != std::string::npos, kernel == "split") << trainer.describe();
  ASSERT_EQ(trainer.describe().find("8-block cluster") != std::string::npos, kernel == "regression") << trainer.describe();
  ASSERT_EQ(trainer.describe().find("the batch's rows split") != std::string::npos, kernel == "rows") << trainer.describe();
  ASSERT_EQ(trainer.describe().find("as four quads") != std::string::npos, kernel == "quads") << trainer.describe();
  TrainPlan* plan = trainer.plan();
  ASSERT_NE(plan, nullptr);
  const std::int64_t steps = trainer.steps_per_epoch();
  {
    const CountingWindow window;
    plan->start_epoch(0);
    for (std::int64_t s = 0; s < steps; ++s) {
      plan->step();
      if ((s + 1) % 5 == 0) plan->progress(s + 1);
    }
  }
  EXPECT_EQ(cooperative_launches.load(), kernel == "grid" ? 1 : 0) << "the grid kernel's epoch";
  EXPECT_EQ(cluster_launches.load(), kernel == "grid" ? 0 : 1) << "the cluster, rows, split or regression kernel's epoch";
  EXPECT_EQ(graph_launches.load(), 0);
  EXPECT_EQ(waits.load(), 0) << "synchronising CUDA calls while enqueuing an epoch";
  EXPECT_EQ(pageable_copies.load(), 0) << "copies to or from pageable host memory while enqueuing an epoch";
  EXPECT_EQ(allocations.load(), 0) << "device or pinned allocations while enqueuing an epoch";
  EXPECT_EQ(polls.load(), 0) << "progress is read from host-mapped memory, with no CUDA call";
  const EpochTotals totals = plan->finish_epoch();
  EXPECT_GT(totals.loss_sum, 0.0);
  const auto seen = plan->progress(steps);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->steps, steps) << "the kernel's last progress record";
  EXPECT_DOUBLE_EQ(seen->loss_sum, totals.loss_sum);
}

INSTANTIATE_TEST_SUITE_P(HostSync, FusedKernels, ::testing::Values("grid", "cluster", "rows", "quads", "split", "split_narrow",
                                                                   "regression"),
                         [](const auto& case_info) { return case_info.param; });

}  // namespace
}  // namespace sprintnet::train
