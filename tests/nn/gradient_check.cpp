#include "nn/gradient_check.h"

#include <gtest/gtest.h>

#include <limits>

#include "sprintnet/ops/ops.h"
#include "support/test_util.h"

namespace sprintnet::test {

Tensor numerical_gradient(const Tensor& x, const std::function<double()>& loss) {
  SN_CHECK(x.dtype() == DType::kF64 && x.device().is_cpu(), "numerical_gradient needs an fp64 CPU tensor");
  Tensor grad = Tensor::empty(x.shape(), DType::kF64);
  double* values = x.data<double>();
  double* out = grad.data<double>();
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double saved = values[i];
    values[i] = saved + kFiniteDifferenceStep;
    const double plus = loss();
    values[i] = saved - kFiniteDifferenceStep;
    const double minus = loss();
    values[i] = saved;
    out[i] = (plus - minus) / (2.0 * kFiniteDifferenceStep);
  }
  return grad;
}

double dot(const Tensor& a, const Tensor& b) {
  SN_CHECK(a.shape() == b.shape(), "dot: shapes {} and {} differ", shape_str(a.shape()), shape_str(b.shape()));
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double sum = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) sum += x[i] * y[i];
  return sum;
}

void expect_gradient_close(const Tensor& analytic, const Tensor& numerical, std::string_view what) {
  ASSERT_TRUE(analytic.defined()) << what << ": backward gave no gradient";
  ASSERT_EQ(analytic.shape(), numerical.shape()) << what;
  EXPECT_FALSE(all_zero(numerical)) << what << ": the loss does not depend on it, the check is vacuous";
  EXPECT_LT(relative_error(analytic, numerical), kGradientRelativeTolerance) << what;
}

void expect_backward_matches_finite_differences(nn::Module& module, const Tensor& input, Generator& gen) {
  SCOPED_TRACE(module.describe());
  module.train();
  const Tensor output = module.forward(input);
  const Tensor upstream = random_uniform(output.shape(), DType::kF64, gen);
  for (nn::Parameter* p : module.parameters()) {
    p->has_grad = false;
    ops::fill(p->grad, std::numeric_limits<double>::quiet_NaN());
  }
  const Tensor grad_input = module.backward(upstream);

  module.eval();  // the perturbed forward passes below need to save nothing
  const auto loss = [&] { return dot(upstream, module.forward(input)); };
  if (module.input_requires_grad()) expect_gradient_close(grad_input, numerical_gradient(input, loss), "input");
  for (auto& [name, p] : module.named_parameters()) {
    EXPECT_TRUE(p->has_grad) << name;
    expect_gradient_close(p->grad, numerical_gradient(p->value, loss), name);
  }
  module.train();
}

}  // namespace sprintnet::test
