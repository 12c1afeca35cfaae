// The CUDA allocator's entry points in a build without CUDA: each says why there is no CUDA memory,
// so callers need no #if of their own.
#include "sprintnet/core/error.h"
#include "sprintnet/memory/cuda_allocator.h"
#include "sprintnet/ops/backend.h"

namespace sprintnet {
namespace {

[[noreturn]] void fail_without_cuda(int index) {
  SN_FAIL("no CUDA allocator for cuda:{}: {}", index, cuda_unavailable_reason());
}

}  // namespace

Allocator& cuda_allocator(int index) { fail_without_cuda(index); }
AllocatorStats cuda_allocator_stats(int index) { fail_without_cuda(index); }
std::string_view cuda_allocator_name(int index) { fail_without_cuda(index); }
void set_cuda_allocator_stream(int index, void* /*cuda_stream*/) { fail_without_cuda(index); }
void set_thread_cuda_allocator_stream(int index, void* /*cuda_stream*/) { fail_without_cuda(index); }
void empty_cuda_allocator_cache(int index) { fail_without_cuda(index); }

}  // namespace sprintnet
