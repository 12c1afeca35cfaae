// sprintnet's own values for the Python port in tools/ (see known_answers.h):
// recomputed here and compared with golden/port_known_answers.json, so the
// file, and with it tools/test_sprintnet_port.py, can never silently drift
// from the C++. SPRINTNET_UPDATE_GOLDEN=1 rewrites the file instead.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "parity/golden_file.h"
#include "parity/json_compare.h"
#include "parity/known_answers.h"
#include "sprintnet/io/atomic_file.h"
#include "support/test_util.h"

namespace sprintnet::parity {
namespace {

constexpr std::size_t kDifferencesShown = 20;

TEST(PortKnownAnswers, MatchTheStoredFile) {
  const nlohmann::ordered_json computed = compute_known_answers(test::temp_dir("known-answers"));
  // Guards that the values are real: the published Philox answer, and a permutation that is one.
  ASSERT_EQ(computed.at("philox")[0].at("words")[0].get<std::uint32_t>(), 0x6627e8d5u);
  const auto first = computed.at("permutation")[2].at("first").get<std::vector<std::int32_t>>();
  std::vector<std::int32_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], static_cast<std::int32_t>(i));

  const auto path = golden_dir() / kKnownAnswersFileName;
  if (std::getenv("SPRINTNET_UPDATE_GOLDEN") != nullptr) {
    write_text_file_atomically(path, computed.dump(1) + "\n");
    std::printf("wrote %s; now run python3 tools/test_sprintnet_port.py\n", path.string().c_str());
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path << " is missing: run SPRINTNET_UPDATE_GOLDEN=1 parity_test "
                         << "--gtest_filter='PortKnownAnswers.*' to write it";
  std::stringstream text;
  text << in.rdbuf();
  const auto stored = nlohmann::ordered_json::parse(text.str());

  std::vector<std::string> differences;
  for (const auto& [section, value] : computed.items()) {
    if (!stored.contains(section)) {
      differences.push_back(section + ": not in the stored file");
      continue;
    }
    compare_json(value, stored.at(section), known_answer_tolerance(section), section, differences);
  }
  std::string shown;
  for (std::size_t i = 0; i < std::min(differences.size(), kDifferencesShown); ++i) shown += "\n  " + differences[i];
  EXPECT_TRUE(differences.empty())
      << differences.size() << " values differ from " << path.string() << ":" << shown
      << "\nIf sprintnet's maths changed on purpose: regenerate with SPRINTNET_UPDATE_GOLDEN=1 parity_test "
         "--gtest_filter='PortKnownAnswers.*', then make python3 tools/test_sprintnet_port.py pass (the Python "
         "port in tools/ needs the same change).";
}

TEST(JsonCompare, ReportsEachDifferenceWithItsPath) {
  const auto stored = nlohmann::ordered_json::parse(R"({"a": [1, 2.5, "x"], "b": {"c": 1.0}, "gone": 1})");
  const auto here = nlohmann::ordered_json::parse(R"({"a": [1, 2.5000001, "y"], "b": {"c": 1.0}, "new": 2})");
  std::vector<std::string> differences;
  compare_json(here, stored, 1e-9, "root", differences);
  ASSERT_EQ(differences.size(), 4u);
  EXPECT_NE(differences[0].find("root.a[1]"), std::string::npos) << differences[0];
  EXPECT_NE(differences[1].find("root.a[2]"), std::string::npos) << differences[1];
  differences.clear();
  compare_json(here.at("a")[1], stored.at("a")[1], 1e-6, "x", differences);  // within a looser tolerance
  EXPECT_TRUE(differences.empty());
}

}  // namespace
}  // namespace sprintnet::parity
