#pragma once
// An environment variable set for a scope and unset when it ends, even when an assertion returns early:
// for the kernel lab's switches (SPRINTNET_*), which a plan reads when it is built.
#include <cstdlib>
#include <string>

namespace sprintnet::test {

class ScopedEnv {
 public:
  // An empty value leaves the variable alone (unset), so a test can pass "" for "no choice".
  ScopedEnv(const char* name, const std::string& value) : name_(value.empty() ? nullptr : name) {
    if (name_ != nullptr) ::setenv(name_, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (name_ != nullptr) ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;  // null: nothing was set
};

}  // namespace sprintnet::test
