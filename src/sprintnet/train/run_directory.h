#pragma once
// Where a run's files go: <output.dir>/<output.name>, the name defaulting to
// <dataset>-<UTC timestamp>; an existing directory is never reused (a numeric
// suffix is added), so one run can't overwrite another's results.
// A new run that cannot write its first files removes the directory again (Trainer::fit).
#include <filesystem>

#include "sprintnet/io/config.h"

namespace sprintnet::train {

std::filesystem::path create_run_directory(const Config& config);

// An exclusive advisory lock (flock) on a run's (or a sweep's) directory, held while a process writes
// it: a second `train --resume` of a run that is still training (or resuming) fails, naming the
// directory, before it writes anything, instead of interleaving its metrics, event files and
// checkpoints with the first's. The kernel drops the lock when the process dies, so a killed run never
// leaves its directory locked. It holds between processes of one machine: NFS does not carry flock on
// directories to other clients, and where the file system has no flock at all the run goes on unlocked.
class RunDirectoryLock {
 public:
  explicit RunDirectoryLock(const std::filesystem::path& run_dir);
  ~RunDirectoryLock();
  RunDirectoryLock(const RunDirectoryLock&) = delete;
  RunDirectoryLock& operator=(const RunDirectoryLock&) = delete;

  // Whether the directory locked is still the one at its path: false once it was deleted or moved (`rm -rf runs/`
  // while a run trains), where the open metrics files write into unlinked inodes and the checkpoints would recreate
  // the path without them. True where the file system has no flock (nothing was opened to compare).
  bool still_at_its_path() const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace sprintnet::train
