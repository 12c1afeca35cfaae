#pragma once
// CUDA graph capture beside other threads (a sweep's runs share a GPU from worker threads): a call
// that waits for the whole device (cudaFree, cudaFreeHost, and the allocations that pair with them)
// made by one thread while another thread captures a graph invalidates that capture
// (cudaErrorStreamCaptureInvalidated, seen with 6 runs on an H100). Captures hold this lock shared,
// so they still run side by side; such calls hold it exclusively and wait for the captures under
// way. The allocators' rare paths (an out-of-memory retry, emptying the cache) do not take it: they
// run with the allocator's own lock held, which a capturing thread may be waiting for.
#include <mutex>  // std::unique_lock, for the callers
#include <shared_mutex>

namespace sprintnet {

std::shared_mutex& graph_capture_mutex();

}  // namespace sprintnet
