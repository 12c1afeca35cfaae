#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sprintnet/core/device.h"
#include "sprintnet/core/error.h"
#include "support/error_message.h"

namespace sprintnet {
namespace {

TEST(ParseDevice, NamesAsPyTorchWritesThem) {
  EXPECT_TRUE(parse_device("cpu").is_cpu());
  EXPECT_EQ(parse_device("cuda"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:0"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:12"), Device::cuda(12));
}

// "cuda:01" named GPU 1 (from_chars reads the zero); PyTorch refuses a leading zero, and so do we. Signs, spaces,
// an empty index and other names are refused too.
TEST(ParseDevice, AnIndexWithALeadingZeroOrNotDigitsIsRefused) {
  for (const char* name : {"cuda:01", "cuda:00", "cuda:", "cuda:+1", "cuda:-1", "cuda: 1", "cuda:1 ", "cuda:1x"}) {
    EXPECT_THAT(test::error_message([&] { parse_device(name); }), ::testing::HasSubstr("expected cuda:N")) << name;
  }
  EXPECT_THAT(test::error_message([] { parse_device("gpu"); }), ::testing::HasSubstr("unknown device 'gpu'"));
}

}  // namespace
}  // namespace sprintnet
