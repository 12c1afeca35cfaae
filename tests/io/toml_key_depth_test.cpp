// find_deep_toml_key: the scan that keeps a key of tens of thousands of dotted parts from the TOML reader, which
// recursed once a part until the stack ran out. It must find such a key however it is written and wherever it
// stands, and never take the dots of a string, a comment or a number for one.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "sprintnet/io/read_file.h"
#include "sprintnet/io/toml_key_depth.h"

namespace sprintnet {
namespace {

// `parts` copies of `part` joined by `dot`: "a.a.a" for ("a", 3, ".").
std::string dotted(const std::string& part, std::size_t parts, const std::string& dot = ".") {
  std::string out = part;
  for (std::size_t i = 1; i < parts; ++i) out += dot + part;
  return out;
}

constexpr std::size_t kMost = kMaxTomlKeyParts;

TEST(TomlKeyDepth, TheLimitItselfPassesAndOneMorePartIsFound) {
  EXPECT_EQ(find_deep_toml_key(dotted("a", kMost) + " = 1\n"), std::nullopt);
  EXPECT_EQ(find_deep_toml_key(dotted("a", kMost + 1) + " = 1\n"), 1u);
  // The crash's own input: 80 KB of one key.
  EXPECT_EQ(find_deep_toml_key(dotted("a", 40000) + ".b = 1\n"), 1u);
}

TEST(TomlKeyDepth, EveryWayOfWritingAKeyIsFound) {
  const std::size_t n = kMost + 1;
  for (const std::string& key :
       {dotted("a", n), dotted("1", n), dotted("\"a\"", n), dotted("'a'", n), dotted("\"a.b\"", n),
        dotted("a", n, " . "), dotted("a", n, "\t.\t"), dotted("a-b_c", n), dotted("\"\"", n),
        // A quote escaped in a basic string does not end it; a literal string has no escapes.
        dotted("\"\\\"\"", n), dotted("'a\\'", n)}) {
    EXPECT_EQ(find_deep_toml_key("seed = 1\n" + key + " = 1\n"), 2u) << key.substr(0, 40);
  }
}

TEST(TomlKeyDepth, TableHeadersAndInlineTablesAreScannedToo) {
  const std::string key = dotted("a", kMost + 1);
  EXPECT_EQ(find_deep_toml_key("seed = 1\n[" + key + "]\nx = 1\n"), 2u);
  EXPECT_EQ(find_deep_toml_key("[[" + key + "]]\n"), 1u);
  EXPECT_EQ(find_deep_toml_key("[optim]\nlr = 0.1\nt = { x = 1, " + key + " = 1 }\n"), 3u);
  EXPECT_EQ(find_deep_toml_key("v = [{ " + key + " = 1 }]"), 1u);
}

TEST(TomlKeyDepth, TheLineCountsTheLinesInsideMultiLineStrings) {
  const std::string key = dotted("a", kMost + 1);
  EXPECT_EQ(find_deep_toml_key("s = \"\"\"\none\ntwo\n\"\"\"\n" + key + " = 1\n"), 5u);
  EXPECT_EQ(find_deep_toml_key("s = '''\none\n'''\n# a comment\n\n" + key + " = 1\n"), 6u);
  // A line-ending backslash in a multi-line basic string escapes no line break from the count.
  EXPECT_EQ(find_deep_toml_key("s = \"\"\"a \\\n  b\"\"\"\n" + key + " = 1\n"), 3u);
}

// Against a scan that counted every '.': each of these has hundreds of dots in a row of text, none joining key parts.
TEST(TomlKeyDepth, DotsInStringsCommentsNumbersAndDatesJoinNothing) {
  const std::string many = dotted("a", 10 * kMost);
  std::string floats = "v = [1.5";
  for (int i = 0; i < 10000; ++i) floats += ", " + std::to_string(i) + ".25e-3";
  floats += "]\n";
  for (const std::string& text :
       {"s = \"" + many + "\"\n", "s = '" + many + "'\n", "s = \"\\\"" + many + "\"\n",
        "s = \"\"\"\n" + many + "\n\"\"\"\n", "s = '''" + many + "'''\n",
        "s = \"\"\"a\\\"\"\"" + many + "\"\"\"\n",  // an escaped quote does not close the string
        "# " + many + "\n", "x = 1 # " + many + "\n", floats,
        std::string("d = 1979-05-27T07:32:00.999999-07:00\nt = 07:32:00.5\nday = 1979-05-27\nx = 1.5\ny = -0.0\n"),
        "k." + dotted("\"" + many + "\"", kMost - 1) + " = 1\n"}) {
    EXPECT_EQ(find_deep_toml_key(text), std::nullopt) << text.substr(0, 60);
  }
}

// """a""""" holds a"": the two quotes before the closing three are the string's. (Not TOML after it: a scan that
// left them behind would take them for an empty key part, and the 64 after the dot for a 65th.)
TEST(TomlKeyDepth, QuotesBeforeAMultiLineStringsCloseAreItsOwn) {
  const std::string key = dotted("a", kMost);
  EXPECT_EQ(find_deep_toml_key("s = \"\"\"a\"\"\"\"\"." + key + " = 1\n"), std::nullopt);
  EXPECT_EQ(find_deep_toml_key("s = '''a'''''." + key + " = 1\n"), std::nullopt);
  EXPECT_EQ(find_deep_toml_key("s = \"\"." + key + " = 1\n"), 1u);  // the same after an empty string: 65 parts
}

TEST(TomlKeyDepth, ShippedConfigsHaveNoDeepKey) {
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(SPRINTNET_SOURCE_DIR) / "configs")) {
    EXPECT_EQ(find_deep_toml_key(read_file(entry.path(), "config")), std::nullopt) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 2);
}

}  // namespace
}  // namespace sprintnet
