#include "standard_streams.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sprintnet::cli {

void open_missing_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", O_RDWR);  // the lowest free number: this one
    if (opened != fd && opened >= 0) ::close(opened);  // (cannot happen: the lower ones are open by now)
  }
}

bool standard_output_written() {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  if (flushed && std::ferror(stdout) == 0) return true;
  // The reason is known when the last flush failed; a write that failed earlier (a full buffer) left only the flag.
  const int error = flushed ? 0 : errno;
  std::fprintf(stderr, "sprintnet: error: writing the output to stdout failed: %s\n",
               error != 0 ? std::strerror(error) : "a full disk, or a reader that closed the pipe?");
  return false;
}

}  // namespace sprintnet::cli
