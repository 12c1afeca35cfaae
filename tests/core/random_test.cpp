#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "sprintnet/core/random.h"

namespace sprintnet {
namespace {

TEST(Philox, MatchesPublishedKnownAnswer) {
  // Random123's kat_vectors: philox4x32-10 with counter = key = 0 ...
  PhiloxBlock zero = philox4x32_10(0, 0, 0);
  EXPECT_EQ(zero.v[0], 0x6627e8d5u);
  EXPECT_EQ(zero.v[1], 0xe169c58du);
  EXPECT_EQ(zero.v[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.v[3], 0x9b00dbd8u);
  // ... and with all bits set.
  PhiloxBlock ones = philox4x32_10(~0ULL, ~0ULL, ~0ULL);
  EXPECT_EQ(ones.v[0], 0x408f276du);
  EXPECT_EQ(ones.v[1], 0x41c83b0eu);
  EXPECT_EQ(ones.v[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.v[3], 0x6d5451fdu);
}

TEST(Generator, SameSeedSameStreamAndStateRoundTrips) {
  Generator a(42), b(42), c(43);
  std::vector<std::uint32_t> xa, xb, xc;
  for (int i = 0; i < 10; ++i) {
    xa.push_back(a.next_u32());
    xb.push_back(b.next_u32());
    xc.push_back(c.next_u32());
  }
  EXPECT_EQ(xa, xb);
  EXPECT_NE(xa, xc);
  GeneratorState saved = a.state();
  const double next = a.normal();
  a.set_state(saved);
  EXPECT_EQ(a.normal(), next);
}

TEST(Generator, UniformAndNormalMoments) {
  Generator g(7);
  constexpr int kSamples = 200000;
  double sum = 0, sum_sq = 0, usum = 0;
  for (int i = 0; i < kSamples; ++i) {
    const double z = g.normal();
    sum += z;
    sum_sq += z * z;
    const double u = g.uniform_double();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    usum += u;
  }
  // Standard errors: mean 1/sqrt(n) ~ 0.0022, variance sqrt(2/n) ~ 0.0032; 5 sigma bounds.
  EXPECT_NEAR(sum / kSamples, 0.0, 0.012);
  EXPECT_NEAR(sum_sq / kSamples, 1.0, 0.016);
  EXPECT_NEAR(usum / kSamples, 0.5, 0.0035);
}

TEST(EpochPermutation, IsAPermutationThatChangesWithEpochAndSeed) {
  auto p0 = epoch_permutation(1, 0, 1000);
  auto p1 = epoch_permutation(1, 1, 1000);
  auto q0 = epoch_permutation(2, 0, 1000);
  EXPECT_EQ(p0, epoch_permutation(1, 0, 1000));
  EXPECT_NE(p0, p1);
  EXPECT_NE(p0, q0);
  auto sorted = p0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int32_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
}

}  // namespace
}  // namespace sprintnet
