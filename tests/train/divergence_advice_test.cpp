#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sprintnet/train/divergence_advice.h"

namespace sprintnet::train {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Config sgd(double momentum, double weight_decay, bool nesterov = false) {
  Config config;
  config.optim.type = "sgd";
  config.optim.momentum = momentum;
  config.optim.weight_decay = weight_decay;
  config.optim.nesterov = nesterov;
  return config;
}

TEST(DivergenceAdvice, ALowerLearningRateAlways) {
  EXPECT_EQ(divergence_advice(sgd(0.9, 0.0), 1e20), "try a lower optim.lr");
}

TEST(DivergenceAdvice, MomentumOfOneOrMoreIsNamed) {
  EXPECT_THAT(divergence_advice(sgd(1.5, 0.0), 0.01), HasSubstr("optim.momentum below 1 (it is 1.5"));
  EXPECT_THAT(divergence_advice(sgd(1.0, 0.0), 0.01), HasSubstr("optim.momentum below 1"));
  EXPECT_THAT(divergence_advice(sgd(0.99, 0.0), 0.01), Not(HasSubstr("optim.momentum")));
  Config adam = sgd(1.5, 0.0);
  adam.optim.type = "adam";  // momentum is SGD's key: Adam ignores it
  EXPECT_THAT(divergence_advice(adam, 0.01), Not(HasSubstr("optim.momentum")));
}

// The bounds are where the decay's own recurrence turns unstable (checked by iterating it: 1 % under each bound
// decays, 1 % over grows without end): 2(1 + m) for heavy-ball momentum, 2(1 + m)/(1 + 2m) for Nesterov, 2 for
// AdamW's decoupled decay.
TEST(DivergenceAdvice, WeightDecayPastTheDecaysStabilityBoundIsNamed) {
  // lr 0.1, momentum 0.9: bound 3.8 on lr x decay.
  EXPECT_THAT(divergence_advice(sgd(0.9, 37.0), 0.1), Not(HasSubstr("weight_decay")));
  EXPECT_THAT(divergence_advice(sgd(0.9, 39.0), 0.1),
              HasSubstr("a lower optim.weight_decay (lr x weight_decay = 3.9, at or past 3.8"));
  // Nesterov at momentum 0.9: 2(1.9)/2.8 = 1.357.
  EXPECT_THAT(divergence_advice(sgd(0.9, 13.0, true), 0.1), Not(HasSubstr("weight_decay")));
  EXPECT_THAT(divergence_advice(sgd(0.9, 14.0, true), 0.1), HasSubstr("optim.weight_decay"));
  Config adamw = sgd(0.0, 0.0);
  adamw.optim.type = "adamw";
  adamw.optim.weight_decay = 1.9;
  EXPECT_THAT(divergence_advice(adamw, 1.0), Not(HasSubstr("weight_decay")));
  adamw.optim.weight_decay = 2.1;
  EXPECT_THAT(divergence_advice(adamw, 1.0), HasSubstr("optim.weight_decay"));
  Config adam = adamw;
  adam.optim.type = "adam";  // L2 through Adam's normalised step: no bound on lr x decay
  EXPECT_THAT(divergence_advice(adam, 1.0), Not(HasSubstr("weight_decay")));
}

TEST(DivergenceAdvice, ASchedulesTypeIsNamed) {
  Config config = sgd(0.9, 0.0);
  config.schedule.type = "onecycle";
  EXPECT_EQ(divergence_advice(config, 1.0),
            "try a lower optim.lr, or schedule settings that keep it lower: schedule.type is \"onecycle\"");
}

}  // namespace
}  // namespace sprintnet::train
