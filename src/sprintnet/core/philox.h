#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
// Counter-based: the numbers depend only on (key, counter), so the CPU and a
// GPU kernel produce the same stream without sharing state. Header-only and
// usable from device code.
#include <array>
#include <cstdint>

#if defined(__CUDACC__)
#define SN_HOST_DEVICE __host__ __device__
#else
#define SN_HOST_DEVICE
#endif

namespace sprintnet {

struct PhiloxBlock {
  std::uint32_t v[4];
};

SN_HOST_DEVICE inline PhiloxBlock philox4x32_10(std::uint64_t key, std::uint64_t counter_lo, std::uint64_t counter_hi) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  std::uint32_t c0 = static_cast<std::uint32_t>(counter_lo), c1 = static_cast<std::uint32_t>(counter_lo >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(counter_hi), c3 = static_cast<std::uint32_t>(counter_hi >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c0;
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c2;
    const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

// 24 random bits mapped to [0, 1): exact in fp32, identical on every device.
SN_HOST_DEVICE inline float uint_to_unit_float(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// Sort key of sample i in epoch `epoch`: an epoch's order is the samples sorted by (key, i).
// Here, not in random.h, because the GPU computes the same keys (ops/cuda/permutation.cu).
SN_HOST_DEVICE inline std::uint32_t permutation_key(std::uint64_t seed, std::uint64_t epoch, std::uint64_t i) {
  return philox4x32_10(seed ^ 0x5851F42D4C957F2DULL, i, epoch).v[0];
}

}  // namespace sprintnet
