#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <system_error>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

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

// A link (or a chain of them, relative and absolute) is followed: the file it names gets the contents and the
// links stay links. Replacing the link itself made `eval --csv link.csv` turn the link into a file.
TEST(WriteTextFileAtomically, WritesThroughSymbolicLinksAndKeepsThem) {
  const auto dir = test::temp_dir("atomic-links");
  std::filesystem::create_directory(dir / "data");
  std::ofstream(dir / "data" / "target.csv") << "old";
  std::filesystem::create_symlink("data/target.csv", dir / "relative.csv");
  std::filesystem::create_symlink(dir / "relative.csv", dir / "absolute.csv");
  write_text_file_atomically(dir / "absolute.csv", "new");
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "absolute.csv"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "relative.csv"));
  EXPECT_EQ(test::file_bytes(dir / "data" / "target.csv"), "new");
  std::filesystem::create_symlink("not-yet.csv", dir / "dangling.csv");  // its file is created
  write_text_file_atomically(dir / "dangling.csv", "made");
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "dangling.csv"));
  EXPECT_EQ(test::file_bytes(dir / "not-yet.csv"), "made");
  std::filesystem::create_symlink("loop-b", dir / "loop-a");
  std::filesystem::create_symlink("loop-a", dir / "loop-b");
  EXPECT_THAT([&] { write_text_file_atomically(dir / "loop-a", "x"); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("too many levels of symbolic links")));
}

// A FIFO (like /dev/stdout or a shell's pipe) is written in place and stays a FIFO: replacing it would leave a
// file where the reader waits. A device that refuses the bytes (/dev/full) is an error naming it.
TEST(WriteTextFileAtomically, WritesAFifoInPlaceAndNamesADeviceThatRefuses) {
  const auto dir = test::temp_dir("atomic-fifo");
  const std::filesystem::path fifo = dir / "pipe.csv";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = test::file_bytes(fifo); });  // opening blocks until the writer opens
  write_text_file_atomically(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(received, "through the pipe");
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  if (std::filesystem::is_character_file("/dev/full")) {
    EXPECT_THAT([] { write_text_file_atomically("/dev/full", "x"); },
                ::testing::ThrowsMessage<Error>(::testing::HasSubstr("cannot write '/dev/full'")));
    EXPECT_TRUE(std::filesystem::is_character_file("/dev/full"));
  }
}

// A path that names a descriptor of this process (/dev/stdout is a link to /proc/self/fd/1) is written to that
// descriptor, where it stands. Followed to its target instead, `eval --csv /dev/stdout | cat` failed (the target of a
// pipe's link is "pipe:[123]": no folder to make a temporary in) and `> file` had the file replaced under the shell,
// so the lines printed after it went to the unlinked file; `>> file` lost what the file held.
TEST(WriteTextFileAtomically, APathNamingADescriptorOfThisProcessIsWrittenWhereItStands) {
  EXPECT_EQ(own_descriptor("/dev/stdout"), 1);
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const auto dir = test::temp_dir("atomic-descriptor");
  std::filesystem::create_symlink(fmt::format("/proc/self/fd/{}", pipe_fds[1]), dir / "link.csv");
  EXPECT_EQ(own_descriptor(dir / "link.csv"), pipe_fds[1]);
  write_text_file_atomically(fmt::format("/dev/fd/{}", pipe_fds[1]), "into ");
  write_text_file_atomically(dir / "link.csv", "the pipe");
  ::close(pipe_fds[1]);
  std::string received(64, '\0');
  const ssize_t got = ::read(pipe_fds[0], received.data(), received.size());
  received.resize(static_cast<std::size_t>(std::max<ssize_t>(0, got)));
  ::close(pipe_fds[0]);
  EXPECT_EQ(received, "into the pipe");

  // A file the shell opened with >>: appended to, the same file (its inode) as before.
  const auto file = dir / "log.csv";
  std::ofstream(file) << "kept\n";
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  struct stat before = {}, after = {};
  ASSERT_EQ(::stat(file.c_str(), &before), 0);
  write_text_file_atomically(fmt::format("/proc/{}/fd/{}", ::getpid(), fd), "added\n");
  ::close(fd);
  ASSERT_EQ(::stat(file.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(test::file_bytes(file), "kept\nadded\n");
  EXPECT_EQ(own_descriptor(file), std::nullopt);
}

// What stdio still holds in a buffer (printf's lines when stdout is a file or a pipe) is flushed before the bytes go
// into the descriptor: `eval --csv /dev/stdout > file` had the CSV before the report printed ahead of it.
TEST(WriteTextFileAtomically, WhatStdioBufferedBeforeADescriptorsBytesComesFirst) {
  const auto file = test::temp_dir("atomic-descriptor-order") / "out.txt";
  std::FILE* stream = std::fopen(file.c_str(), "we");
  ASSERT_NE(stream, nullptr);
  ASSERT_EQ(std::setvbuf(stream, nullptr, _IOFBF, 1 << 16), 0);  // as stdout into a file: held until flushed
  std::fputs("printed first, ", stream);
  write_text_file_atomically(fmt::format("/dev/fd/{}", ::fileno(stream)), "written second");
  std::fclose(stream);
  EXPECT_EQ(test::file_bytes(file), "printed first, written second");
}

// A descriptor of this process named as the output must be open for writing, checked before the work: `--csv
// /dev/fd/3 3< file` and a closed descriptor failed with "Bad file descriptor" once the evaluation was done.
TEST(CheckOutputFile, ADescriptorMustBeOpenForWriting) {
  const auto file = test::temp_dir("output-descriptor") / "read-only.csv";
  std::ofstream(file) << "kept";
  const int read_only = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(read_only, 0);
  const std::string named = fmt::format("/dev/fd/{}", read_only);
  EXPECT_THAT([&] { check_output_file(named, "eval --csv"); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(fmt::format(
                  "eval --csv: cannot write '{}': descriptor {} is not open for writing", named, read_only))));
  ::close(read_only);  // now a descriptor that is not open at all (nothing else in this test opens one)
  EXPECT_THAT([&] { check_output_file(named, "eval --csv"); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(
                  ::testing::HasSubstr(
                      fmt::format("eval --csv: cannot write '{}': descriptor {} is not open", named, read_only)),
                  ::testing::Not(::testing::HasSubstr("for writing")))));
  EXPECT_EQ(test::file_bytes(file), "kept");
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  EXPECT_NO_THROW(check_output_file(fmt::format("/proc/self/fd/{}", pipe_fds[1]), "eval --csv"));
  const int read_write = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  EXPECT_NO_THROW(check_output_file(fmt::format("/dev/fd/{}", read_write), "eval --csv"));
  for (const int fd : {pipe_fds[0], pipe_fds[1], read_write}) ::close(fd);
}

// An output behind a loop of links (or a folder that may not be searched) is named with the system's reason: the
// throwing std::filesystem calls made it "internal error: filesystem error: status: Too many levels of symbolic
// links", naming neither the command nor the path as given.
TEST(CheckOutputFile, ALoopOfLinksIsNamedWithTheSystemsReason) {
  const auto dir = test::temp_dir("output-loop");
  std::filesystem::create_symlink("loop", dir / "loop");
  for (const std::filesystem::path& output : {dir / "loop" / "x.png", dir / "loop"}) {
    EXPECT_THAT([&] { check_output_file(output, "plot"); },
                ::testing::ThrowsMessage<Error>(::testing::AllOf(
                    ::testing::HasSubstr(fmt::format("plot: cannot write '{}': ", output.string())),
                    ::testing::HasSubstr(std::make_error_code(std::errc::too_many_symbolic_link_levels).message()))));
  }
  EXPECT_NO_THROW(check_output_file(dir / "new.png", "plot"));
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
