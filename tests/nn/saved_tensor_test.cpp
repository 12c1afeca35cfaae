// Writes into a tensor a module saved for its backward: every op counts the writes into the tensors it writes
// (Tensor::version, shared by views, as torch's _version), and Linear's and the activations' backward refuse saved
// tensors written since forward (nn/saved_tensor.h), naming the module and the tensor, before writing any gradient.
// Without the check, backward differentiated the new values without a word: each test shows that the gradient of
// the changed tensor differs from the forward's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sprintnet/nn/activation.h"
#include "sprintnet/nn/linear.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/optim/optimizer.h"
#include "support/error_message.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::unique_ptr<nn::Linear> random_linear(Generator& gen) {
  auto linear = std::make_unique<nn::Linear>(5, 4, true, Device::cpu(), DType::kF64);
  linear->reset_parameters(gen);
  return linear;
}

TEST(TensorVersion, EachOpCountsAWriteIntoWhatItWritesNotWhatItReads) {
  Generator gen(test::test_seed());
  const Tensor a = test::random_uniform({3, 5}, DType::kF64, gen);
  const Tensor b = test::random_uniform({4, 5}, DType::kF64, gen);
  const Tensor c = Tensor::zeros({3, 4}, DType::kF64);
  const Tensor bias = test::random_uniform({4}, DType::kF64, gen);
  const std::uint64_t a0 = a.version(), b0 = b.version(), c0 = c.version(), bias0 = bias.version();
  ops::gemm(a, false, b, true, c);
  EXPECT_EQ(c.version(), c0 + 1);
  ops::add_bias(c, bias);
  ops::activation_forward(Activation::kReLU, c, c);  // in place: one write
  EXPECT_EQ(c.version(), c0 + 3);
  EXPECT_EQ(a.version(), a0);
  EXPECT_EQ(b.version(), b0);
  EXPECT_EQ(bias.version(), bias0);
  // Views share the count: a write into a row of c is a write into c.
  ops::fill(c.slice_rows(1, 2), 0.0);
  EXPECT_EQ(c.version(), c0 + 4);
  EXPECT_EQ(c.view({12}).version(), c.version());
  // Copying onto itself writes nothing; into another tensor, one write there.
  ops::copy(c, c);
  EXPECT_EQ(c.version(), c0 + 4);
  const Tensor d = Tensor::zeros({3, 4}, DType::kF64);
  const std::uint64_t d0 = d.version();
  ops::copy(d, c);
  ops::axpy(d, c, 2.0);
  EXPECT_EQ(d.version(), d0 + 2);
  EXPECT_EQ(c.version(), c0 + 4);
  EXPECT_EQ(Tensor().version(), 0u);
}

TEST(SavedTensor, LinearRefusesAnInputWrittenSinceForwardAndWritesNoGradient) {
  Generator gen(test::test_seed());
  auto linear = random_linear(gen);
  const Tensor x = test::random_uniform({3, 5}, DType::kF64, gen);
  const Tensor dy = test::random_uniform({3, 4}, DType::kF64, gen);
  linear->forward(x);
  ops::axpy(x, x, 1.0);  // x doubled in place
  EXPECT_THAT(test::error_message([&] { linear->backward(dy); }),
              AllOf(HasSubstr("Linear(in=5, out=4, bias=true).backward: the input that forward saved was modified in "
                              "place since (1 write(s) by ops after forward)"),
                    HasSubstr("Clone it before changing it")));
  EXPECT_FALSE(linear->weight().has_grad);  // refused before any gradient was written
  EXPECT_FALSE(linear->bias().has_grad);

  // What the check prevents: the weight gradient of the doubled input is twice the forward's.
  linear->forward(x);
  linear->backward(dy);
  const Tensor grad_of_doubled = linear->weight().grad.clone();
  linear->weight().has_grad = linear->bias().has_grad = false;  // the next backward overwrites (zero_grad)
  const Tensor half = x.clone();
  ops::fill(half, 0.0);
  ops::axpy(half, x, 0.5);
  linear->forward(half);
  linear->backward(dy);
  EXPECT_GT(test::max_abs_difference(grad_of_doubled, linear->weight().grad), 1e-3);
}

TEST(SavedTensor, LinearRefusesAWeightUpdatedBetweenForwardAndBackward) {
  Generator gen(test::test_seed());
  auto linear = random_linear(gen);
  const Tensor x = test::random_uniform({3, 5}, DType::kF64, gen);
  const Tensor dy = test::random_uniform({3, 4}, DType::kF64, gen);
  optim::SGD sgd(linear->parameters(), optim::SgdOptions{});
  linear->forward(x);
  linear->backward(dy);
  linear->forward(x);
  sgd.step();  // the weights change under the saved forward
  EXPECT_THAT(test::error_message([&] { linear->backward(dy); }),
              HasSubstr("Linear(in=5, out=4, bias=true).backward: the weight that forward saved was modified in place"));
  // The input needs no gradient: the weight is not used, and a step between forward and backward is allowed.
  linear->set_input_requires_grad(false);
  linear->forward(x);
  sgd.step();
  EXPECT_NO_THROW(linear->backward(dy));
}

TEST(SavedTensor, ActivationsRefuseAnInputOrOutputWrittenSinceForward) {
  Generator gen(test::test_seed());
  const Tensor dy = test::random_uniform({2, 6}, DType::kF64, gen);
  for (const bool write_output : {false, true}) {
    nn::Tanh tanh;
    const Tensor x = test::random_uniform({2, 6}, DType::kF64, gen);
    const Tensor y = tanh.forward(x);
    ops::fill((write_output ? y : x).slice_rows(0, 1), 0.5);
    EXPECT_THAT(test::error_message([&] { tanh.backward(dy); }),
                HasSubstr(fmt::format("Tanh().backward: the {} that forward saved was modified in place",
                                      write_output ? "output" : "input")));
  }
  // Tanh's gradient reads its output: a changed one gives another gradient.
  nn::Tanh tanh;
  const Tensor x = test::random_uniform({2, 6}, DType::kF64, gen);
  tanh.forward(x);
  const Tensor forwards = tanh.backward(dy);
  const Tensor y = tanh.forward(x);
  ops::fill(y, 0.5);
  const Tensor changed = Tensor::empty(x.shape(), DType::kF64);
  ops::activation_backward(Activation::kTanh, x, y, dy, changed);
  EXPECT_GT(test::max_abs_difference(forwards, changed), 1e-3);
}

}  // namespace
}  // namespace sprintnet
