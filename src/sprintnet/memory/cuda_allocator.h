#pragma once
// Device memory on CUDA: the allocator the CUDA backend hands to tensors.
// Two implementations behind the Allocator interface:
//   caching - our own caching allocator (memory/caching_allocator.h)
//   async   - CUDA's stream-ordered allocator, cudaMallocAsync on a pool that keeps memory cached
// Chosen by set_cuda_allocator_kind() (config key device.allocator) or, when not
// set, the environment variable ALLOCATOR_TYPE ("cuda" selects async).
#include <string_view>

#include "sprintnet/memory/allocator.h"

namespace sprintnet {

enum class CudaAllocatorKind { kCaching, kAsync };

CudaAllocatorKind parse_cuda_allocator_kind(std::string_view name);
void set_cuda_allocator_kind(CudaAllocatorKind kind);
// Allocator for CUDA device `index` (only in builds with CUDA).
Allocator& cuda_allocator(int index);

}  // namespace sprintnet
