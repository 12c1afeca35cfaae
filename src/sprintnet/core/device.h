#pragma once
// Where a tensor lives. Index is the CUDA ordinal; always 0 for the CPU.
#include <string>
#include <string_view>

namespace sprintnet {

enum class DeviceType { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device cpu() { return {DeviceType::kCPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

// "cpu", "cuda", "cuda:1"; "auto" picks the first GPU when one is usable, else the CPU.
Device parse_device(std::string_view name);
bool cuda_available();

}  // namespace sprintnet
