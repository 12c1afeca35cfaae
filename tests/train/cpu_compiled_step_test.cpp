// The compiled CPU step (train/cpu_train_plan.cpp) against the eager step, which stays the
// reference: the same initial weights, data and batch order through both, for every activation,
// both losses, every optimizer, and a partial last batch. Both run the same elementwise, loss and
// optimizer code on fp32; only the matrix products differ (oneDNN's matmul against its sgemm: another
// summation order). After three steps weights, state and losses agree to 1e-5 relative: a
// reordered fp32 sum of K <= 128 products is off by ~sqrt(K)*6e-8 ≈ 7e-7 per element, and three
// steps compound that only a few times. Adam(W) runs with eps = 1e-4 rather than 1e-8: its update
// g/(|g|+eps) turns a gradient near zero into ~lr*sign(g) with slope lr/eps, so at 1e-8 the
// products' reordering noise on such a gradient moved a weight by up to 1.3e-4 relative (2 seeds
// in 300 over the old 1e-4 bound); at 1e-4 every case stayed under 1e-6 over 60 seeds and under
// 1e-5 over 300. The update code is the same in both steps, so eps only conditions the comparison.
// A wrong op (a bias gradient left out, a layer skipped, a wrong activation gradient) is off by
// more than 1e-2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "sprintnet/nn/loss.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/ops/cpu/dnnl_matmul.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/optim/make_optimizer.h"
#include "sprintnet/train/evaluate.h"
#include "sprintnet/train/train_plan.h"
#include "support/error_message.h"
#include "support/training_steps.h"
#include "support/scoped_env.h"
#include "support/signal_storm.h"
#include "support/test_util.h"

namespace sprintnet::train {
namespace {

constexpr std::int64_t kSamples = 300, kFeatures = 20, kClasses = 5, kBatch = 128;  // batches 128, 128, 44
constexpr int kSteps = 3;


struct Case {
  Activation activation = Activation::kReLU;
  std::string loss = "cross_entropy";
  std::string optimizer = "sgd";
  std::string precision = "fp32";
  std::vector<std::int64_t> hidden = {24, 16};
  bool bias = true;
};

std::string name(const Case& c) {
  return fmt::format("{}/{}/{}/{}/{} hidden/{}", ops::activation_name(c.activation), c.loss, c.optimizer, c.precision,
                     c.hidden.size(), c.bias ? "bias" : "no bias");
}

OptimConfig optim_config(const std::string& type) {
  OptimConfig config;
  config.type = type;
  config.lr = type == "sgd" ? 0.1 : 0.01;
  config.momentum = 0.9;
  config.nesterov = true;
  config.weight_decay = 0.01;
  config.eps = 1e-4;  // well-conditioned Adam: see the top
  return config;
}

// One model and its optimizer, from the same seed every time.
struct Model {
  std::unique_ptr<nn::Sequential> net;
  std::unique_ptr<optim::Optimizer> optimizer;
};

nn::MlpSpec mlp_spec(const Case& c) {
  nn::MlpSpec spec;
  spec.inputs = kFeatures;
  spec.hidden = c.hidden;
  spec.outputs = kClasses;
  spec.activation = c.activation;
  spec.bias = c.bias;
  return spec;
}

Model make_model(const Case& c) {
  Generator gen(7, 1);
  Model m;
  m.net = nn::make_mlp(mlp_spec(c), gen);
  m.optimizer = optim::make_optimizer(optim_config(c.optimizer), m.net->parameters());
  return m;
}

std::vector<double> learning_rates(const Case& c) {
  std::vector<double> lr;
  for (int s = 0; s < kSteps; ++s) lr.push_back(optim_config(c.optimizer).lr * (1.0 - 0.2 * s));
  return lr;
}

struct Fixture {
  Dataset data;
  Normalization norm{1.0 / 255, -0.5};
  std::unique_ptr<BatchLoader> loader;
  Fixture() {
    Generator gen(test::test_seed(), 3);
    data = test::random_dataset("random", kSamples, kFeatures, kClasses, gen);
    loader = std::make_unique<BatchLoader>(data, norm, LoaderOptions{kBatch, true, false, 99}, Device::cpu());
  }
};

// Three eager steps; returns the sum of the steps' mean losses.
double train_eager(const Case& c, Model& m, BatchLoader& loader) {
  auto loss = nn::make_loss(c.loss, c.loss == "cross_entropy" ? 0.1 : 0.0);
  return test::train_eager_steps(*m.net, *m.optimizer, *loss, loader, learning_rates(c));
}

// `lr`: the rate of each step of the run (default: learning_rates(c), one epoch's).
TrainPlanSpec plan_spec(const Case& c, const BatchLoader& loader, std::vector<double> lr = {}) {
  TrainPlanSpec spec;
  spec.mlp = mlp_spec(c);
  spec.optim = optim_config(c.optimizer);
  spec.loss = c.loss;
  spec.label_smoothing = c.loss == "cross_entropy" ? 0.1 : 0.0;
  spec.precision = c.precision;
  spec.train = &loader;
  spec.lr_per_step = lr.empty() ? learning_rates(c) : std::move(lr);
  return spec;
}

std::unique_ptr<TrainPlan> make_plan(const Case& c, const BatchLoader& loader, std::vector<double> lr = {}) {
  return make_cpu_train_plan(plan_spec(c, loader, std::move(lr)));
}

// Three compiled steps, stored back into `m`; returns the epoch's totals.
EpochTotals train_compiled(const Case& c, Model& m, const BatchLoader& loader) {
  auto plan = make_plan(c, loader);
  return test::train_plan_steps(*plan, *m.net, *m.optimizer, kSteps);
}

// `state_tolerance` (default: `tolerance`) bounds the optimizer's state, which holds the gradients alone.
void expect_close(Model& a, Model& b, double tolerance, const std::string& what, double state_tolerance = 0.0) {
  if (state_tolerance == 0.0) state_tolerance = tolerance;
  const auto pa = a.net->named_parameters(), pb = b.net->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    EXPECT_LT(test::relative_error(pa[i].second->value, pb[i].second->value), tolerance) << what << " " << pa[i].first;
  }
  const auto sa = a.optimizer->state(), sb = b.optimizer->state();
  ASSERT_EQ(sa.size(), sb.size()) << what;
  for (std::size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_LT(test::relative_error(sa[i].second, sb[i].second), state_tolerance) << what << " " << sa[i].first;
  }
  EXPECT_EQ(a.optimizer->counters(), b.optimizer->counters()) << what;
}

TEST(CpuCompiledStep, FollowsTheEagerStepForEveryActivationLossAndOptimizer) {
  set_cpu_threads(2);
  Fixture f;
  for (const Activation act : {Activation::kIdentity, Activation::kReLU, Activation::kGELU, Activation::kTanh,
                               Activation::kSigmoid, Activation::kSiLU}) {
    for (const std::string loss : {"cross_entropy", "mse"}) {
      for (const std::string optimizer : {"sgd", "adam", "adamw"}) {
        const Case c{act, loss, optimizer};
        Model eager = make_model(c), compiled = make_model(c);
        const double eager_loss = train_eager(c, eager, *f.loader);
        const EpochTotals totals = train_compiled(c, compiled, *f.loader);
        EXPECT_NEAR(totals.loss_sum, eager_loss, 1e-5 * eager_loss) << name(c);
        expect_close(compiled, eager, 1e-5, name(c));
      }
    }
  }
  // Softmax regression (one layer: no input gradient, no activation) and layers without bias.
  for (const Case& c : {Case{.hidden = {}}, Case{.activation = Activation::kTanh, .bias = false},
                        Case{.optimizer = "adamw", .hidden = {}, .bias = false}}) {
    Model eager = make_model(c), compiled = make_model(c);
    const double eager_loss = train_eager(c, eager, *f.loader);
    const EpochTotals totals = train_compiled(c, compiled, *f.loader);
    EXPECT_NEAR(totals.loss_sum, eager_loss, 1e-5 * eager_loss) << name(c);
    expect_close(compiled, eager, 1e-5, name(c));
  }
}

// The thread count for one test, and back to the suite's 2 whatever happens in it.
struct CpuThreads {
  explicit CpuThreads(int threads) { set_cpu_threads(threads); }
  ~CpuThreads() { set_cpu_threads(2); }
  CpuThreads(const CpuThreads&) = delete;
  CpuThreads& operator=(const CpuThreads&) = delete;
};

// Layers whose weight gradient is computed and applied in several blocks of rows, the last one
// shorter: on one thread, 401 -> 401 takes blocks of 201 and 200 rows with dX split the same way
// (128 x 401 fp32 stays in cache), and 1101 -> 1101 nine blocks of 111 and one of 102 with dX whole
// (128 x 1101 does not). A block left out, applied twice or at the wrong offset, or a dX part
// missing leaves weights off by far more than the tolerance. The products reorder sums of K = 128
// (dW) and of k = 401 or 1101 (dX) terms: tanh, whose slope moves smoothly with such rounding. (With ReLU a
// pre-activation rounded across zero switches a unit's whole gradient on or off: SGD's momentum of the
// biases, a sum over the batch that largely cancels, then differed by 6e-5 to 2.6e-3 on some seeds,
// SPRINTNET_TEST_SEED=20550427412407 and 21109205013990; Fp32Drift pins that effect.) The optimizers'
// state holds the gradients alone: 1e-4 for it. AdamW runs with the well-conditioned eps of the top (at
// 1e-8 a 401-wide layer's bias gradient, a batch sum that largely cancels, changed sign under the
// reordering and moved weights by 2.8e-4, SPRINTNET_TEST_SEED=32642694862047); at 1e-4 it met SGD's
// bounds over 100 seeds. A block left out or applied twice moves ~half a 401 x 401 weight by 3 lr = 0.03
// against entries of ~0.05: relative error ~0.3, far above either bound.
TEST(CpuCompiledStep, AppliesAWideLayersGradientBlockByBlock) {
  const CpuThreads one(1);
  ASSERT_EQ(cpu_grad_block_rows(401, 401, 1), 201);
  ASSERT_TRUE(cpu_split_input_grad(128, 401, 1));
  ASSERT_EQ(cpu_grad_block_rows(1101, 1101, 1), 111);
  ASSERT_FALSE(cpu_split_input_grad(128, 1101, 1));
  Fixture f;
  for (const auto& [optimizer, width] : std::vector<std::pair<std::string, std::int64_t>>{
           {"sgd", 401}, {"adamw", 401}, {"sgd", 1101}}) {
    const Case c{.activation = Activation::kTanh, .optimizer = optimizer, .hidden = {width, width}};
    Model eager = make_model(c), compiled = make_model(c);
    const double eager_loss = train_eager(c, eager, *f.loader);
    const EpochTotals totals = train_compiled(c, compiled, *f.loader);
    EXPECT_NEAR(totals.loss_sum, eager_loss, 1e-5 * eager_loss) << name(c);
    expect_close(compiled, eager, 1e-5, name(c), 1e-4);
  }
}

// The kernel lab's SPRINTNET_CPU_BLOCK_KB sizes the blocks for that much cache a thread instead of 512 KB
// (docs/PERFORMANCE.md), and a size beyond every layer takes it whole; nothing else (0, text) changes them.
TEST(CpuCompiledStep, BlockSizeLabSwitchSizesTheBlocks) {
  {
    const test::ScopedEnv whole("SPRINTNET_CPU_BLOCK_KB", "100000");
    EXPECT_EQ(cpu_grad_block_rows(1101, 1101, 1), 1101);
    EXPECT_TRUE(cpu_split_input_grad(128, 1101, 1));
  }
  {
    const test::ScopedEnv small("SPRINTNET_CPU_BLOCK_KB", "128");  // 128 KB / (401 x 4 B) = 81 rows: 5 blocks
    EXPECT_EQ(cpu_grad_block_rows(401, 401, 1), 81);
    EXPECT_FALSE(cpu_split_input_grad(128, 401, 1));
  }
  {
    const test::ScopedEnv huge("SPRINTNET_CPU_BLOCK_KB", "9223372036854775807");  // overflowed the rows' product
    EXPECT_EQ(cpu_grad_block_rows(1101, 1101, 16), 1101);
  }
  for (const char* ignored : {"0", "blocks"}) {
    const test::ScopedEnv env("SPRINTNET_CPU_BLOCK_KB", ignored);
    EXPECT_EQ(cpu_grad_block_rows(401, 401, 1), 201) << ignored;
  }
  EXPECT_EQ(cpu_grad_block_rows(401, 401, 1), 201);
}

// A second epoch: the plan takes its learning rate from the table by the run's step (not the step within the
// epoch), draws epoch 1's batch order in start_epoch(1), and starts epoch 1's loss sum from zero. The eager
// step is the reference, given each step's rate and BatchLoader::start_epoch's order as Trainer::train_epoch
// gives them. The tests above run one epoch, so none of the three showed there (only the golden trainer runs
// of tests/parity and, for the rate, a divergence test caught them). Tanh and SGD, as in
// AppliesAWideLayersGradientBlockByBlock: over 100 seeds six steps left the loss sums within 3.2e-8 relative,
// the weights within 1.5e-7 and the momentum buffers within 4.5e-7 of the eager step's, 20x and more under the
// 1e-5 bounds below. Each fault is far above them: epoch 0's rates again moved the weights by 6e-3 to 0.1
// relative, epoch 0's order again the second loss sum by 9e-4 and the momentum buffers by 0.14 to 0.5, and an
// epoch loss sum not reset doubled it.
TEST(CpuCompiledStep, ASecondEpochTakesTheRunsRatesItsOwnOrderAndAFreshLossSum) {
  set_cpu_threads(2);
  Fixture f;
  const Case c{.activation = Activation::kTanh};
  constexpr int kEpochs = 2;
  std::vector<double> lr;  // every step of the run its own rate, falling
  for (int s = 0; s < kEpochs * kSteps; ++s) lr.push_back(0.1 * (1.0 - 0.12 * s));

  Model eager = make_model(c), compiled = make_model(c);
  auto loss = nn::make_loss(c.loss, 0.1);
  std::vector<double> eager_sums;
  for (int e = 0; e < kEpochs; ++e) {
    const std::vector<double> epoch_lr(lr.begin() + e * kSteps, lr.begin() + (e + 1) * kSteps);
    eager_sums.push_back(test::train_eager_steps(*eager.net, *eager.optimizer, *loss, *f.loader, epoch_lr, e));
  }

  auto plan = make_plan(c, *f.loader, lr);
  plan->load(*compiled.net, *compiled.optimizer);
  for (int e = 0; e < kEpochs; ++e) {
    plan->start_epoch(e);
    for (int s = 0; s < kSteps; ++s) plan->step();
    const double expected = eager_sums[static_cast<std::size_t>(e)];
    EXPECT_NEAR(plan->finish_epoch().loss_sum, expected, 1e-5 * expected) << "epoch " << e;
  }
  plan->store(*compiled.net, *compiled.optimizer);
  expect_close(compiled, eager, 1e-5, "two epochs");
}

// A spec built in code is held to the config's rules for the optimizer and the loss, and its rates to the eager
// optimizer's (finite, >= 0); each value below was once taken: rmsprop ran as Adam, beta1 = 5 and eps = -1 were
// used as given, a NaN rate trained NaN weights. (The three plans share the check, check_train_plan_spec.) Each
// error names the field; the spec they change compiles, so each is refused for its one value.
// The banner names what the products' post-ops apply, and only that: it claimed "the bias and ReLU fused" for a
// model without biases, and ReLU for softmax regression (no hidden layer).
TEST(CpuCompiledStep, DescribeNamesOnlyThePostOpsThatRun) {
  const Fixture f;
  const auto described = [&](bool bias, std::vector<std::int64_t> hidden, Activation activation) {
    Case c;
    c.bias = bias;
    c.hidden = std::move(hidden);
    c.activation = activation;
    return make_plan(c, *f.loader)->describe();
  };
  EXPECT_THAT(described(true, {24}, Activation::kReLU), ::testing::HasSubstr(" with the bias and ReLU fused,"));
  EXPECT_THAT(described(false, {24}, Activation::kReLU), ::testing::HasSubstr(") with ReLU fused,"));
  EXPECT_THAT(described(true, {}, Activation::kReLU), ::testing::HasSubstr(") with the bias fused,"));
  const std::string neither = described(false, {}, Activation::kReLU);
  EXPECT_EQ(neither.find("fused"), std::string::npos) << neither;
  EXPECT_THAT(described(true, {24}, Activation::kGELU), ::testing::HasSubstr(") with the bias fused,"));
}

TEST(CpuCompiledStep, ASpecBuiltInCodeIsRefusedNamingTheField) {
  set_cpu_threads(2);
  Fixture f;
  const TrainPlanSpec good = plan_spec(Case{.optimizer = "adam"}, *f.loader);
  const std::vector<std::pair<std::string, std::function<void(TrainPlanSpec&)>>> cases = {
      {"optim.type: 'rmsprop' is not one of: sgd, adam, adamw", [](TrainPlanSpec& s) { s.optim.type = "rmsprop"; }},
      {"optim.beta1: must be in [0, 1), got 5", [](TrainPlanSpec& s) { s.optim.beta1 = 5.0; }},
      {"optim.beta2: must be a finite number, got nan", [](TrainPlanSpec& s) { s.optim.beta2 = std::nan(""); }},
      {"optim.eps: must be > 0, got -1", [](TrainPlanSpec& s) { s.optim.eps = -1.0; }},
      {"optim.momentum: must be >= 0, got -0.5", [](TrainPlanSpec& s) { s.optim.momentum = -0.5; }},
      {"optim.weight_decay: must be >= 0, got -0.01", [](TrainPlanSpec& s) { s.optim.weight_decay = -0.01; }},
      {"optim.nesterov = true requires optim.momentum > 0", [](TrainPlanSpec& s) {
         s.optim.type = "sgd";  // (SGD's rule: Adam leaves nesterov alone)
         s.optim.momentum = 0.0;
       }},
      {"loss.type: 'hinge' is not one of: cross_entropy, mse", [](TrainPlanSpec& s) { s.loss = "hinge"; }},
      {"loss.label_smoothing: must be in [0, 1), got 1", [](TrainPlanSpec& s) { s.label_smoothing = 1.0; }},
      {"loss.label_smoothing = 0.1 applies to loss.type = \"cross_entropy\" only",
       [](TrainPlanSpec& s) { s.loss = "mse"; }},
      {"lr_per_step is empty", [](TrainPlanSpec& s) { s.lr_per_step.clear(); }},
      {"lr_per_step[1] = nan: a learning rate must be finite and >= 0",
       [](TrainPlanSpec& s) { s.lr_per_step[1] = std::nan(""); }},
      {"lr_per_step[2] = -0.01: a learning rate must be finite and >= 0",
       [](TrainPlanSpec& s) { s.lr_per_step[2] = -0.01; }},
      {"lr_per_step[0] = inf", [](TrainPlanSpec& s) { s.lr_per_step[0] = std::numeric_limits<double>::infinity(); }},
  };
  for (const auto& [expected, change] : cases) {
    TrainPlanSpec spec = good;
    change(spec);
    EXPECT_THAT(test::error_message([&] { make_cpu_train_plan(spec); }),
                ::testing::AllOf(::testing::StartsWith("TrainPlanSpec: "), ::testing::HasSubstr(expected)));
  }
  EXPECT_NO_THROW(make_cpu_train_plan(good));
}

// lr_per_step holds a rate for every step of the run, indexed by the run's step: a step past its end is refused
// naming the table, before it changes anything (it ran at the table's last rate again, so a table built for fewer
// steps than the plan ran went on at its final rate, unnoticed). A plan loaded from an optimizer that has taken the
// table's steps (a resumed run) is refused at its first step; given the run's next epoch of rates too, it trains.
TEST(CpuCompiledStep, AStepPastTheLearningRateTableIsRefused) {
  set_cpu_threads(2);
  Fixture f;
  const Case c;
  Model m = make_model(c);
  auto plan = make_plan(c, *f.loader);  // kSteps rates: one epoch
  test::train_plan_steps(*plan, *m.net, *m.optimizer, kSteps);
  const std::vector<float> trained = m.net->parameters()[0]->value.to_vector<float>();
  const std::string past_the_end = fmt::format(
      "step {} of the run has no learning rate: TrainPlanSpec.lr_per_step holds {}", kSteps + 1, kSteps);
  plan->start_epoch(1);
  EXPECT_THAT(test::error_message([&] { plan->step(); }), ::testing::HasSubstr(past_the_end));
  plan->store(*m.net, *m.optimizer);
  EXPECT_EQ(m.net->parameters()[0]->value.to_vector<float>(), trained) << "the refused step changed the weights";

  auto resumed = make_plan(c, *f.loader);
  resumed->load(*m.net, *m.optimizer);  // the optimizer's "steps" is kSteps
  resumed->start_epoch(1);
  EXPECT_THAT(test::error_message([&] { resumed->step(); }), ::testing::HasSubstr(past_the_end));
  std::vector<double> two_epochs = learning_rates(c);
  two_epochs.insert(two_epochs.end(), two_epochs.begin(), two_epochs.end());
  auto continued = make_plan(c, *f.loader, two_epochs);
  continued->load(*m.net, *m.optimizer);
  continued->start_epoch(1);
  for (int s = 0; s < kSteps; ++s) continued->step();
  continued->store(*m.net, *m.optimizer);
  EXPECT_EQ(m.optimizer->counters().at("steps"), 2 * kSteps);
}

TEST(CpuCompiledStep, EvaluatesLikeTheEagerModel) {
  set_cpu_threads(2);
  Fixture f;
  for (const std::string loss : {"cross_entropy", "mse"}) {
    const Case c{Activation::kGELU, loss, "sgd"};
    Model m = make_model(c);
    auto plan = make_plan(c, *f.loader);
    plan->load(*m.net, *m.optimizer);
    const LoaderOptions options{100, false, false, 0};  // 300 samples: three batches of 100
    BatchLoader eval_loader(f.data, f.norm, options, Device::cpu());
    const EvalResult compiled = plan->evaluate(eval_loader);
    const EvalResult eager = evaluate(*m.net, eval_loader, loss);
    EXPECT_NEAR(compiled.loss, eager.loss, 1e-5 * eager.loss) << loss;
    EXPECT_NEAR(static_cast<double>(compiled.correct), static_cast<double>(eager.correct), 1.0) << loss;  // a tie
    EXPECT_EQ(compiled.samples, kSamples);
  }
}

// A one-sample evaluation set (data.test_limit = 1): the plan's row index cache must be built for n = 1 too
// (an undefined tensor once counted as holding one element, and the evaluation then failed).
TEST(CpuCompiledStep, EvaluatesASingleSample) {
  set_cpu_threads(2);
  Fixture f;
  const Case c;
  Model m = make_model(c);
  auto plan = make_plan(c, *f.loader);
  plan->load(*m.net, *m.optimizer);
  Dataset one = f.data;
  one.images = f.data.images.slice_rows(0, 1).clone();
  one.labels = f.data.labels.slice_rows(0, 1).clone();
  BatchLoader eval_loader(one, f.norm, LoaderOptions{100, false, false, 0}, Device::cpu());
  const EvalResult compiled = plan->evaluate(eval_loader);
  const EvalResult eager = evaluate(*m.net, eval_loader, c.loss);
  EXPECT_EQ(compiled.samples, 1);
  EXPECT_NEAR(compiled.loss, eager.loss, 1e-5 * eager.loss);
  EXPECT_EQ(compiled.correct, eager.correct);
}

TEST(CpuCompiledStep, IsBitIdenticalRunToRunAtAFixedThreadCount) {
  set_cpu_threads(2);
  Fixture f;
  const Case c{Activation::kReLU, "cross_entropy", "adamw"};
  Model a = make_model(c), b = make_model(c);
  train_compiled(c, a, *f.loader);
  train_compiled(c, b, *f.loader);
  const auto pa = a.net->named_parameters(), pb = b.net->named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const Tensor& x = pa[i].second->value;
    EXPECT_EQ(std::memcmp(x.raw_data(), pb[i].second->value.raw_data(), x.nbytes()), 0) << pa[i].first;
  }
}

// A program that handles a frequent signal while the compiled step trains a model with a 784-wide layer, whose
// weight gradient goes by blocks through oneDNN 2.6's JIT GEMM (the kernel that moves rsp): the weights equal
// a quiet run's bit for bit, and nothing crashes (the audit's program aborted in 20 runs of 22 before the
// step held its signals back).
TEST(CpuCompiledStep, TrainsThroughAStormOfSignalsAsItTrainsQuietly) {
  set_cpu_threads(2);
  Generator gen(test::test_seed(), 5);
  const Dataset data = test::random_dataset("random-784", 256, 784, 10, gen);
  const BatchLoader loader(data, Normalization{1.0 / 255, -0.5}, LoaderOptions{128, true, true, 3}, Device::cpu());
  TrainPlanSpec spec;
  spec.mlp = {.inputs = 784, .hidden = {512, 512}, .outputs = 10};
  spec.optim = optim_config("sgd");
  spec.train = &loader;
  spec.loss = "cross_entropy";
  spec.precision = "fp32";
  constexpr int kEpochs = 40;
  spec.lr_per_step = std::vector<double>(kEpochs * 2, 0.01);  // 2 steps an epoch
  const auto train = [&] {
    Generator init(7, 1);
    auto net = nn::make_mlp(spec.mlp, init);
    auto optimizer = optim::make_optimizer(spec.optim, net->parameters());
    auto plan = make_cpu_train_plan(spec);
    plan->load(*net, *optimizer);
    for (int epoch = 0; epoch < kEpochs; ++epoch) {
      plan->start_epoch(epoch);
      for (int s = 0; s < 2; ++s) plan->step();
      plan->finish_epoch();
    }
    plan->store(*net, *optimizer);
    return net->parameters()[0]->value.to_vector<float>();
  };
  const std::vector<float> quiet = train();
  std::vector<float> stormy;
  {
    const test::SignalStorm storm;
    stormy = train();
    EXPECT_GT(test::SignalStorm::signals_handled(), 20) << "the signals did not arrive: the test proves nothing";
  }
  EXPECT_EQ(stormy, quiet);
}

// bf16 products (fp32 master weights and accumulation): under SGD the weights' change over three
// steps follows fp32's to a few bf16 roundings (2^-9 relative each, compounded through three
// layers and the loss gradient; bias gradients, batch sums whose terms partly cancel, come out
// worse: measured up to 8e-2 over 40 seeds): 0.2; a product left in the wrong precision or
// layout is off by ~1. Adam divides each gradient element by its own magnitude, so the small, noisy elements move
// as much as the large ones: for AdamW only the loss is compared.
TEST(CpuCompiledStep, Bf16FollowsFp32ToBf16Rounding) {
  if (!cpu::cpu_has_native_bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16/AMX (" << cpu::dnnl_cpu_isa() << ")";
  Fixture f;
  // The default layers on two threads, and 401-wide ones on one thread (bf16 keeps each layer whole:
  // oneDNN's bf16 kernels would fall back to generic ones on strided sub-blocks).
  for (const auto& [optimizer, threads, hidden] : {std::tuple<std::string, int, std::vector<std::int64_t>>{"sgd", 2, {24, 16}},
                                                   {"adamw", 2, {24, 16}}, {"sgd", 1, {401, 401}}}) {
    const CpuThreads scope(threads);
    Case c{Activation::kReLU, "cross_entropy", optimizer};
    c.hidden = hidden;
    Model start = make_model(c), fp32 = make_model(c), bf16 = make_model(c);
    const EpochTotals fp32_totals = train_compiled(c, fp32, *f.loader);
    c.precision = "bf16";
    const EpochTotals bf16_totals = train_compiled(c, bf16, *f.loader);
    EXPECT_NEAR(bf16_totals.loss_sum, fp32_totals.loss_sum, 1e-2 * fp32_totals.loss_sum) << optimizer << " " << threads;
    if (optimizer != "sgd") continue;
    const auto p0 = start.net->named_parameters(), p32 = fp32.net->named_parameters(),
               p16 = bf16.net->named_parameters();
    for (std::size_t i = 0; i < p0.size(); ++i) {
      const Tensor change32 = p32[i].second->value.clone(), change16 = p16[i].second->value.clone();
      ops::axpy(change32, p0[i].second->value, -1.0);
      ops::axpy(change16, p0[i].second->value, -1.0);
      EXPECT_LT(test::relative_error(change16, change32), 0.2) << optimizer << " " << p0[i].first;
    }
  }
}

}  // namespace
}  // namespace sprintnet::train
