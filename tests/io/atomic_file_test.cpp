#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "sprintnet/core/error.h"
#include "sprintnet/core/random.h"
#include "sprintnet/io/atomic_file.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

TEST(WriteTextFileAtomically, WritesAndReplacesLeavingNoTemporaries) {
  Generator gen(test::test_seed());
  const auto dir = test::temp_dir("atomic");
  const auto path = dir / "config.toml";
  std::string first(1 + gen.below(100000), '\0');
  for (char& c : first) c = static_cast<char>(gen.below(256));  // any bytes, NULs included
  write_text_file_atomically(path, first);
  EXPECT_EQ(test::file_bytes(path), first);
  write_text_file_atomically(path, "short");
  EXPECT_EQ(test::file_bytes(path), "short");
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "config.toml");
  }
  EXPECT_EQ(files, 1u);
}

TEST(WriteTextFileAtomically, MissingDirectoryNamesThePath) {
  EXPECT_THAT([] { write_text_file_atomically("/nonexistent/sprintnet/config.toml", "x"); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("/nonexistent/sprintnet/config.toml")));
}

// What a process killed mid-write leaves goes; everything else in the folder stays.
TEST(WriteTextFileAtomically, UnfinishedWritesAreRemovedAndNothingElse) {
  const auto dir = test::temp_dir("atomic-leftovers");
  for (const char* name : {".sweep.json.tmp.12414.15", ".summary.csv.tmp.7.0", "summary.csv", ".hidden", "a.tmp.1.2"}) {
    std::ofstream(dir / name) << "x";
  }
  std::filesystem::create_directory(dir / ".epoch-0002.tmp.99");  // a folder, not a file write_text_file_atomically makes
  remove_unfinished_atomic_writes(dir);
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{".epoch-0002.tmp.99", ".hidden", "a.tmp.1.2", "summary.csv"}));
}

}  // namespace
}  // namespace sprintnet
