#pragma once
// A disk that is full, without root: while a FullDisk lives, this process cannot write a byte to
// any regular file (RLIMIT_FSIZE = 0). Creating and opening files still works, so code under test
// creates its files as it would on a real full disk and sees its first write fail (EFBIG, "File
// too large", where a full disk says ENOSPC) through the same calls. SIGXFSZ, whose default
// action ends the process, is ignored meanwhile. Pipes and terminals are not limited (ctest reads
// the test's output from a pipe), but output redirected to a file is: keep a FullDisk's scope to
// the calls under test.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>

namespace sprintnet::test {

class FullDisk {
 public:
  FullDisk() {
    if (::getrlimit(RLIMIT_FSIZE, &saved_) != 0) ADD_FAILURE() << "getrlimit: " << std::strerror(errno);
    saved_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit full = saved_;
    full.rlim_cur = 0;  // the soft limit only: the destructor can raise it back to the hard limit
    if (::setrlimit(RLIMIT_FSIZE, &full) != 0) ADD_FAILURE() << "setrlimit: " << std::strerror(errno);
  }
  ~FullDisk() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    ::signal(SIGXFSZ, saved_handler_);
  }
  FullDisk(const FullDisk&) = delete;
  FullDisk& operator=(const FullDisk&) = delete;

  // What a write fails with meanwhile, as strerror words it.
  static const char* reason() { return std::strerror(EFBIG); }

 private:
  rlimit saved_{};
  sighandler_t saved_handler_ = SIG_DFL;
};

}  // namespace sprintnet::test
