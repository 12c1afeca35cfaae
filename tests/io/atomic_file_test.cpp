#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

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

}  // namespace
}  // namespace sprintnet
