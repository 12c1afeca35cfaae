#pragma once
// The message of the sprintnet::Error that `fn` throws, so a test can check
// that it names the operand, key or hyperparameter at fault. A call that does
// not throw is a test failure and yields "".
#include <gtest/gtest.h>

#include <string>

#include "sprintnet/core/error.h"

namespace sprintnet::test {

template <typename Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a sprintnet::Error, nothing was thrown";
  return {};
}

}  // namespace sprintnet::test
