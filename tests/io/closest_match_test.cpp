#include <gtest/gtest.h>

#include <array>

#include "sprintnet/io/closest_match.h"

namespace sprintnet {
namespace {

TEST(EditDistance, KnownValues) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("momentum", "momentum"), 0u);
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2u);
}

TEST(ClosestMatch, SuggestsTyposAndAbbreviationsButNotNonsense) {
  constexpr std::array<std::string_view, 4> kCandidates = {"lr", "momentum", "weight_decay", "nesterov"};
  EXPECT_EQ(closest_match("momentun", kCandidates), "momentum");
  EXPECT_EQ(closest_match("learning_rate", kCandidates), "lr");
  EXPECT_EQ(closest_match("wd", kCandidates), "weight_decay");
  EXPECT_EQ(closest_match("weightdecay", kCandidates), "weight_decay");
  EXPECT_EQ(closest_match("momentum_decay", kCandidates), "momentum");
  EXPECT_EQ(closest_match("qqqqqqq", kCandidates), std::nullopt);
  EXPECT_EQ(closest_match("x", std::span<const std::string_view>()), std::nullopt);
}

}  // namespace
}  // namespace sprintnet
