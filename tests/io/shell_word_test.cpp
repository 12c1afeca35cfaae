// shell_quoted: what the CLI prints as a command runs as printed. Each quoted word is given to a real
// /bin/sh, which must hand it back byte for byte.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include "sprintnet/io/shell_word.h"

namespace sprintnet {
namespace {

// What `sh -c 'printf %s WORD'` prints for the quoted word.
std::string through_the_shell(const std::string& quoted) {
  const std::string command = "printf %s " + quoted;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) return "<popen failed>";
  std::string out;
  std::array<char, 256> buffer{};
  for (std::size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe.get())) > 0;) out.append(buffer.data(), n);
  return out;
}

TEST(ShellWord, PlainWordsStayAsTheyAre) {
  EXPECT_EQ(shell_quoted("runs/mnist-20261129-120000"), "runs/mnist-20261129-120000");
  EXPECT_EQ(shell_quoted("/tmp/a_b.c+d=e:f,g@h%i"), "/tmp/a_b.c+d=e:f,g@h%i");
}

TEST(ShellWord, APathStartingWithADashIsNoOption) {
  EXPECT_EQ(shell_quoted("-x"), "./-x");
  EXPECT_EQ(shell_quoted("-a b"), "./'-a b'");
  EXPECT_EQ(through_the_shell(shell_quoted("-a b")), "./-a b");
}

TEST(ShellWord, AnythingElseIsQuotedAndTheShellGivesItBack) {
  for (const std::string word : {"", "two words", "it's", "'", "$HOME", "a\"b", "a\\b", "*", "~user", "x;rm -rf y",
                                 "tab\there", "new\nline", "`id`", "!event", "é"}) {
    const std::string quoted = shell_quoted(word);
    EXPECT_NE(quoted, word) << word;
    EXPECT_EQ(through_the_shell(quoted), word) << quoted;
  }
}

}  // namespace
}  // namespace sprintnet
