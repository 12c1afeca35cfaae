#include "sprintnet/train/run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <fmt/chrono.h>

#include "sprintnet/core/error.h"
#include "sprintnet/io/config_schema.h"

namespace sprintnet::train {

std::filesystem::path create_run_directory(const Config& config) {
  std::string name = config.output.name;
  const std::optional<std::string> problem = output_name_problem(name);
  SN_CHECK(!problem, "{}", problem.value_or(""));
  if (name.empty()) {
    name = fmt::format("{}-{:%Y%m%d-%H%M%S}", config.data.dataset, fmt::gmtime(std::time(nullptr)));
  }
  const std::filesystem::path base = std::filesystem::path(config.output.dir) / name;
  std::error_code ec;
  std::filesystem::create_directories(base.parent_path(), ec);
  SN_CHECK(!ec, "output.dir: cannot create {}: {}", base.parent_path().string(), ec.message());
  for (int suffix = 0; suffix < 1000; ++suffix) {
    const std::filesystem::path candidate =
        suffix == 0 ? base : std::filesystem::path(fmt::format("{}-{}", base.string(), suffix));
    if (std::filesystem::create_directory(candidate, ec)) return candidate;
    SN_CHECK(!ec, "cannot create run directory {}: {}", candidate.string(), ec.message());
  }
  SN_FAIL("cannot find a free run directory name next to {}", base.string());
}

RunDirectoryLock::RunDirectoryLock(const std::filesystem::path& run_dir)
    : path_(run_dir), fd_(::open(run_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
  SN_CHECK(fd_ >= 0, "cannot open {}: {}", run_dir.string(), std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  const int error = errno;
  ::close(fd_);
  fd_ = -1;
  SN_CHECK(error != EWOULDBLOCK,
           "{} is in use by another sprintnet process (a training, a resume or a sweep that is still running); wait "
           "for it to end, or stop it, first", run_dir.string());
  // ENOLCK, EOPNOTSUPP, ...: a file system without flock. The lock is a guard, not a condition to run.
}

bool RunDirectoryLock::still_at_its_path() const {
  if (fd_ < 0) return true;
  struct stat held = {}, now = {};
  if (::fstat(fd_, &held) != 0) return true;  // (cannot tell: not this check's error to report)
  return ::stat(path_.c_str(), &now) == 0 && now.st_dev == held.st_dev && now.st_ino == held.st_ino;
}

RunDirectoryLock::~RunDirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace sprintnet::train
