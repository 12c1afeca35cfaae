// The CUDA backend's memory ops: copies in every direction and fills of every
// dtype, checked byte for byte against host data.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "gpu_compare.h"
#include "ops_test_util.h"
#include "sprintnet/ops/ops.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using test::gpu;

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()), y = b.to(Device::cpu());
  return x.nbytes() == y.nbytes() && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

TEST(GpuMemory, HostDeviceRoundTripKeepsEveryByte) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kU8}) {
    for (std::int64_t n : {1, 1001, 3000000}) {
      const Tensor host = test::random_integers({n}, dtype, gen, 1, 200);  // exact in every dtype, never 0
      ASSERT_FALSE(test::all_zero(host));
      const Tensor device = host.to(gpu());
      EXPECT_TRUE(device.device().is_cuda());
      EXPECT_TRUE(same_bytes(device, host)) << dtype_name(dtype) << " n=" << n;
    }
  }
}

TEST(GpuMemory, DeviceToDeviceCopiesAndClones) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed());
  const Tensor host = test::random_uniform({257, 31}, DType::kF32, gen);
  const Tensor a = host.to(gpu());
  const Tensor b = test::poisoned(host.shape(), DType::kF32, gpu());
  ops::copy(b, a);
  EXPECT_TRUE(same_bytes(b, host));
  EXPECT_TRUE(same_bytes(a.clone(), host));
  // Into and out of row slices (offsets into a larger allocation).
  const Tensor big = test::poisoned({300, 31}, DType::kF32, gpu());
  ops::copy(big.slice_rows(10, 267), a);
  EXPECT_TRUE(same_bytes(big.slice_rows(10, 267), host));
  EXPECT_FALSE(test::all_finite(big.slice_rows(0, 10))) << "rows before the slice were written";
  EXPECT_FALSE(test::all_finite(big.slice_rows(267, 300))) << "rows after the slice were written";
  const Tensor back = Tensor::empty({5, 31}, DType::kF32);
  ops::copy(back, big.slice_rows(12, 17));
  EXPECT_TRUE(same_bytes(back, host.slice_rows(2, 7)));
}

TEST(GpuMemory, FillEveryDtype) {
  SN_REQUIRE_GPU();
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kU8}) {
    for (std::int64_t n : {1, 999, 20000000}) {
      const Tensor t = Tensor::full({n}, 1.5 * (is_floating(dtype) ? 1 : 2), dtype, gpu());
      EXPECT_TRUE(same_bytes(t, Tensor::full({n}, 1.5 * (is_floating(dtype) ? 1 : 2), dtype)))
          << dtype_name(dtype) << " n=" << n;
    }
  }
  const Tensor nan = test::poisoned({77}, DType::kF32, gpu());
  for (float v : nan.to_vector<float>()) EXPECT_TRUE(std::isnan(v));
}

TEST(GpuMemory, EmptyTensorsAreFine) {
  SN_REQUIRE_GPU();
  const Tensor empty = Tensor::empty({0, 5}, DType::kF32, gpu());
  ops::fill(empty, 1.0);
  EXPECT_EQ(empty.to(Device::cpu()).numel(), 0);
  EXPECT_EQ(empty.clone().numel(), 0);
  EXPECT_NO_THROW(backend_for(gpu()).synchronize());
  // An empty view inside a tensor writes nothing: its neighbours keep their poison.
  const Tensor around = test::poisoned({4, 5}, DType::kF32, gpu());
  ops::fill(around.slice_rows(2, 2), 1.0);
  for (float v : around.to_vector<float>()) EXPECT_TRUE(std::isnan(v)) << "a fill of no rows wrote " << v;
}

}  // namespace
}  // namespace sprintnet
