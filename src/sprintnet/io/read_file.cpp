#include "sprintnet/io/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
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
  bool too_large = false;        // more than the most accepted: refused, the rest unread
};

// A device or a socket has no end to read to (/dev/zero, /dev/urandom) or no file's contents: refused.
// Files, directories (whose read fails with EISDIR) and pipes (`<(command)`, a FIFO) are read.
const char* device_kind(const struct stat& status) {
  if (S_ISCHR(status.st_mode)) return "a character device";
  if (S_ISBLK(status.st_mode)) return "a block device";
  if (S_ISSOCK(status.st_mode)) return "a socket";
  return nullptr;
}

Outcome read_whole(const std::filesystem::path& path, std::size_t max_bytes) {
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
  // The reported size saves growing the buffer, and refuses a file over the limit unread; the loop reads to the end
  // whatever it says (a /proc file says 0), and stops one byte past the limit.
  if (::fstat(fd, &status) == 0 && status.st_size > 0) {
    const auto reported = static_cast<std::uintmax_t>(status.st_size);
    if (S_ISREG(status.st_mode) && reported > max_bytes) {
      out.too_large = true;
      ::close(fd);
      return out;
    }
    out.bytes.reserve(static_cast<std::size_t>(std::min<std::uintmax_t>(reported, max_bytes)) + kChunkBytes);
  }
  std::size_t size = 0;
  while (true) {
    const std::size_t room = max_bytes - size;  // size <= max_bytes here
    const std::size_t want = room >= kChunkBytes ? kChunkBytes : room + 1;
    out.bytes.resize(size + want);
    const ssize_t n = ::read(fd, out.bytes.data() + size, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.failed = "read";  // e.g. EISDIR: a directory opens, and fails here
      out.error = errno;
      break;
    }
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
    if (size > max_bytes) {
      out.too_large = true;
      break;
    }
  }
  ::close(fd);  // read-only: nothing for close to report
  out.bytes.resize(size);
  return out;
}

}  // namespace

std::string read_file(const std::filesystem::path& path, std::string_view what, std::size_t max_bytes) {
  Outcome out = read_whole(path, max_bytes);
  SN_CHECK(out.device == nullptr, "cannot read {} '{}': it is {}, not a file", what, path.string(), out.device);
  SN_CHECK(out.failed == nullptr, "cannot {} {} '{}': {}", out.failed, what, path.string(), std::strerror(out.error));
  SN_CHECK(!out.too_large, "cannot read {} '{}': it holds more than {} bytes, the most accepted", what, path.string(),
           max_bytes);
  return std::move(out.bytes);
}

std::optional<std::string> try_read_file(const std::filesystem::path& path) {
  Outcome out = read_whole(path, kNoByteLimit);
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
