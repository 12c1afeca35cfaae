#include "sprintnet/io/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "sprintnet/core/error.h"

namespace sprintnet {
namespace {

// Bytes asked of each read(): large enough that a weights file takes few calls.
constexpr std::size_t kChunkBytes = std::size_t{1} << 20;

struct Outcome {
  std::string bytes;
  const char* failed = nullptr;  // "open" or "read" when that step failed
  int error = 0;                 // its errno
  const char* device = nullptr;  // what the path is when it is a device or a socket (refused)
};

// A device or a socket has no end to read to (/dev/zero, /dev/urandom) or no file's contents: refused.
// Files, directories (whose read fails with EISDIR) and pipes (`<(command)`, a FIFO) are read.
const char* device_kind(const struct stat& status) {
  if (S_ISCHR(status.st_mode)) return "a character device";
  if (S_ISBLK(status.st_mode)) return "a block device";
  if (S_ISSOCK(status.st_mode)) return "a socket";
  return nullptr;
}

Outcome read_whole(const std::filesystem::path& path) {
  Outcome out;
  struct stat status {};
  if (::stat(path.c_str(), &status) == 0) out.device = device_kind(status);
  if (out.device != nullptr) return out;  // refused before open: a terminal's open may block
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.failed = "open";
    out.error = errno;
    return out;
  }
  // The reported size saves growing the buffer; the loop reads to the end whatever it says.
  if (::fstat(fd, &status) == 0 && status.st_size > 0) {
    out.bytes.reserve(static_cast<std::size_t>(status.st_size) + kChunkBytes);
  }
  std::size_t size = 0;
  while (true) {
    out.bytes.resize(size + kChunkBytes);
    const ssize_t n = ::read(fd, out.bytes.data() + size, kChunkBytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.failed = "read";  // e.g. EISDIR: a directory opens, and fails here
      out.error = errno;
      break;
    }
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
  }
  ::close(fd);  // read-only: nothing for close to report
  out.bytes.resize(size);
  return out;
}

}  // namespace

std::string read_file(const std::filesystem::path& path, std::string_view what) {
  Outcome out = read_whole(path);
  SN_CHECK(out.device == nullptr, "cannot read {} '{}': it is {}, not a file", what, path.string(), out.device);
  SN_CHECK(out.failed == nullptr, "cannot {} {} '{}': {}", out.failed, what, path.string(), std::strerror(out.error));
  return std::move(out.bytes);
}

std::optional<std::string> try_read_file(const std::filesystem::path& path) {
  Outcome out = read_whole(path);
  if (out.failed != nullptr || out.device != nullptr) return std::nullopt;
  return std::move(out.bytes);
}

std::optional<std::string> file_problem(const std::filesystem::path& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    // ENOTDIR: a folder on the way is a file ("model.safetensors/x"), so nothing is there either.
    if (errno == ENOENT || errno == ENOTDIR) return std::string(kNoSuchFile);
    return std::string(std::strerror(errno));
  }
  if (S_ISREG(status.st_mode)) return std::nullopt;
  if (S_ISDIR(status.st_mode)) return "it is a directory";
  if (S_ISFIFO(status.st_mode)) return "it is a pipe";
  if (const char* device = device_kind(status)) return fmt::format("it is {}", device);
  return "it is not a regular file";
}

}  // namespace sprintnet
