#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "sprintnet/core/tensor.h"
#include "support/error_message.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

TEST(Tensor, ShapeAndDtype) {
  Tensor t = Tensor::zeros({3, 4}, DType::kF32);
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_TRUE(t.device().is_cpu());
  EXPECT_THROW(t.data<double>(), Error);
  EXPECT_THROW(t.size(2), Error);
}

// An undefined tensor holds nothing: numel() 0 (not the 1 of its empty shape), so "grow this cache when it
// holds fewer than n elements" builds it on first use even for n = 1.
TEST(Tensor, AnUndefinedTensorHasNoElements) {
  const Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_EQ(Tensor::zeros({}, DType::kF32).numel(), 1);  // a defined scalar has one
  EXPECT_THAT(test::error_message([&] { t.item(); }), testing::HasSubstr("item() of an undefined tensor"));
}

// The axis named as the caller gave it (-3 was reported as -1, after adding the dimension count).
TEST(Tensor, AnAxisOutOfRangeIsNamedAsGiven) {
  const Tensor t = Tensor::zeros({2, 3}, DType::kF32);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_THAT(test::error_message([&] { t.size(-3); }), testing::HasSubstr("axis -3 out of range for shape [2, 3]"));
  EXPECT_THAT(test::error_message([&] { t.size(2); }), testing::HasSubstr("axis 2 out of range for shape [2, 3]"));
}

// Conversions that cannot hold a value are errors, not the undefined behaviour of a cast (300 as uint8 was 44).
TEST(Tensor, ConversionsRefuseValuesTheTargetCannotHoldAndUndefinedTensors) {
  const Tensor x = Tensor::from_vector(std::vector<float>{300.0f, -1.0f}, {2});
  EXPECT_THROW(x.to_vector<std::uint8_t>(), Error);
  EXPECT_THROW(x.to(DType::kU8), Error);
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{std::nanf(""), 1.0f}, {2}).to(DType::kI32), Error);
  EXPECT_EQ(Tensor::from_vector(std::vector<float>{2.5f, -3.0f}, {2}).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{2, -3}));  // in range: truncated, as before
  // Truncated toward zero first, as torch: -0.5 and 255.9 are uint8's 0 and 255, -1 and 256 are not uint8.
  EXPECT_EQ(Tensor::from_vector(std::vector<float>{-0.5f, 255.9f}, {2}).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{0, 255}));
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{256.0f}, {1}).to(DType::kU8), Error);
  EXPECT_THROW(Tensor().to(DType::kF64), Error);
  EXPECT_THROW((void)Tensor().to_vector<float>(), Error);
}

TEST(Tensor, ViewAndSliceShareStorage) {
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor rows = t.slice_rows(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
  rows.data<float>()[0] = 42;
  EXPECT_EQ(t.to_vector<float>()[2], 42);
  EXPECT_THROW(t.view({4, 2}), Error);
  EXPECT_THROW(t.slice_rows(2, 4), Error);
}

// [-2, -3] has the product 6, and view took it: a shape with negative extents. No extent is inferred from -1 either
// (view's comment: every extent is given), so a negative extent is refused by name, here and in every factory.
TEST(Tensor, ShapesWithANegativeExtentAreRefused) {
  const Tensor t = Tensor::zeros({6}, DType::kF32);
  EXPECT_THAT(test::error_message([&] { t.view({-2, -3}); }),
              testing::HasSubstr("cannot view [6] as [-2, -3]: extent -2 is negative"));
  EXPECT_THAT(test::error_message([&] { t.view({-1}); }), testing::HasSubstr("extent -1 is negative"));
  // An empty tensor: any extent times 0 is 0, so the element count alone took [0, -3] too.
  EXPECT_THAT(test::error_message([] { Tensor::zeros({0}, DType::kF32).view({0, -3}); }),
              testing::HasSubstr("extent -3 is negative"));
  EXPECT_EQ(t.view({2, 3}).shape(), (Shape{2, 3}));
  for (const auto& make : std::vector<std::function<void()>>{
           [] { Tensor::empty({-2, -3}, DType::kF32); }, [] { Tensor::zeros({-2, -3}, DType::kF32); },
           [] { Tensor::full({-2, -3}, 1.0, DType::kF32); },
           [] { Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {-2, -3}); }}) {
    EXPECT_THAT(test::error_message(make), testing::HasSubstr("negative extent -2 in shape [-2, -3]"));
  }
}

// Overlap is a matter of bytes of one storage: views of one buffer overlap where their ranges meet, an
// empty view and a tensor of another storage never do.
TEST(Tensor, OverlapsComparesTheBytesOfOneStorage) {
  const Tensor t = Tensor::zeros({4, 2}, DType::kF32);
  EXPECT_TRUE(t.overlaps(t));
  EXPECT_TRUE(t.slice_rows(0, 2).overlaps(t.slice_rows(1, 3)));
  EXPECT_TRUE(t.view({8}).overlaps(t.slice_rows(3, 4)));
  EXPECT_FALSE(t.slice_rows(0, 2).overlaps(t.slice_rows(2, 4)));  // adjacent, not overlapping
  EXPECT_FALSE(t.slice_rows(1, 1).overlaps(t));                   // empty
  EXPECT_FALSE(t.overlaps(t.clone()));
  EXPECT_FALSE(t.overlaps(Tensor()));
}

TEST(Tensor, CloneIsDeep) {
  Tensor t = Tensor::from_vector<float>({1, 2}, {2});
  Tensor c = t.clone();
  c.data<float>()[0] = 7;
  EXPECT_EQ(t.to_vector<float>()[0], 1);
}

TEST(Tensor, DtypeConversionRoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between two bf16 values; ties go to the even one (1.0).
  Tensor t = Tensor::from_vector<float>({1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f}, {3});
  EXPECT_EQ(t.to(DType::kBF16).to_vector<float>(), (std::vector<float>{1.0f, 1.0f + 4.0f / 256, -2.5f}));
  EXPECT_EQ(t.to(DType::kF16).to_vector<float>()[2], -2.5f);
}

TEST(Tensor, FromVectorChecksSize) {
  EXPECT_THROW(Tensor::from_vector<float>({1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW(Tensor::empty({-1}, DType::kF32), Error);
  // Bytes past 2^64 are an error naming the shape, not a wrapped-around small allocation.
  try {
    Tensor::empty({std::int64_t{1} << 62, 784}, DType::kF32);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[4611686018427387904, 784]"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Tensor::empty({std::int64_t{1} << 62, 784, 0}, DType::kF32).numel(), 0);  // empty is empty
}

}  // namespace
}  // namespace sprintnet
