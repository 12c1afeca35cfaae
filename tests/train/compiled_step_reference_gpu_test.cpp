// The compiled GPU step (train/cuda_train_plan.cpp) in fp32 against the eager CPU step, the reference, weight by
// weight: the same initial weights, data and batch order through both for three steps (the third a partial batch of
// 44 rows), for every activation, both losses, label smoothing, every optimizer form, layers without bias, three
// hidden layers, softmax regression, more classes than the skinny output layer takes, and a learning rate that
// changes every step. The two differ only in the order of their sums: cuBLASLt's fp32 products against oneDNN's, and
// the kernels' reductions against the CPU loops'. Bounds as tests/train/cpu_compiled_step_test.cpp's, which compares
// the compiled CPU step with the same reference on the same shapes: a reordered fp32 sum of K <= 128 terms is off by
// ~sqrt(K) * 6e-8 ~ 7e-7 relative, three steps compound it a few times: 1e-5 on the weights, 1e-4 on the optimizer's
// state (the gradients alone, some of them sums that largely cancel). Adam(W) runs with eps = 1e-4 for the reason
// given there. Each case whose feature changes the weights by little (a weight decay, dampening, smoothing, Adam's
// second moment) first shows that the reference without the feature is off by far more than the bound: else a step
// that ignored the feature would pass.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "sprintnet/nn/loss.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/optim/make_optimizer.h"
#include "sprintnet/train/train_plan.h"
#include "support/training_steps.h"
#include "support/gpu.h"
#include "support/test_util.h"

namespace sprintnet::train {
namespace {

constexpr std::int64_t kSamples = 300, kFeatures = 20, kBatch = 128;  // batches 128, 128, 44
constexpr int kSteps = 3;
constexpr double kWeightBound = 1e-5, kStateBound = 1e-4;
// A feature the bound must see: without it the reference moves by at least this many bounds.
constexpr double kVisible = 30;

struct Case {
  std::string name;
  Activation activation = Activation::kReLU;
  std::string loss = "cross_entropy";
  double smoothing = 0.1;
  OptimConfig optim;
  std::vector<std::int64_t> hidden = {24, 16};
  std::int64_t classes = 5;
  bool bias = true;
  // The case without its distinguishing feature, for the sensitivity check (none: the feature is not subtle).
  std::function<void(Case&)> without = {};
};

OptimConfig sgd(double momentum = 0.9) {
  OptimConfig o;
  o.lr = 0.1;
  o.momentum = momentum;
  return o;
}

OptimConfig adam(const std::string& type, double weight_decay) {
  OptimConfig o;
  o.type = type;
  o.lr = 0.01;
  o.weight_decay = weight_decay;
  o.beta2 = 0.9;  // its bias correction and second moment move the first steps visibly
  o.eps = 1e-4;    // well-conditioned: see the top
  return o;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  OptimConfig nesterov_decay = sgd();
  nesterov_decay.nesterov = true;
  nesterov_decay.weight_decay = 0.01;
  for (const Activation act : {Activation::kIdentity, Activation::kReLU, Activation::kGELU, Activation::kTanh,
                               Activation::kSigmoid, Activation::kSiLU}) {
    for (const std::string loss : {"cross_entropy", "mse"}) {
      all.push_back({.name = fmt::format("{} {} nesterov+decay", ops::activation_name(act), loss), .activation = act,
                     .loss = loss, .smoothing = loss == "mse" ? 0.0 : 0.1, .optim = nesterov_decay});
    }
  }
  all.back().without = [](Case& c) { c.optim.weight_decay = 0.0; };
  all.push_back({.name = "label smoothing 0.2", .smoothing = 0.2, .optim = sgd(), .without = [](Case& c) {
                   c.smoothing = 0.0;
                 }});
  all.push_back({.name = "sgd without momentum", .optim = sgd(0.0)});
  all.push_back({.name = "sgd momentum", .optim = sgd()});
  OptimConfig dampened = sgd();
  dampened.dampening = 0.5;
  all.push_back({.name = "sgd dampening", .optim = dampened, .without = [](Case& c) { c.optim.dampening = 0.0; }});
  all.push_back({.name = "adam", .optim = adam("adam", 0.0), .without = [](Case& c) { c.optim.beta2 = 0.999; }});
  all.push_back({.name = "adam L2 decay", .optim = adam("adam", 0.05), .without = [](Case& c) {
                   c.optim.weight_decay = 0.0;
                 }});
  all.push_back({.name = "adamw", .optim = adam("adamw", 0.5), .without = [](Case& c) {
                   c.optim.weight_decay = 0.0;
                 }});
  all.push_back({.name = "relu without bias", .optim = nesterov_decay, .bias = false});
  all.push_back({.name = "tanh without bias", .activation = Activation::kTanh, .optim = sgd(), .bias = false});
  all.push_back({.name = "three hidden layers", .optim = sgd(), .hidden = {24, 16, 12}});
  all.push_back({.name = "softmax regression", .optim = sgd(), .hidden = {}});
  all.push_back({.name = "40 classes (no skinny output layer)", .optim = sgd(), .classes = 40});
  all.push_back({.name = "40 classes, adamw, mse", .loss = "mse", .smoothing = 0.0, .optim = adam("adamw", 0.5),
                 .classes = 40});
  return all;
}

nn::MlpSpec mlp_spec(const Case& c) {
  nn::MlpSpec spec;
  spec.inputs = kFeatures;
  spec.hidden = c.hidden;
  spec.outputs = c.classes;
  spec.activation = c.activation;
  spec.bias = c.bias;
  return spec;
}

std::vector<double> learning_rates(const Case& c) {
  std::vector<double> lr;
  for (int s = 0; s < kSteps; ++s) lr.push_back(c.optim.lr * (1.0 - 0.2 * s));  // a schedule: every step its own
  return lr;
}

// One model and its optimizer on `device`, from the same seed every time.
struct Model {
  std::unique_ptr<nn::Sequential> net;
  std::unique_ptr<optim::Optimizer> optimizer;
  Model(const Case& c, Device device) {
    Generator gen(7, 1);
    net = nn::make_mlp(mlp_spec(c), gen, device);
    optimizer = optim::make_optimizer(c.optim, net->parameters());
  }
};

struct Data {
  Dataset cpu, gpu;
  Normalization norm{1.0 / 255, -0.5};
  explicit Data(std::int64_t classes) {
    Generator gen(test::test_seed(), 3);
    cpu = test::random_dataset("random", kSamples, kFeatures, classes, gen);
    gpu = cpu;
    gpu.images = cpu.images.to(Device::cuda(0));
    gpu.labels = cpu.labels.to(Device::cuda(0));
  }
  LoaderOptions options() const { return {kBatch, true, false, 99}; }  // shuffled, the partial batch kept
};

// Three eager CPU steps; returns the sum of the steps' mean losses.
double train_eager(const Case& c, Model& m, const Data& data) {
  BatchLoader loader(data.cpu, data.norm, data.options(), Device::cpu());
  auto loss = nn::make_loss(c.loss, c.smoothing);
  return test::train_eager_steps(*m.net, *m.optimizer, *loss, loader, learning_rates(c));
}

// Three compiled GPU steps in fp32, stored back into `m`; returns the epoch's totals.
EpochTotals train_compiled(const Case& c, Model& m, const Data& data) {
  BatchLoader loader(data.gpu, data.norm, data.options(), Device::cuda(0));
  TrainPlanSpec spec;
  spec.mlp = mlp_spec(c);
  spec.optim = c.optim;
  spec.loss = c.loss;
  spec.label_smoothing = c.smoothing;
  spec.precision = "fp32";
  spec.train = &loader;
  spec.lr_per_step = learning_rates(c);
  auto plan = make_cuda_train_plan(spec, Device::cuda(0));
  return test::train_plan_steps(*plan, *m.net, *m.optimizer, kSteps);
}

// The largest relative error over the weights, and over the optimizer's state.
struct Errors {
  double weights = 0.0, state = 0.0;
};

Errors errors(Model& a, Model& b, const std::string& what) {
  Errors e;
  const auto pa = a.net->named_parameters(), pb = b.net->named_parameters();
  EXPECT_EQ(pa.size(), pb.size()) << what;
  for (std::size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    e.weights = std::max(e.weights, test::relative_error(pa[i].second->value, pb[i].second->value));
  }
  const auto sa = a.optimizer->state(), sb = b.optimizer->state();
  EXPECT_EQ(sa.size(), sb.size()) << what;
  for (std::size_t i = 0; i < std::min(sa.size(), sb.size()); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first) << what;
    e.state = std::max(e.state, test::relative_error(sa[i].second, sb[i].second));
  }
  EXPECT_EQ(a.optimizer->counters(), b.optimizer->counters()) << what;
  return e;
}

TEST(CompiledStepReference, Fp32FollowsTheEagerCpuStepWeightByWeight) {
  SN_REQUIRE_GPU();
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Data data(c.classes);
    Model eager(c, Device::cpu()), compiled(c, Device::cuda(0));
    const double eager_loss = train_eager(c, eager, data);
    if (c.without) {  // the bound sees the feature: the reference without it is far off
      Case plain = c;
      c.without(plain);
      Model without(plain, Device::cpu());
      train_eager(plain, without, data);
      const Errors feature = errors(without, eager, c.name);
      EXPECT_GT(feature.weights, kVisible * kWeightBound) << "the bound cannot see the feature";
      std::printf("%-40s without its feature: weights off by %.2e\n", c.name.c_str(), feature.weights);
    }
    const EpochTotals totals = train_compiled(c, compiled, data);
    EXPECT_NEAR(totals.loss_sum, eager_loss, 1e-5 * eager_loss);
    const Errors e = errors(compiled, eager, c.name);
    std::printf("%-40s weights %.2e, state %.2e\n", c.name.c_str(), e.weights, e.state);
    EXPECT_LT(e.weights, kWeightBound);
    EXPECT_LT(e.state, kStateBound);
  }
}

}  // namespace
}  // namespace sprintnet::train
