// sprintnet against PyTorch, step by step (llm.c's test_gpt2 idea): the golden
// file holds what PyTorch computed for a small MLP (tools/make_golden.py); the
// test repeats the run and compares the loss, every gradient and every updated
// parameter of every step. A missing golden file fails the test (it is
// committed; the message says how to make it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>

#include "parity/golden_file.h"
#include "parity/golden_replay.h"
#include "parity/reference_compare.h"
#include "support/test_util.h"

namespace sprintnet::parity {
namespace {

// fp64: both sides compute in double and differ only in summation order (OpenBLAS vs PyTorch's
// matrix kernels; our loss and bias sums in row order), each dot product of <= 20 terms carrying
// ~20 * 1.1e-16 of its terms' size. Measured: 6e-16 after four steps. 1e-12 leaves 1000x room for
// other BLAS builds; a change of formula (Adam's L2 penalty for AdamW's decay: lr * wd * |p| ~ 1e-4
// of the scale) is far above it.
constexpr double kFp64Tolerance = 1e-12;
// fp32: the requirement. Summation order (~20 * 6e-8) plus our cross-entropy computed in
// double where PyTorch's is in fp32, carried over four steps. Measured: 2.5e-7 for SGD, 2.2e-6 for
// AdamW, most of which comes from the CPU Adam kernel forming (1 - beta2) in fp32 (1.3e-5 off for
// 0.999) where PyTorch forms it in double.
constexpr double kFp32Tolerance = 1e-5;
// The size of error the comparison must catch: one gradient element off by 1e-3 of itself.
constexpr double kPerturbation = 1e-3;

double tolerance_for(const std::string& precision) { return precision == "fp64" ? kFp64Tolerance : kFp32Tolerance; }

GoldenFile load_golden() { return GoldenFile::load(golden_dir() / kGoldenFileName); }

// Flat index of the element of largest magnitude.
std::int64_t largest_element(const Tensor& t) {
  const auto v = t.to_vector<double>();
  const auto it = std::max_element(v.begin(), v.end(), [](double a, double b) { return std::abs(a) < std::abs(b); });
  return it - v.begin();
}

// A copy of `t` with element `index` multiplied by (1 + relative).
Tensor perturbed(const Tensor& t, std::int64_t index, double relative) {
  Tensor copy = t.clone();
  if (copy.dtype() == DType::kF64) {
    copy.data<double>()[index] *= 1.0 + relative;
  } else {
    copy.data<float>()[index] *= static_cast<float>(1.0 + relative);
  }
  return copy;
}

class PyTorchParity : public testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(PyTorchParity, LossGradientsAndParametersMatchEveryStep) {
  const auto& [precision, optimizer] = GetParam();
  const GoldenFile golden = load_golden();
  const double tolerance = tolerance_for(precision);
  const std::vector<ReferenceComparison> comparisons = replay_and_compare(golden, precision, optimizer);

  const auto layers = golden.layers();
  const auto params = static_cast<std::int64_t>(2 * (layers.size() - 1));  // weight and bias per Linear
  ASSERT_EQ(static_cast<std::int64_t>(comparisons.size()), golden.steps() * (1 + 2 * params));
  const ReferenceComparison* worst = &comparisons.front();
  for (const ReferenceComparison& c : comparisons) {
    // An all-zero reference would pass against an all-zero result: it would prove nothing.
    EXPECT_GT(c.expected_scale, 0.0) << c.name << ": the reference is all zeros";
    EXPECT_TRUE(within_tolerance(c, tolerance));
    if (c.relative_error > worst->relative_error) worst = &c;
  }
  std::printf("%s %s vs %s: %zu tensors, worst %s\n", precision.c_str(), optimizer.c_str(),
              golden.description().value("producer", "?").c_str(), comparisons.size(), worst->describe().c_str());
}

INSTANTIATE_TEST_SUITE_P(Golden, PyTorchParity,
                         testing::Combine(testing::Values("fp64", "fp32"), testing::Values("sgd", "adamw")),
                         [](const auto& test_info) {
                           return std::get<0>(test_info.param) + "_" + std::get<1>(test_info.param);
                         });

TEST(PyTorchParity, MissingGoldenFileIsAnErrorThatSaysHowToMakeIt) {
  try {
    GoldenFile::load(test::temp_dir("parity") / kGoldenFileName);
    FAIL() << "loading a missing golden file did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tools/make_golden.py"), std::string::npos) << e.what();
  }
}

TEST(ReferenceComparison, ReportsOneGradientElementOffBy1e3OfItself) {
  const GoldenFile golden = load_golden();
  Generator gen(test::test_seed());
  for (const std::string precision : {"fp64", "fp32"}) {
    const std::string name = precision + ".sgd.step.1.grad.0.weight";
    const Tensor& reference = golden.tensor(name);
    ASSERT_FALSE(test::all_zero(reference));
    EXPECT_EQ(compare_to_reference(name, reference.clone(), reference).relative_error, 0.0);

    // The largest element off by 1e-3 of itself: an error of exactly 1e-3 of the scale.
    const std::int64_t top = largest_element(reference);
    const ReferenceComparison at_top = compare_to_reference(name, perturbed(reference, top, kPerturbation), reference);
    EXPECT_FALSE(within_tolerance(at_top, tolerance_for(precision)));
    EXPECT_EQ(at_top.worst_index, top);
    EXPECT_NEAR(at_top.relative_error, kPerturbation, kPerturbation * 1e-3);  // fp32 rounding of the perturbed value
    EXPECT_NE(at_top.describe().find(name), std::string::npos);

    // Any element of at least a tenth of the scale, off by 1e-3 of itself, is >= 1e-4 of the scale: caught.
    const auto values = reference.to_vector<double>();
    std::vector<std::int64_t> sizeable;
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (std::abs(values[i]) >= 0.1 * std::abs(values[static_cast<std::size_t>(top)])) {
        sizeable.push_back(static_cast<std::int64_t>(i));
      }
    }
    const std::int64_t pick = sizeable[gen.below(sizeable.size())];
    const ReferenceComparison at_pick =
        compare_to_reference(name, perturbed(reference, pick, kPerturbation), reference);
    EXPECT_FALSE(within_tolerance(at_pick, tolerance_for(precision))) << "element " << pick;
    EXPECT_EQ(at_pick.worst_index, pick);
  }
}

TEST(ReferenceComparison, NanAndShapeMismatchAreInfiniteErrors) {
  const Tensor reference = Tensor::from_vector(std::vector<double>{1.0, -2.0, 3.0}, {3});
  const Tensor with_nan = Tensor::from_vector(std::vector<double>{1.0, std::nan(""), 3.0}, {3});
  const ReferenceComparison nan = compare_to_reference("x", with_nan, reference);
  EXPECT_EQ(nan.relative_error, std::numeric_limits<double>::infinity());
  EXPECT_EQ(nan.worst_index, 1);
  const ReferenceComparison shape = compare_to_reference("x", reference.view({3, 1}), reference);
  EXPECT_EQ(shape.relative_error, std::numeric_limits<double>::infinity());
  EXPECT_NE(shape.describe().find("[3, 1]"), std::string::npos) << shape.describe();
}

// The whole replay, not just the helper, notices a wrong number: corrupt one element of one
// recorded gradient and exactly that record must fail.
TEST(PyTorchParity, ReplayReportsACorruptedReferenceGradient) {
  for (const std::string precision : {"fp64", "fp32"}) {
    GoldenFile golden = load_golden();
    const std::string name = precision + ".adamw.step.2.grad.2.weight";
    const Tensor& reference = golden.tensor(name);
    golden.set_tensor(name, perturbed(reference, largest_element(reference), kPerturbation));
    std::vector<std::string> failed;
    for (const ReferenceComparison& c : replay_and_compare(golden, precision, "adamw")) {
      if (!within_tolerance(c, tolerance_for(precision))) failed.push_back(c.name);
    }
    EXPECT_EQ(failed, std::vector<std::string>{name}) << precision;
  }
}

}  // namespace
}  // namespace sprintnet::parity
