// train::evaluate (the eager engine's evaluation, and eval's): every sample once whatever the loader's shuffle and
// drop_last, as the plans evaluate; the loader's epoch and the model's mode left as the caller had them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sprintnet/nn/mlp.h"
#include "sprintnet/train/evaluate.h"
#include "support/test_util.h"

namespace sprintnet::train {
namespace {

using testing::HasSubstr;


std::unique_ptr<nn::Sequential> model_of(std::int64_t inputs) {
  Generator gen(11, 0);
  return nn::make_mlp({.inputs = inputs, .hidden = {8}, .outputs = 4}, gen);
}

// A drop_last loader's partial batch counted in the mean but not evaluated understated the loss by 60/64.
TEST(Evaluate, EverySampleOnceWhateverTheLoadersShuffleAndDropLast) {
  Generator gen(test::test_seed(), 1);
  const Dataset data = test::random_dataset("random", 64, 6, 4, gen);
  const Normalization norm{1.0 / 255, 0.0};
  auto model = model_of(6);
  BatchLoader plain(data, norm, {.batch_size = 10, .shuffle = false, .drop_last = false}, Device::cpu());
  BatchLoader training(data, norm, {.batch_size = 10, .shuffle = true, .drop_last = true, .seed = 2}, Device::cpu());
  const EvalResult expected = evaluate(*model, plain, "cross_entropy");
  const EvalResult got = evaluate(*model, training, "cross_entropy");
  EXPECT_EQ(got.samples, 64);
  EXPECT_EQ(got.loss, expected.loss);
  EXPECT_EQ(got.correct, expected.correct);
  std::int64_t rows = 0;
  evaluate(*model, training, "mse", [&](const Tensor& logits, const Tensor&) { rows += logits.size(0); });
  EXPECT_EQ(rows, 64) << "the hook sees every row once";
}

TEST(Evaluate, LeavesTheLoadersEpochAndTheModelsModeAsTheyWere) {
  Generator gen(test::test_seed(), 2);
  const Dataset data = test::random_dataset("random", 40, 6, 4, gen);
  const Normalization norm{1.0 / 255, 0.0};
  const LoaderOptions options{.batch_size = 8, .shuffle = true, .drop_last = true, .seed = 9};
  BatchLoader loader(data, norm, options, Device::cpu()), untouched(data, norm, options, Device::cpu());
  loader.start_epoch(4);
  untouched.start_epoch(4);
  auto model = model_of(6);
  model->train();
  evaluate(*model, loader, "cross_entropy");
  EXPECT_TRUE(model->is_training());
  EXPECT_EQ(loader.batch(2).inputs.to_vector<float>(), untouched.batch(2).inputs.to_vector<float>());

  // Refused, or failing in the model, it leaves the mode alone too: a training step after it must not fail as
  // "backward without a forward in training mode".
  EXPECT_THAT([&] { evaluate(*model, loader, "nll"); }, testing::ThrowsMessage<Error>(HasSubstr("unknown loss 'nll'")));
  EXPECT_TRUE(model->is_training());
  auto narrow = model_of(5);
  EXPECT_THROW(evaluate(*narrow, loader, "cross_entropy"), Error);
  EXPECT_TRUE(narrow->is_training());
  model->eval();
  evaluate(*model, loader, "cross_entropy");
  EXPECT_FALSE(model->is_training());
}

}  // namespace
}  // namespace sprintnet::train
