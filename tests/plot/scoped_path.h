#pragma once
// PATH set for a scope and put back as it was when the scope ends (support/scoped_env.h unsets instead): a plot
// test's fake python3 first on PATH, or a PATH without sh or python3.
#include <cstdlib>
#include <string>

namespace sprintnet::test {

class ScopedPath {
 public:
  explicit ScopedPath(const std::string& path) : previous_(current()), was_set_(std::getenv("PATH") != nullptr) {
    ::setenv("PATH", path.c_str(), 1);
  }
  ~ScopedPath() {
    if (was_set_) {
      ::setenv("PATH", previous_.c_str(), 1);
    } else {
      ::unsetenv("PATH");
    }
  }
  ScopedPath(const ScopedPath&) = delete;
  ScopedPath& operator=(const ScopedPath&) = delete;

  static std::string current() {
    const char* path = std::getenv("PATH");
    return path != nullptr ? path : "";
  }

 private:
  std::string previous_;
  bool was_set_;
};

}  // namespace sprintnet::test
