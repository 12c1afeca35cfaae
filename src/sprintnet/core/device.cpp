#include "sprintnet/core/device.h"

#include <charconv>

#include "sprintnet/core/error.h"
#include "sprintnet/ops/backend.h"

namespace sprintnet {

std::string Device::str() const { return is_cpu() ? "cpu" : fmt::format("cuda:{}", index); }

bool cuda_available() { return cuda_device_count() > 0; }

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::cpu();
  if (name == "auto") return cuda_available() ? Device::cuda(0) : Device::cpu();
  if (name == "cuda") return Device::cuda(0);
  if (name.starts_with("cuda:")) {
    int index = -1;
    auto digits = name.substr(5);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    // Digits only, without leading zeros (as PyTorch's parser): "cuda:01" would name the same GPU as "cuda:1" in one
    // run and be written differently in another's config.
    const bool canonical = !digits.empty() && (digits.size() == 1 || digits[0] != '0');
    SN_CHECK(canonical && ec == std::errc() && end == digits.data() + digits.size() && index >= 0,
             "bad device '{}': expected cuda:N (N a GPU's index, without leading zeros)", name);
    return Device::cuda(index);
  }
  SN_FAIL("unknown device '{}' (expected auto, cpu, cuda or cuda:N)", name);
}

}  // namespace sprintnet
