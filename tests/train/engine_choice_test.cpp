// Which step a config trains with (eager or a compiled step) and in which precision: the
// choices are pure functions of the config and device, so they are tested here without a GPU,
// including the errors that name the key to change.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sprintnet/train/trainer.h"
#include "support/error_message.h"

namespace sprintnet::train {
namespace {

using ::testing::HasSubstr;

Config with(const std::vector<std::string>& overrides) { return config_from_overrides(overrides); }

TEST(EngineChoice, TheCompiledStepTakesReluAndIdentityMlpsWithCrossEntropy) {
  EXPECT_EQ(train_plan_unsupported(with({}), 60000), std::nullopt);
  EXPECT_EQ(train_plan_unsupported(with({"model.activation=\"identity\""}), 60000), std::nullopt);
  // Softmax regression has no activation at all: any name is fine.
  EXPECT_EQ(train_plan_unsupported(with({"model.hidden=[]", "model.activation=\"tanh\""}), 60000), std::nullopt);
  // A full last batch is not partial, whatever drop_last says.
  EXPECT_EQ(train_plan_unsupported(with({"train.drop_last=false", "train.batch_size=100"}), 60000), std::nullopt);
}

TEST(EngineChoice, WhatTheCompiledStepDoesNotFuseIsNamedByItsKey) {
  EXPECT_THAT(train_plan_unsupported(with({"model.activation=\"gelu\""}), 60000).value_or(""),
              HasSubstr("model.activation = \"gelu\""));
  EXPECT_THAT(train_plan_unsupported(with({"loss.type=\"mse\""}), 60000).value_or(""), HasSubstr("loss.type"));
  EXPECT_THAT(train_plan_unsupported(with({"train.drop_last=false"}), 60000).value_or(""),
              HasSubstr("train.drop_last"));
}

TEST(EngineChoice, AutoCompilesOnAGpuWhenItCanAndRunsEagerOtherwise) {
  const Device gpu = Device::cuda(0);  // resolve_compiled only reads the device's kind
  EXPECT_TRUE(resolve_compiled(with({}), gpu, 60000));
  EXPECT_FALSE(resolve_compiled(with({"model.activation=\"tanh\""}), gpu, 60000));
  EXPECT_FALSE(resolve_compiled(with({"device.engine=\"eager\""}), gpu, 60000));
}

TEST(EngineChoice, TheCpuCompilesEveryModelUnlessAskedForEager) {
  EXPECT_TRUE(resolve_compiled(with({}), Device::cpu(), 60000));
  EXPECT_TRUE(resolve_compiled(with({"device.engine=\"compiled\"", "model.activation=\"gelu\"", "loss.type=\"mse\"",
                                     "train.drop_last=false"}),
                               Device::cpu(), 60000));
  EXPECT_FALSE(resolve_compiled(with({"device.engine=\"eager\""}), Device::cpu(), 60000));
}

TEST(EngineChoice, AskingForTheCompiledStepWhereItCannotRunSaysWhy) {
  EXPECT_THAT(test::error_message([] {
                resolve_compiled(with({"device.engine=\"compiled\"", "loss.type=\"mse\""}), Device::cuda(0), 60000);
              }),
              HasSubstr("loss.type = \"mse\""));
}

TEST(EngineChoice, AutoPrecisionIsBf16ForTheCompiledStepAndFp32Otherwise) {
  DeviceConfig config;
  EXPECT_EQ(resolve_precision(config, Device::cuda(0), true), "bf16");
  EXPECT_EQ(resolve_precision(config, Device::cuda(0), false), "fp32");
  EXPECT_EQ(resolve_precision(config, Device::cpu(), false), "fp32");
  EXPECT_EQ(resolve_precision(config, Device::cpu(), true), "fp32");  // the CPU's bf16 is asked for by name
  config.precision = "fp16";
  EXPECT_EQ(resolve_precision(config, Device::cuda(0), true), "fp16");
}

TEST(EngineChoice, SixteenBitOrTf32PrecisionNeedsACompiledStep) {
  DeviceConfig config;
  config.precision = "bf16";
  EXPECT_EQ(resolve_precision(config, Device::cpu(), true), "bf16");
  EXPECT_THAT(test::error_message([&] { resolve_precision(config, Device::cpu(), false); }),
              HasSubstr("needs the compiled step"));
  config.precision = "fp16";
  EXPECT_THAT(test::error_message([&] { resolve_precision(config, Device::cpu(), true); }),
              HasSubstr("device.precision = \"fp16\" needs a GPU"));
  config.precision = "tf32";
  config.engine = "eager";
  EXPECT_THAT(test::error_message([&] { resolve_precision(config, Device::cuda(0), false); }),
              HasSubstr("needs the compiled step"));
}

}  // namespace
}  // namespace sprintnet::train
