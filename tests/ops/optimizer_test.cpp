// CPU optimizer steps for three steps against closed forms in double (constant
// gradients make torch's recurrences summable by hand) and, where the gradient
// depends on the weights, against a scalar transcription of torch's docs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops_test_util.h"
#include "sprintnet/ops/ops.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

inline constexpr int kSteps = 3;
// fp64: the closed forms and the op differ by a few roundings per step (1e-14 of the weights). fp32: a few
// fp32 roundings per step (1e-6).
double tolerance(DType dtype) { return dtype == DType::kF32 ? 1e-6 : 1e-14; }

struct Problem {
  Tensor param, grad;
  std::vector<double> p0, g;
};

Problem make_problem(DType dtype, Generator& gen) {
  Problem pr{test::random_uniform({257}, dtype, gen), test::random_uniform({257}, dtype, gen), {}, {}};
  pr.p0 = test::values(pr.param);
  pr.g = test::values(pr.grad);
  return pr;
}

void run_sgd(const Problem& pr, const Tensor* buf, SgdHyper h) {
  for (int t = 0; t < kSteps; ++t) {
    h.first_step = t == 0;
    ops::sgd_step(pr.param, pr.grad, buf, h);
  }
}

class OptimizerTest : public testing::TestWithParam<DType> {};

TEST_P(OptimizerTest, SgdPlainIsLinearInSteps) {
  Generator gen(test::test_seed());
  const Problem pr = make_problem(GetParam(), gen);
  run_sgd(pr, nullptr, SgdHyper{.lr = 0.1});
  std::vector<double> expected(pr.p0.size());
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = pr.p0[i] - kSteps * 0.1 * pr.g[i];
  EXPECT_LE(test::relative_error(test::values(pr.param), expected), tolerance(GetParam()));
}

// Constant g: b1 = g, b_{t+1} = m b_t + (1-d) g. Plain momentum steps by b_t; Nesterov by g + m b_t.
TEST_P(OptimizerTest, SgdMomentumDampeningNesterov) {
  const double lr = 0.05, m = 0.9, d = 0.2;
  for (bool nesterov : {false, true}) {
    Generator gen(test::test_seed());
    const Problem pr = make_problem(GetParam(), gen);
    // NaN in the buffer: the first step must set it to the gradient without reading it.
    const Tensor buf = test::poisoned(pr.param.shape(), GetParam());
    run_sgd(pr, &buf, SgdHyper{.lr = lr, .momentum = m, .dampening = d, .nesterov = nesterov});
    std::vector<double> expected(pr.p0.size()), expected_buf(pr.p0.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const double g = pr.g[i];
      const double b1 = g, b2 = m * b1 + (1 - d) * g, b3 = m * b2 + (1 - d) * g;
      expected[i] = nesterov ? pr.p0[i] - lr * (kSteps * g + m * (b1 + b2 + b3)) : pr.p0[i] - lr * (b1 + b2 + b3);
      expected_buf[i] = b3;
    }
    EXPECT_LE(test::relative_error(test::values(pr.param), expected), tolerance(GetParam())) << nesterov;
    EXPECT_LE(test::relative_error(test::values(buf), expected_buf), tolerance(GetParam())) << nesterov;
  }
}

// No momentum, weight decay w: p_{t+1} = (1 - lr w) p_t - lr g, so p_3 = k^3 p_0 - lr g (1 + k + k^2), k = 1 - lr w.
TEST_P(OptimizerTest, SgdWeightDecay) {
  Generator gen(test::test_seed());
  const Problem pr = make_problem(GetParam(), gen);
  const double lr = 0.1, w = 0.3, k = 1.0 - lr * w;
  run_sgd(pr, nullptr, SgdHyper{.lr = lr, .weight_decay = w});
  std::vector<double> expected(pr.p0.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    expected[i] = k * k * k * pr.p0[i] - lr * pr.g[i] * (1 + k + k * k);
  }
  EXPECT_LE(test::relative_error(test::values(pr.param), expected), tolerance(GetParam()));
}

// Scalar transcription of torch.optim.SGD's documented algorithm, for gradients that change each step.
TEST(Sgd, AllOptionsMatchTorchAlgorithmOverChangingGradients) {
  Generator gen(test::test_seed());
  const SgdHyper base{.lr = 0.07, .momentum = 0.8, .dampening = 0.1, .weight_decay = 0.01, .nesterov = true};
  const Tensor param = test::random_uniform({100}, DType::kF64, gen);
  const Tensor buf = Tensor::zeros({100}, DType::kF64);
  auto p = test::values(param);
  std::vector<double> b(p.size());
  for (int t = 0; t < kSteps; ++t) {
    const Tensor grad = test::random_uniform({100}, DType::kF64, gen);
    const auto g = test::values(grad);
    SgdHyper h = base;
    h.first_step = t == 0;
    ops::sgd_step(param, grad, &buf, h);
    for (std::size_t i = 0; i < p.size(); ++i) {
      double gi = g[i] + h.weight_decay * p[i];
      b[i] = t == 0 ? gi : h.momentum * b[i] + (1 - h.dampening) * gi;
      gi = h.nesterov ? gi + h.momentum * b[i] : b[i];
      p[i] -= h.lr * gi;
    }
  }
  EXPECT_LE(test::relative_error(test::values(param), p), 1e-14);
  EXPECT_LE(test::relative_error(test::values(buf), b), 1e-14);
}

// Constant g, no weight decay: m_t = (1 - b1^t) g and v_t = (1 - b2^t) g^2, so the bias-corrected step is
// exactly lr * g / (|g| + eps) every step: p_3 = p_0 - 3 lr g / (|g| + eps).
TEST_P(OptimizerTest, AdamConstantGradientTakesEqualSteps) {
  Generator gen(test::test_seed());
  const Problem pr = make_problem(GetParam(), gen);
  const Tensor m = Tensor::zeros(pr.param.shape(), GetParam()), v = Tensor::zeros(pr.param.shape(), GetParam());
  AdamHyper h{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8};
  for (int t = 1; t <= kSteps; ++t) {
    h.step = t;
    ops::adam_step(pr.param, pr.grad, m, v, h);
  }
  std::vector<double> expected(pr.p0.size()), expected_m(pr.p0.size()), expected_v(pr.p0.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double g = pr.g[i];
    expected[i] = pr.p0[i] - kSteps * h.lr * g / (std::abs(g) + h.eps);
    expected_m[i] = (1 - std::pow(h.beta1, kSteps)) * g;
    expected_v[i] = (1 - std::pow(h.beta2, kSteps)) * g * g;
  }
  EXPECT_LE(test::relative_error(test::values(pr.param), expected), tolerance(GetParam()));
  EXPECT_LE(test::relative_error(test::values(m), expected_m), tolerance(GetParam()));
  EXPECT_LE(test::relative_error(test::values(v), expected_v), tolerance(GetParam()));
}

// AdamW, constant g: p_{t+1} = k p_t - u with k = 1 - lr w and u = lr g / (|g| + eps) as above,
// so p_3 = k^3 p_0 - u (1 + k + k^2).
TEST_P(OptimizerTest, AdamWDecaysWeightsDecoupled) {
  Generator gen(test::test_seed());
  const Problem pr = make_problem(GetParam(), gen);
  const Tensor m = Tensor::zeros(pr.param.shape(), GetParam()), v = Tensor::zeros(pr.param.shape(), GetParam());
  AdamHyper h{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.5, .decoupled = true};
  for (int t = 1; t <= kSteps; ++t) {
    h.step = t;
    ops::adam_step(pr.param, pr.grad, m, v, h);
  }
  const double k = 1.0 - h.lr * h.weight_decay;
  std::vector<double> expected(pr.p0.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double u = h.lr * pr.g[i] / (std::abs(pr.g[i]) + h.eps);
    expected[i] = k * k * k * pr.p0[i] - u * (1 + k + k * k);
  }
  EXPECT_LE(test::relative_error(test::values(pr.param), expected), tolerance(GetParam()));
}

// Adam with L2 weight decay (g += w p): the gradient depends on p, so against a scalar transcription
// of torch.optim.Adam's documented algorithm (m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t)).
TEST(Adam, L2WeightDecayMatchesTorchAlgorithm) {
  Generator gen(test::test_seed());
  const Tensor param = test::random_uniform({100}, DType::kF64, gen);
  const Tensor grad = test::random_uniform({100}, DType::kF64, gen);
  const Tensor m = Tensor::zeros({100}, DType::kF64), v = Tensor::zeros({100}, DType::kF64);
  auto p = test::values(param);
  const auto g = test::values(grad);
  std::vector<double> mm(p.size()), vv(p.size());
  AdamHyper h{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1};
  for (int t = 1; t <= kSteps; ++t) {
    h.step = t;
    ops::adam_step(param, grad, m, v, h);
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double gi = g[i] + h.weight_decay * p[i];
      mm[i] = h.beta1 * mm[i] + (1 - h.beta1) * gi;
      vv[i] = h.beta2 * vv[i] + (1 - h.beta2) * gi * gi;
      const double m_hat = mm[i] / (1 - std::pow(h.beta1, t)), v_hat = vv[i] / (1 - std::pow(h.beta2, t));
      p[i] -= h.lr * m_hat / (std::sqrt(v_hat) + h.eps);
    }
  }
  EXPECT_LE(test::relative_error(test::values(param), p), 1e-13);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, OptimizerTest, testing::Values(DType::kF32, DType::kF64),
                         [](const testing::TestParamInfo<DType>& param_info) { return std::string(dtype_name(param_info.param)); });

}  // namespace
}  // namespace sprintnet
