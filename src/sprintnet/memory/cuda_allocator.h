#pragma once
// Device memory on CUDA: the allocator the CUDA backend hands to tensors.
// Two implementations behind the Allocator interface:
//   caching - our own caching allocator (memory/caching_allocator.h) over cudaMalloc/cudaFree
//   async   - CUDA's stream-ordered allocator, cudaMallocAsync on a pool that keeps memory cached
// Chosen by set_cuda_allocator_kind() (config key device.allocator) or, when not
// set, the environment variable ALLOCATOR_TYPE ("cuda" selects async).
// With SPRINTNET_LOG_ALLOC=1 every real device allocation and release is logged to stderr.
//
// The functions that touch a device exist in every build; without CUDA they
// throw sprintnet::Error saying so (set_cuda_allocator_kind and parsing work everywhere).
#include <string_view>

#include "sprintnet/memory/allocator.h"
#include "sprintnet/memory/caching_allocator.h"

namespace sprintnet {

enum class CudaAllocatorKind { kCaching, kAsync };

// "caching" or "async", the values of the config key device.allocator.
CudaAllocatorKind parse_cuda_allocator_kind(std::string_view name);
std::string_view cuda_allocator_kind_name(CudaAllocatorKind kind);
// Call before the first CUDA allocation; asking for another kind after that is an error.
void set_cuda_allocator_kind(CudaAllocatorKind kind);
// The kind set, else the one ALLOCATOR_TYPE names: "cuda" -> async; "caching", empty or unset -> caching;
// any other value is an error naming the variable.
CudaAllocatorKind cuda_allocator_kind();

// Allocator for CUDA device `index`, created on first use with cuda_allocator_kind() (which is then fixed).
Allocator& cuda_allocator(int index);
// Its statistics (all zero before its first use). For the async kind see cuda_allocator.cpp for what
// each field means: CUDA's pool does not show its individual device allocations.
AllocatorStats cuda_allocator_stats(int index);
// "caching" or "async": the kind of the allocator for `index` (the kind it will have, before first use).
std::string_view cuda_allocator_name(int index);
// The stream allocations and frees are ordered on: the CUDA backend's stream (a cudaStream_t), set
// once when the backend creates it. Until then the legacy default stream (0).
void set_cuda_allocator_stream(int index, void* cuda_stream);
// This thread's allocations on device `index` are ordered on `cuda_stream` instead (nullptr: the
// device's stream again). Set by cuda::StreamScope for runs that share a GPU from worker threads
// (sweep): a freed block then serves only later requests on the same stream (caching), or is freed
// on the stream it was allocated on (async), so runs on other streams never race for it.
void set_thread_cuda_allocator_stream(int index, void* cuda_stream);
// Synchronises the device and returns the cached memory that no allocation uses to CUDA.
void empty_cuda_allocator_cache(int index);

namespace detail {
// cuda_allocator_kind(), after which set_cuda_allocator_kind() may no longer change it
// (for cuda_allocator.cpp, when it creates the first allocator).
CudaAllocatorKind fix_cuda_allocator_kind();
}  // namespace detail

}  // namespace sprintnet
