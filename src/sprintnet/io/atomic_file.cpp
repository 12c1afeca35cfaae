#include "sprintnet/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sprintnet/core/error.h"

namespace sprintnet {
namespace {

// Closes the descriptor and removes the temporary file unless the rename happened.
class TemporaryFile {
 public:
  TemporaryFile(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!renamed_) ::unlink(path_.c_str());
  }

  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }
  // close() reports write-back errors some file systems defer to it, so it is checked.
  int close() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result;
  }
  void mark_renamed() { renamed_ = true; }

 private:
  std::filesystem::path path_;
  int fd_;
  bool renamed_ = false;
};

std::string error_text() { return std::strerror(errno); }

// Writes every byte of `contents` to `fd` (a write may take fewer, or be interrupted); `path` names it in errors.
void write_all(int fd, std::string_view contents, const std::filesystem::path& path) {
  std::size_t written = 0;
  while (written < contents.size()) {
    const ssize_t result = ::write(fd, contents.data() + written, contents.size() - written);
    if (result < 0 && errno == EINTR) continue;
    SN_CHECK(result >= 0, "cannot write '{}': {}", path.string(), error_text());
    written += static_cast<std::size_t>(result);
  }
}

// The descriptor `path` names when it is one of this process's own (/dev/fd/N, /proc/self/fd/N, /proc/<our pid>/fd/N;
// /dev/stdout is a link to /proc/self/fd/1), read from the path's text: such a link is no file to replace, nor to
// reopen (its target may be "pipe:[123]", or a file the shell opened for appending).
std::optional<int> descriptor_named_by(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec).lexically_normal();
  if (ec) return std::nullopt;
  const std::string text = absolute.string();
  for (const std::string& folder : {std::string("/dev/fd/"), std::string("/proc/self/fd/"),
                                    std::string("/proc/thread-self/fd/"), fmt::format("/proc/{}/fd/", ::getpid())}) {
    if (!text.starts_with(folder)) continue;
    const std::string_view digits = std::string_view(text).substr(folder.size());
    int fd = -1;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), fd);
    if (error == std::errc() && end == digits.data() + digits.size() && fd >= 0) return fd;
  }
  return std::nullopt;
}

// Where a chain of symbolic links ends (which may not exist yet): replacing that file keeps the links, as an editor
// saving through one does; or the descriptor of this process a link in the chain names. More than 40 links (the
// kernel's own limit) is a loop.
struct LinkEnd {
  std::filesystem::path path;
  std::optional<int> descriptor;
};
LinkEnd follow_links(std::filesystem::path path) {
  std::error_code ec;
  for (int hops = 0;; ++hops) {
    if (const std::optional<int> fd = descriptor_named_by(path)) return {path, fd};
    if (!std::filesystem::is_symlink(std::filesystem::symlink_status(path, ec))) return {path, std::nullopt};
    SN_CHECK(hops < 40, "cannot write '{}': too many levels of symbolic links", path.string());
    const std::filesystem::path target = std::filesystem::read_symlink(path, ec);
    SN_CHECK(!ec, "cannot write '{}': cannot read the symbolic link: {}", path.string(), ec.message());
    path = target.is_absolute() ? target : path.parent_path() / target;
  }
}

// A pipe, a terminal or a device (a FIFO, /dev/null): there is nothing to replace, so it is written as it is.
void write_in_place(const std::filesystem::path& path, std::string_view contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  SN_CHECK(fd >= 0, "cannot open '{}' for writing: {}", path.string(), error_text());
  try {
    write_all(fd, contents, path);
  } catch (const Error&) {
    ::close(fd);
    throw;
  }
  SN_CHECK(::close(fd) == 0, "cannot close '{}': {}", path.string(), error_text());
}

// Neither a file nor a directory: a FIFO, a terminal, a device.
bool is_special_file(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  return std::filesystem::exists(status) && !std::filesystem::is_regular_file(status) &&
         !std::filesystem::is_directory(status);
}

}  // namespace

void write_text_file_atomically(const std::filesystem::path& requested, std::string_view contents) {
  const LinkEnd end = follow_links(requested);
  if (end.descriptor) {
    // Written where the descriptor stands: at the end of a file the shell opened with >>, into a pipe `| cat` reads.
    // (Followed to its target, /dev/stdout was a file replaced under the shell's `>` or "/proc/self/fd/pipe:[123]", a
    // folder that does not exist.) stdio's buffers are flushed first: what printf printed before (still in stdout's
    // buffer when stdout is a file or a pipe) comes before these bytes, not after them or in the middle of a line.
    std::fflush(nullptr);
    write_all(*end.descriptor, contents, requested);
    return;
  }
  const std::filesystem::path& path = end.path;
  if (is_special_file(path)) {
    write_in_place(path, contents);
    return;
  }
  const std::filesystem::path directory = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  // Unique per process and call, so concurrent writers of the same file never share a temporary.
  static std::atomic<std::uint64_t> counter{0};
  const std::filesystem::path temporary =
      directory / fmt::format(".{}.tmp.{}.{}", path.filename().string(), ::getpid(), counter++);

  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  SN_CHECK(fd >= 0, "cannot create '{}' (to replace '{}'): {}", temporary.string(), path.string(), error_text());
  TemporaryFile file(temporary, fd);

  write_all(file.fd(), contents, temporary);
  SN_CHECK(::fsync(file.fd()) == 0, "cannot fsync '{}': {}", temporary.string(), error_text());
  SN_CHECK(file.close() == 0, "cannot close '{}': {}", temporary.string(), error_text());
  SN_CHECK(::rename(temporary.c_str(), path.c_str()) == 0, "cannot rename '{}' to '{}': {}", temporary.string(),
           path.string(), error_text());
  file.mark_renamed();

  // Make the rename itself durable. Best effort: some file systems refuse fsync on directories.
  const int directory_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd >= 0) {
    ::fsync(directory_fd);
    ::close(directory_fd);
  }
}

void remove_unfinished_atomic_writes(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> temporaries;  // collected first: removing entries while listing is unspecified
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.starts_with('.') && name.find(".tmp.") != std::string::npos) {
      temporaries.push_back(entry.path());
    }
  }
  std::error_code ignored;
  for (const std::filesystem::path& path : temporaries) std::filesystem::remove(path, ignored);
}

std::optional<int> own_descriptor(const std::filesystem::path& path) { return follow_links(path).descriptor; }

void check_output_file(const std::filesystem::path& path, std::string_view what) {
  // Error codes throughout: the throwing calls made a loop of links "internal error: filesystem error".
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  SN_CHECK(!std::filesystem::is_directory(status), "{}: the output '{}' is a directory; give a file name", what,
           path.string());
  const auto missing = [](const std::error_code& e) {
    return !e || e == std::errc::no_such_file_or_directory || e == std::errc::not_a_directory;
  };
  // (A loop of links, a folder that may not be searched: the system's reason.)
  SN_CHECK(missing(ec), "{}: cannot write '{}': {}", what, path.string(), ec.message());
  const std::filesystem::path folder = path.parent_path().empty() ? "." : path.parent_path();
  const std::filesystem::file_status folder_status = std::filesystem::status(folder, ec);
  SN_CHECK(std::filesystem::is_directory(folder_status), "{}: cannot write '{}': '{}' {}", what, path.string(),
           folder.string(),
           std::filesystem::exists(folder_status) ? "is not a directory"
           : missing(ec)                          ? "does not exist"
                                                  : ec.message());
  // A descriptor of this process (/dev/fd/3, /dev/stdout) must be open for writing: `3< file` or a closed one failed
  // with "Bad file descriptor" after the work.
  if (const std::optional<int> fd = own_descriptor(path)) {
    const int flags = ::fcntl(*fd, F_GETFL);
    SN_CHECK(flags >= 0 || errno != EBADF, "{}: cannot write '{}': descriptor {} is not open", what, path.string(),
             *fd);
    SN_CHECK(flags < 0 || (flags & O_ACCMODE) == O_WRONLY || (flags & O_ACCMODE) == O_RDWR,
             "{}: cannot write '{}': descriptor {} is not open for writing", what, path.string(), *fd);
  }
}

}  // namespace sprintnet
