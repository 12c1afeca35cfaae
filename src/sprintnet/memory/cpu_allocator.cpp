#include <cstdlib>
#include <new>

#include "sprintnet/core/error.h"
#include "sprintnet/core/out_of_memory_error.h"
#include "sprintnet/memory/allocator.h"

namespace sprintnet {
namespace {

constexpr std::size_t kCpuAlignmentBytes = 64;

class CpuAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override {
    if (bytes == 0) return nullptr;
    const std::size_t rounded = (bytes + kCpuAlignmentBytes - 1) / kCpuAlignmentBytes * kCpuAlignmentBytes;
    void* ptr = std::aligned_alloc(kCpuAlignmentBytes, rounded);
    if (ptr == nullptr) SN_FAIL_OUT_OF_HOST_MEMORY("out of host memory allocating {} bytes", bytes);
    return ptr;
  }
  void deallocate(void* ptr, std::size_t /*bytes*/) noexcept override { std::free(ptr); }
  Device device() const override { return Device::cpu(); }
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

}  // namespace sprintnet
