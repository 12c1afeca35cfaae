// CudaBackend::copy between two GPUs (cuda_backend.cpp: to.index != from.index): the bytes arrive
// whole, in both directions, and only after the work the source device's stream still had queued on
// the source. That work is a chain of axpys over 64 MB, each queued without a wait, so a copy that
// did not first wait for the other device would read a half-updated source. Integer-valued inputs
// keep every sum exact, so the result compares to the bit with the host's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ops_test_util.h"
#include "sprintnet/core/random.h"
#include "sprintnet/ops/ops.h"
#include "step_kernel_util.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

#define SN_REQUIRE_TWO_GPUS()                                                                              \
  do {                                                                                                     \
    SN_REQUIRE_GPU();                                                                                      \
    if (cuda_device_count() < 2) {                                                                         \
      GTEST_SKIP() << "a copy between GPUs needs 2 CUDA devices, this machine has " << cuda_device_count(); \
    }                                                                                                      \
  } while (false)

constexpr int kAdds = 16;

// y + kAdds * x (kAdds axpys of alpha = sign, every partial sum an integer below 2^24: exact).
std::vector<float> after_adds(const std::vector<float>& y, const std::vector<float>& x, double sign) {
  std::vector<float> out(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) out[i] = static_cast<float>(y[i] + sign * kAdds * x[i]);
  return out;
}

void expect_equal(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  const std::vector<float> v = got.to(Device::cpu()).to_vector<float>();
  ASSERT_EQ(v.size(), want.size()) << what;
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], want[i]) << what << ": element " << i;
}

TEST(CrossDeviceCopy, CopiesAfterTheSourceDevicesQueuedWork) {
  SN_REQUIRE_TWO_GPUS();
  Generator gen(test::test_seed() + 401);
  const Device first = Device::cuda(0), second = Device::cuda(1);
  const std::int64_t n = std::int64_t{1} << 24;  // 64 MB of fp32: each axpy takes tens of microseconds
  const Tensor x = test::random_integers({n}, DType::kF32, gen, -100, 100);
  const Tensor y = test::random_integers({n}, DType::kF32, gen, -100, 100);
  const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();

  // GPU 0 to GPU 1 (Tensor::to: the destination's backend copies, after waiting for GPU 0).
  const Tensor src = y.to(first), x_first = x.to(first);
  for (int k = 0; k < kAdds; ++k) ops::axpy(src, x_first, 1.0);  // queued on GPU 0's stream, no wait
  const Tensor on_second = src.to(second);
  EXPECT_EQ(on_second.device(), second);
  expect_equal(on_second, after_adds(yv, xv, 1.0), "GPU 0 to GPU 1");

  // GPU 1 to GPU 0 (ops::copy into a GPU 0 tensor: GPU 0's backend copies, after waiting for GPU 1).
  const Tensor x_second = x.to(second);
  for (int k = 0; k < kAdds; ++k) ops::axpy(on_second, x_second, 1.0);
  const Tensor back = test::poisoned({n}, DType::kF32).to(first);
  ops::copy(back, on_second);
  expect_equal(back, after_adds(after_adds(yv, xv, 1.0), xv, 1.0), "GPU 1 to GPU 0");
}

// Views at an offset into their storage, in a 16-bit type: the copy takes the view's bytes and
// writes only the destination view's (the rows around it stay poisoned).
TEST(CrossDeviceCopy, CopiesRowSlicesOfAnyType) {
  SN_REQUIRE_TWO_GPUS();
  Generator gen(test::test_seed() + 402);
  const std::int64_t rows = 9, cols = 333;
  const Tensor host = test::random_uniform({rows, cols}, DType::kF32, gen).to(DType::kBF16);
  const Tensor src = host.to(Device::cuda(0));
  const Tensor dst = test::poisoned({rows, cols}, DType::kBF16).to(Device::cuda(1));
  ops::copy(dst.slice_rows(5, 8), src.slice_rows(2, 5));
  const std::vector<float> got = dst.to(Device::cpu()).to_vector<float>();
  const std::vector<float> want = host.to_vector<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = got[static_cast<std::size_t>(r * cols + c)];
      if (r >= 5 && r < 8) {
        ASSERT_EQ(v, want[static_cast<std::size_t>((r - 3) * cols + c)]) << "row " << r << ", column " << c;
      } else {
        ASSERT_TRUE(std::isnan(v)) << "row " << r << " is outside the destination view but was written";
      }
    }
  }
}

}  // namespace
}  // namespace sprintnet
