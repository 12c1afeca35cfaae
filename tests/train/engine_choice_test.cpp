// Which step a config trains with (eager or a compiled step) and in which precision: the
// choices are pure functions of the config and device, so they are tested here without a GPU,
// including the errors that name the key to change.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "sprintnet/train/trainer.h"
#include "support/error_message.h"

namespace sprintnet::train {
namespace {

using ::testing::HasSubstr;

Config with(const std::vector<std::string>& overrides) { return config_from_overrides(overrides); }

TEST(EngineChoice, TheCompiledStepTakesEveryActivationLossAndLastBatch) {
  EXPECT_EQ(train_plan_unsupported(with({})), std::nullopt);
  for (const char* activation : {"identity", "relu", "gelu", "tanh", "sigmoid", "silu"}) {
    EXPECT_EQ(train_plan_unsupported(with({fmt::format("model.activation=\"{}\"", activation)})), std::nullopt)
        << activation;
  }
  EXPECT_EQ(train_plan_unsupported(with({"loss.type=\"mse\""})), std::nullopt);
  EXPECT_EQ(train_plan_unsupported(with({"train.drop_last=false"})), std::nullopt);  // 60000 = 468 x 128 + 96
}

TEST(EngineChoice, WhatTheCompiledStepCannotRunIsNamed) {
  EXPECT_THAT(train_plan_unsupported(with({"train.batch_size=70000"})).value_or(""), HasSubstr("65535"));
}

TEST(EngineChoice, AutoCompilesOnAGpuWhenItCanAndRunsEagerOtherwise) {
  const Device gpu = Device::cuda(0);  // resolve_compiled only reads the device's kind
  EXPECT_TRUE(resolve_compiled(with({}), gpu));
  EXPECT_TRUE(resolve_compiled(with({"model.activation=\"tanh\"", "loss.type=\"mse\""}), gpu));
  EXPECT_FALSE(resolve_compiled(with({"train.batch_size=70000"}), gpu));
  EXPECT_FALSE(resolve_compiled(with({"device.engine=\"eager\""}), gpu));
}

TEST(EngineChoice, TheCpuCompilesEveryModelUnlessAskedForEager) {
  EXPECT_TRUE(resolve_compiled(with({}), Device::cpu()));
  EXPECT_TRUE(resolve_compiled(with({"device.engine=\"compiled\"", "model.activation=\"gelu\"", "loss.type=\"mse\"",
                                     "train.drop_last=false"}),
                               Device::cpu()));
  EXPECT_FALSE(resolve_compiled(with({"device.engine=\"eager\""}), Device::cpu()));
}

TEST(EngineChoice, AskingForTheCompiledStepWhereItCannotRunSaysWhy) {
  EXPECT_THAT(test::error_message([] {
                resolve_compiled(with({"device.engine=\"compiled\"", "train.batch_size=70000"}), Device::cuda(0));
              }),
              HasSubstr("65535"));
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
