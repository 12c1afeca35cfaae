// Which CUDA allocator to build: chosen in code (the config) or by ALLOCATOR_TYPE. Compiled in every
// build so that a config naming an allocator is checked the same way with or without CUDA.
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string_view>

#include "sprintnet/core/error.h"
#include "sprintnet/memory/cuda_allocator.h"

namespace sprintnet {
namespace {

constexpr const char* kAllocatorTypeVariable = "ALLOCATOR_TYPE";

struct KindChoice {
  std::mutex mutex;
  std::optional<CudaAllocatorKind> kind;
  bool fixed = false;  // an allocator has been built with `kind`
};

KindChoice& kind_choice() {
  static KindChoice choice;
  return choice;
}

CudaAllocatorKind kind_from_environment() {
  const char* value = std::getenv(kAllocatorTypeVariable);
  const std::string_view name = value != nullptr ? value : "";
  if (name.empty() || name == "caching") return CudaAllocatorKind::kCaching;
  if (name == "cuda") return CudaAllocatorKind::kAsync;
  SN_FAIL("environment variable {}='{}' is not an allocator: expected 'caching' (ours) or 'cuda' "
          "(cudaMallocAsync)",
          kAllocatorTypeVariable, name);
}

// Requires the lock on choice.mutex.
CudaAllocatorKind resolve(KindChoice& choice) {
  if (!choice.kind) choice.kind = kind_from_environment();
  return *choice.kind;
}

}  // namespace

CudaAllocatorKind parse_cuda_allocator_kind(std::string_view name) {
  if (name == "caching") return CudaAllocatorKind::kCaching;
  if (name == "async") return CudaAllocatorKind::kAsync;
  SN_FAIL("unknown CUDA allocator '{}' (expected caching or async)", name);
}

std::string_view cuda_allocator_kind_name(CudaAllocatorKind kind) {
  return kind == CudaAllocatorKind::kAsync ? "async" : "caching";
}

void set_cuda_allocator_kind(CudaAllocatorKind kind) {
  KindChoice& choice = kind_choice();
  std::lock_guard lock(choice.mutex);
  SN_CHECK(!choice.fixed || *choice.kind == kind,
           "cannot switch the CUDA allocator to {}: the {} allocator is already in use (choose the allocator "
           "before the first CUDA tensor is created)",
           cuda_allocator_kind_name(kind), cuda_allocator_kind_name(*choice.kind));
  choice.kind = kind;
}

CudaAllocatorKind cuda_allocator_kind() {
  KindChoice& choice = kind_choice();
  std::lock_guard lock(choice.mutex);
  return resolve(choice);
}

namespace detail {
CudaAllocatorKind fix_cuda_allocator_kind() {
  KindChoice& choice = kind_choice();
  std::lock_guard lock(choice.mutex);
  const CudaAllocatorKind kind = resolve(choice);
  choice.fixed = true;
  return kind;
}
}  // namespace detail

}  // namespace sprintnet
