// read_file: every byte back (binary, larger than one read, a /proc file whose size reads 0),
// and errors that name what the file is, its path and the system's reason.
#include "sprintnet/io/read_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include <sys/stat.h>

#include <fmt/format.h>

#include "sprintnet/core/random.h"
#include "support/error_message.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ReadFile, ReturnsEveryByteOfABinaryFileLargerThanOneRead) {
  Generator gen(test::test_seed());
  // Three and a bit reads of 1 MiB, with NULs, newlines and every other byte value.
  std::string bytes((std::size_t{3} << 20) + 12345, '\0');
  for (char& c : bytes) c = static_cast<char>(gen.next_u32() & 0xFF);
  const std::filesystem::path path = test::temp_dir("read-file") / "weights.bin";
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_EQ(read_file(path), bytes);
  EXPECT_EQ(try_read_file(path), bytes);
  std::ofstream(path, std::ios::trunc).close();
  EXPECT_EQ(read_file(path), "");  // an empty file is an empty string, not an error
}

// /proc files say they are 0 bytes long: a reader trusting the size would return nothing.
TEST(ReadFile, ReadsAProcFileWhoseSizeReadsZero) {
  ASSERT_EQ(std::filesystem::file_size("/proc/self/status"), 0u);
  const std::optional<std::string> status = try_read_file("/proc/self/status");
  ASSERT_TRUE(status.has_value());
  EXPECT_THAT(*status, AllOf(StartsWith("Name:"), HasSubstr("\nPid:")));
}

TEST(ReadFile, ErrorsNameWhatThePathAndTheSystemsReason) {
  const std::filesystem::path dir = test::temp_dir("read-file-errors");
  EXPECT_THAT(test::error_message([&] { read_file(dir / "absent.toml", "config file"); }),
              StartsWith(fmt::format("cannot open config file '{}': {}", (dir / "absent.toml").string(),
                                     std::strerror(ENOENT))));
  // A directory opens, and its read fails.
  EXPECT_THAT(test::error_message([&] { read_file(dir); }),
              StartsWith(fmt::format("cannot read file '{}': {}", dir.string(), std::strerror(EISDIR))));
  EXPECT_EQ(try_read_file(dir / "absent.toml"), std::nullopt);
  EXPECT_EQ(try_read_file(dir), std::nullopt);
}

// /dev/zero has no end: read, it grew memory without bound until `eval /dev/zero` ran out of it. Devices and
// sockets are refused before they are opened, naming what they are; a pipe (`<(command)`) is still read.
TEST(ReadFile, RefusesDevicesAndReadsPipes) {
  EXPECT_THAT(test::error_message([] { read_file("/dev/zero", "checkpoint"); }),
              StartsWith("cannot read checkpoint '/dev/zero': it is a character device, not a file"));
  EXPECT_EQ(try_read_file("/dev/null"), std::nullopt);
  const std::filesystem::path fifo = test::temp_dir("read-file-fifo") / "config.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo) << "seed = 3\n"; });
  EXPECT_EQ(read_file(fifo, "config file"), "seed = 3\n");
  writer.join();
}

// A limit on what is read (predict's 1 GiB an input) was kept by asking the size first, which a pipe cannot tell
// ("Operation not supported"). It is kept as the bytes come: a file over it is refused by its size unread, a pipe
// once one byte past it has come; a file of the limit exactly is read.
TEST(ReadFile, RefusesAFileOrAPipeLargerThanTheLimitAsTheBytesCome) {
  const std::filesystem::path dir = test::temp_dir("read-file-limit");
  const std::string bytes(1000, 'x');
  std::ofstream(dir / "input.bin", std::ios::binary) << bytes;
  EXPECT_EQ(read_file(dir / "input.bin", "input", 1000), bytes);
  EXPECT_THAT(test::error_message([&] { read_file(dir / "input.bin", "input", 999); }),
              StartsWith(fmt::format("cannot read input '{}': it holds more than 999 bytes", (dir / "input.bin").string())));
  const std::filesystem::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // 1000 bytes, less than PIPE_BUF: one write() that is in the pipe whole before the reader stops at 11 of them.
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << bytes; });
  EXPECT_THAT(test::error_message([&] { read_file(fifo, "input", 10); }),
              StartsWith(fmt::format("cannot read input '{}': it holds more than 10 bytes", fifo.string())));
  writer.join();
  writer = std::thread([&] { std::ofstream(fifo, std::ios::binary) << bytes; });
  EXPECT_EQ(read_file(fifo, "input", 1000), bytes);
  writer.join();
}

}  // namespace
}  // namespace sprintnet
