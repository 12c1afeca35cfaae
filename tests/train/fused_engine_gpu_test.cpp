// The fused engine (one kernel per epoch, docs/FUSED.md) against the references:
// its first steps against the CPU's eager fp32 run (device.engine = "eager") for every kernel and every
// feature, precision and shape it takes (a check without a GPU keeps that list complete); ten epochs
// against the compiled step; reruns bit for bit.
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

#include "sprintnet/ops/cuda/fused/regression_epoch.h"
#include "sprintnet/ops/cuda/stream_scope.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/train/fused_fit.h"
#include "sprintnet/train/model_io.h"
#include "sprintnet/train/trainer.h"
#include "support/error_message.h"
#include "support/gpu.h"
#include "support/scoped_env.h"
#include "support/test_util.h"

namespace sprintnet::train {
namespace {

Config config_for(const std::string& device, const std::string& engine, const std::string& precision,
                  const std::string& name, const std::vector<std::string>& extra) {
  std::vector<std::string> overrides = {
      fmt::format("data.dir=\"{}\"", test::data_dir().string()),
      fmt::format("device.name=\"{}\"", device),
      fmt::format("device.engine=\"{}\"", engine),
      fmt::format("device.precision=\"{}\"", precision),
      fmt::format("output.dir=\"{}\"", test::temp_dir("fused-engine").string()),
      fmt::format("output.name=\"{}\"", name),
      "output.progress=\"none\"",
      "checkpoint.every_epochs=0",
  };
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return config_from_overrides(overrides);
}

std::vector<std::vector<float>> weights_of(Trainer& trainer) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, tensor] : model_weights(trainer.model())) {
    out.push_back(tensor.to(Device::cpu()).to(DType::kF32).to_vector<float>());
  }
  return out;
}

double norm(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - (b.empty() ? 0.0 : static_cast<double>(b[i]));
    sum += d * d;
  }
  return std::sqrt(sum);
}

// The FusedFirstSteps cases train one fixed draw (seed 0: the initial weights and the order of MNIST's first 512
// images), not test_seed()'s fresh one, because their bounds and guards hold for that draw, not for every draw. The
// guard is computed at run time, so a random draw would be checked again on each run, but it fails too often for the
// test's setup rather than the kernel: at seeds 1-20 the guards (computed on the CPU alone: a build machine's, whose
// seed-0 margins match the H200's) fell below their bar on 3 draws of 20 (AdamW's decay on the regression kernel 0.94x
// at seed 13, SGD's decay there 0.97x at 14, AdamW on the split kernel 0.99x at 1), against 1.09x at seed 0. The bounds
// were measured at seed 0 alone (largest: 0.072 of 0.10, a batch of 32 on the split kernel; 0.16 of 0.25, Adam on the
// cluster kernel; H200, 2026-11-29), and Adam's error depends on the draw too (on how many gradients lie within bf16's
// noise of zero). Fresh data reaches the kernels' parts at op level (ops_gpu_test, gpu_step_kernels_test), and the
// engine through the ten-epoch tests' three seeds.
constexpr int kFirstStepsSeed = 0;

// The cases' models: 784-64-48-10 (whose 48-wide layer and 10 classes exercise the padding of every tile) unless
// they ask for another; the rows kernel's three hidden layers of padded widths, the quads kernel's two, the split
// kernel's two shapes, and none (the regression kernel's).
constexpr const char* kModel = "model.hidden=[64, 48]";
constexpr const char* kRowsModel = "model.hidden=[120, 100, 64]";
constexpr const char* kQuadsModel = "model.hidden=[200, 176]";
constexpr const char* kSplitModel = "model.hidden=[784, 784, 784]";
constexpr const char* kNarrowSplitModel = "model.hidden=[256, 256, 256]";
constexpr const char* kNoHiddenModel = "model.hidden=[]";
// The most layers the fused engine takes (kFusedMaxLayersSupported: 7 hidden), narrowing, with widths that leave
// tiles part empty (56, 40, 24, 16); at most 64 wide, so that the cluster kernel's eight activation buffers, each
// as wide as the widest layer, fit a block. tanh keeps every layer's pre-activation on the grid kernel. Kaiming's
// init carries the signal through the seven layers. PyTorch's (weights of variance 1 / (3 fan-in)) shrinks it
// about 1.7x a layer, so after the four steps the model is still at chance (8.3 % test accuracy), where the
// accuracy check would compare near-equal logits; with Kaiming's it reaches 48.5 %.
std::vector<std::string> deepest_model() {
  return {"model.hidden=[64, 56, 48, 40, 32, 24, 16]", "model.activation=\"tanh\"", "model.init=\"kaiming_uniform\""};
}

// A case's run: four steps of 128 samples (or 3 and a partial one) on kModel, then `overrides`.
std::vector<std::string> first_steps_overrides(const std::vector<std::string>& overrides) {
  std::vector<std::string> run = {fmt::format("seed={}", kFirstStepsSeed),
                                  "data.train_limit=512",
                                  "data.test_limit=1000",
                                  "train.epochs=1",
                                  "train.batch_size=128",
                                  kModel,
                                  "optim.lr=0.1"};
  run.insert(run.end(), overrides.begin(), overrides.end());
  return run;
}

Config first_steps_config(const std::vector<std::string>& overrides) {
  return config_from_overrides(first_steps_overrides(overrides));
}

struct FirstSteps {
  std::string name;
  std::vector<std::string> overrides;
  std::string precision = "bf16";
  // Tolerance on |W_gpu - W_cpu| / |W_cpu - W_0| per tensor, i.e. on the update the steps applied.
  // bf16 rounds every input, activation and gradient to 8 significant bits (2^-9 relative): through
  // three products and their gradients the applied SGD update differs by 1-7 % (measured on an H100:
  // largest 6.6 %, a bias with Nesterov and weight decay, whose gradient sums 128 rounded rows), while
  // a wrong operand, a missing bias gradient or a wrong derivative is off by 30-200 %. Adam normalises
  // each element (its first update is lr * sign(g)), so elements whose gradient is within bf16 noise
  // of zero can flip sign: looser there.
  // fp16 (only the grid kernel computes in it) is held to the same bounds, as upper bounds. Its operands round
  // to 11 significant bits (8x finer), its weight gradients are fp32, and its loss scale (2^16) is a power of
  // two, so scaling and unscaling are exact. Nothing overflows at these magnitudes: dlogits are at most
  // 2^16 / 116 = 565 (the partial batch's 116 rows) and the hidden layers' gradients far below fp16's 65504, so
  // no step is skipped. Its error
  // is therefore bf16's or less (H200: 0.020 against bf16's 0.035 for ReLU and SGD; 0.011 for GELU and Adam).
  // It is not 8x less because ReLU's kinks, which a rounding flips, make most of bf16's error (its smooth
  // activations err by 0.002-0.003), and they shrink more slowly than the rounding. The failures fp16 adds are
  // large: a step skipped for a false overflow leaves out roughly 11-38 % of the update (momentum 0.9 weighs the
  // four steps' gradients 3.4 : 2.7 : 1.9 : 1), and a scale not removed multiplies the update by 2^16. A feature
  // dropped by fp16's own update stage (it updates after the overflow check, not inside the gradient product
  // as bf16 does) is caught by the guards.
  double tolerance = 0.10;
  // Guards, each the overrides that turn off one of the case's features that moves the weights by little (a
  // weight decay, dampening, label smoothing): the CPU reference without the feature must differ from the one
  // with it by more than twice the tolerance in every tensor, or a kernel that ignored the feature would pass.
  // Set from the feature table by with_guards().
  std::vector<std::vector<std::string>> without = {};
  // Cases named "..._cluster" ask for the cluster kernel (SPRINTNET_FUSED_KERNEL, docs/FUSED.md v4),
  // "..._split" for the split kernel (v7, on its 784-784-784-784-10 or 784-256-256-256-10 and
  // shallower), "..._regression" for the regression kernel (v8, models without a hidden layer),
  // "..._rows" and "..._quads" for theirs (v13, v18), the others (and "..._grid", for a name that would
  // otherwise end like another kernel's) for the grid kernel (the other kernels are the default where they run).
  std::string kernel() const {
    return name.ends_with("_grid")         ? "grid"
           : name.ends_with("_cluster")    ? "cluster"
           : name.ends_with("_rows")       ? "rows"
           : name.ends_with("_quads")      ? "quads"
           : name.ends_with("_split")      ? "split"
           : name.ends_with("_regression") ? "regression"
                                           : "grid";
  }
};

// 784-128-128-128-10, the rows kernel's model.
nn::MlpSpec rows_model() {
  nn::MlpSpec spec;
  spec.inputs = 784;
  spec.hidden = {128, 128, 128};
  spec.outputs = 10;
  return spec;
}

// 784-256-256-10 (the default model), the quads kernel's.
nn::MlpSpec quads_model() {
  nn::MlpSpec spec;
  spec.inputs = 784;
  spec.hidden = {256, 256};
  spec.outputs = 10;
  return spec;
}

// Sets SPRINTNET_FUSED_KERNEL for the scope (the plan reads it when built); "" leaves auto's choice.
class KernelChoice : public test::ScopedEnv {
 public:
  explicit KernelChoice(const std::string& kernel) : ScopedEnv("SPRINTNET_FUSED_KERNEL", kernel) {}
};

class FusedFirstSteps : public ::testing::TestWithParam<FirstSteps> {};

// first_steps_overrides()' run on the case's kernel; the "_cluster" cases' 48-wide layer leaves blocks
// without columns.
TEST_P(FusedFirstSteps, MatchTheCpuFp32ReferencePerTensor) {
  SN_REQUIRE_GPU();
  const FirstSteps& p = GetParam();
  if (p.kernel() == "split" && !gpu_runs_split_kernel(0, 784, 3)) GTEST_SKIP() << "this GPU or build does not run the split kernel";
  if (p.kernel() == "rows" && !gpu_runs_rows_kernel(0, rows_model())) GTEST_SKIP() << "this GPU or build does not run the rows kernel";
  if (p.kernel() == "quads" && !gpu_runs_quads_kernel(0, quads_model())) {
    GTEST_SKIP() << "this GPU or build does not run the quads kernel";
  }
  if (p.kernel() == "regression" && !gpu_runs_regression_kernel(0)) {
    GTEST_SKIP() << "this GPU or build does not run the regression kernel";
  }
  const std::vector<std::string> extra = first_steps_overrides(p.overrides);
  Trainer initial(config_for("cpu", "eager", "fp32", p.name + "-init", extra));
  const auto w0 = weights_of(initial);
  Trainer cpu(config_for("cpu", "eager", "fp32", p.name + "-cpu", extra));
  const TrainSummary cpu_run = cpu.fit();
  const auto wc = weights_of(cpu);
  for (std::size_t g = 0; g < p.without.size(); ++g) {
    std::vector<std::string> off = extra;
    off.insert(off.end(), p.without[g].begin(), p.without[g].end());
    Trainer cpu_off(config_for("cpu", "eager", "fp32", fmt::format("{}-without-{}", p.name, g), off));
    cpu_off.fit();
    const auto w_off = weights_of(cpu_off);
    const std::string feature_off = fmt::format("{}", fmt::join(p.without[g], ", "));
    for (std::size_t t = 0; t < wc.size(); ++t) {
      const double seen = norm(w_off[t], wc[t]) / norm(wc[t], w0[t]);
      std::printf("%s tensor %zu: without the feature (%s) |cpu_off - cpu| / |update| = %.4f\n", p.name.c_str(), t,
                  feature_off.c_str(), seen);
      EXPECT_GT(seen, 2 * p.tolerance)
          << p.name << ": tensor " << t << ": with " << feature_off << " the CPU reference moves by only " << seen
          << " of the update, within twice the tolerance: the test's setup (its draw and the feature's value), not "
             "the kernel, can no longer tell the feature from rounding";
    }
  }
  const KernelChoice kernel(p.kernel());
  Trainer gpu(config_for("cuda", "fused", p.precision, p.name + "-gpu", extra));
  ASSERT_NE(gpu.plan(), nullptr);
  std::printf("%s: %s\n", p.name.c_str(), gpu.describe().c_str());
  const TrainSummary gpu_run = gpu.fit();
  const auto wg = weights_of(gpu);
  ASSERT_EQ(wc.size(), wg.size());
  for (std::size_t t = 0; t < wc.size(); ++t) {
    const double update = norm(wc[t], w0[t]);
    const double error = norm(wg[t], wc[t]);
    ASSERT_GT(update, 0.0) << "tensor " << t << " did not train";
    std::printf("%s tensor %zu: |gpu - cpu| / |update| = %.4f\n", p.name.c_str(), t, error / update);
    EXPECT_LT(error / update, p.tolerance) << p.name << ": tensor " << t << " differs by " << error / update
                                           << " of its update";
    for (float v : wg[t]) ASSERT_TRUE(std::isfinite(v));
  }
  // Losses: the mean of the steps' losses (2^-9 relative per logit, summed over 4 steps).
  EXPECT_NEAR(gpu_run.epochs[0].train_loss, cpu_run.epochs[0].train_loss, 0.01 * cpu_run.epochs[0].train_loss);
  EXPECT_NEAR(gpu_run.final_test.loss, cpu_run.final_test.loss, 0.01 * cpu_run.final_test.loss);
  // After 4 steps the model sits on the steep part of its curve (30-50 % accuracy), where 1000 test
  // samples move by a point for a 1 % change in the loss.
  EXPECT_NEAR(gpu_run.final_test.accuracy, cpu_run.final_test.accuracy, 0.02);
}

// A feature the fused kernels implement, as the cases turn it on: `on`, its overrides (its case on the grid
// kernel, named `name`); `in`, whether a config has it (how the coverage check finds it among the cases);
// `off`, where it moves the weights by little, the guard's overrides that turn it off.
struct Feature {
  std::string name;
  std::vector<std::string> on;
  std::function<bool(const Config&)> in;
  std::vector<std::string> off = {};
  double tolerance = 0.10;     // FirstSteps::tolerance
  bool needs_hidden = false;   // an activation: a model without hidden layers has none
};

bool sgd(const Config& c) { return c.optim.type == "sgd"; }

// Every activation, no bias, both losses, label smoothing, every optimizer form, a schedule, a partial last batch.
// The subtle features' values are large enough for their guards to hold in every tensor (H200, 2026-11-29: the smallest
// tensor's change without the feature, against the 2 x tolerance the guard asks): label smoothing 0.4 (0.44 of the
// update, against 0.2), SGD's weight decay 0.3 beside Nesterov (at 0.05 an output bias moved 0.05-0.08: decay left out
// of one layer would have passed), dampening 0.6 (0.16 at 0.3), AdamW's decoupled decay 25 at lr 1e-3 (2.5 % of each
// weight a step; at 8 the first layer moved 0.22 of its update against Adam's 0.5, and at the old 0.1 only 1-2 %).
std::vector<Feature> features() {
  std::vector<Feature> table;
  for (const std::string act : {"identity", "relu", "gelu", "tanh", "sigmoid", "silu"}) {
    table.push_back({act, {fmt::format("model.activation=\"{}\"", act)},
                     [act](const Config& c) { return c.model.activation == act; }, {}, 0.10, true});
  }
  table.push_back({"no_bias", {"model.bias=false"}, [](const Config& c) { return !c.model.bias; }});
  table.push_back({"label_smoothing", {"loss.label_smoothing=0.4"},
                   [](const Config& c) { return c.loss.type == "cross_entropy" && c.loss.label_smoothing > 0; },
                   {"loss.label_smoothing=0"}});
  table.push_back({"mse", {"loss.type=\"mse\"", "model.activation=\"tanh\""},
                   [](const Config& c) { return c.loss.type == "mse"; }});
  table.push_back({"sgd_nesterov_decay", {"optim.nesterov=true", "optim.weight_decay=0.3", "optim.momentum=0.8"},
                   [](const Config& c) { return sgd(c) && c.optim.nesterov && c.optim.weight_decay > 0; },
                   {"optim.weight_decay=0"}});
  table.push_back({"sgd_dampening", {"optim.dampening=0.6"},
                   [](const Config& c) { return sgd(c) && c.optim.momentum > 0 && c.optim.dampening > 0; },
                   {"optim.dampening=0"}});
  table.push_back({"sgd_plain", {"optim.momentum=0"}, [](const Config& c) { return sgd(c) && c.optim.momentum == 0; }});
  table.push_back({"adam", {"optim.type=\"adam\"", "optim.lr=0.001", "optim.weight_decay=0.01"},
                   [](const Config& c) { return c.optim.type == "adam"; }, {}, 0.25});
  table.push_back({"adamw", {"optim.type=\"adamw\"", "optim.lr=0.001", "optim.weight_decay=25"},
                   [](const Config& c) { return c.optim.type == "adamw" && c.optim.weight_decay > 0; },
                   {"optim.weight_decay=0"}, 0.25});
  table.push_back({"warmup_cosine", {"schedule.type=\"cosine\"", "schedule.warmup_steps=2"},
                   [](const Config& c) { return c.schedule.type != "constant" || c.schedule.warmup_steps > 0; }});
  table.push_back({"partial_batch", {"data.train_limit=500", "train.drop_last=false"},
                   [](const Config& c) { return !c.train.drop_last && c.data.train_limit % c.train.batch_size != 0; }});
  return table;
}

std::vector<FirstSteps> first_steps_cases() {
  std::vector<FirstSteps> cases;
  // The grid kernel, the only one that also computes in fp16: every feature in both precisions (fp16 held to
  // bf16's bounds, FirstSteps::tolerance), no hidden layer, and the most layers and classes the fused engine takes
  // (kFusedMaxLayersSupported, kFusedMaxClassesSupported: 54 of the 64 classes never a label, the loss's widest
  // logit tile).
  for (const std::string precision : {"bf16", "fp16"}) {
    const std::string prefix = precision == "bf16" ? "" : precision + "_";
    for (const Feature& f : features()) cases.push_back({prefix + f.name, f.on, precision, f.tolerance});
    cases.push_back({prefix + "softmax_regression_grid", {kNoHiddenModel}, precision});
    cases.push_back({prefix + "seven_hidden_grid", deepest_model(), precision});
    cases.push_back({prefix + "sixty_four_classes_grid", {"model.classes=64"}, precision});
  }
  // The rows kernel (FUSED.md v13): every activation it takes, both losses, every optimizer form, a
  // schedule, a partial batch, one to three hidden layers with padded widths (120, 100, 64: a tile row
  // and column half empty; 64 wide first: its second half of neurons empty).
  const std::string rows3 = kRowsModel;
  for (const std::string act : {"identity", "relu", "tanh", "sigmoid"}) {
    cases.push_back({act + "_rows", {rows3, fmt::format("model.activation=\"{}\"", act)}});
  }
  cases.push_back({"no_bias_rows", {rows3, "model.bias=false"}});
  cases.push_back({"label_smoothing_rows", {rows3, "loss.label_smoothing=0.4"}});
  cases.push_back({"mse_rows", {rows3, "loss.type=\"mse\"", "model.activation=\"tanh\""}});
  cases.push_back({"sgd_nesterov_decay_rows",
                   {rows3, "optim.nesterov=true", "optim.weight_decay=0.3", "optim.momentum=0.8"}});
  cases.push_back({"sgd_plain_rows", {rows3, "optim.momentum=0"}});
  cases.push_back({"sgd_dampening_rows", {rows3, "optim.dampening=0.6"}});
  cases.push_back({"sixteen_classes_rows", {rows3, "model.classes=16"}});
  cases.push_back(
      {"adam_rows", {rows3, "optim.type=\"adam\"", "optim.lr=0.001", "optim.weight_decay=0.01"}, "bf16", 0.25});
  cases.push_back(
      {"adamw_rows", {rows3, "optim.type=\"adamw\"", "optim.lr=0.001", "optim.weight_decay=25"}, "bf16", 0.25});
  cases.push_back({"warmup_cosine_rows", {rows3, "schedule.type=\"cosine\"", "schedule.warmup_steps=2"}});
  cases.push_back({"partial_batch_rows", {rows3, "data.train_limit=500", "train.drop_last=false"}});
  cases.push_back({"one_hidden_rows", {"model.hidden=[128]"}});
  cases.push_back({"narrow_rows", {}});  // 784-64-48-10
  cases.push_back({"full_width_rows", {"model.hidden=[128, 128, 128]"}});
  // The quads kernel (FUSED.md v18): every activation it takes, both losses, SGD's forms, a schedule, a
  // partial batch, padded widths (200, 176: quarter 3 of each layer part empty, a tile half empty; 64, 48:
  // three quarters of each layer empty) and the full default model.
  const std::string quads2 = kQuadsModel;
  for (const std::string act : {"identity", "relu", "tanh", "sigmoid"}) {
    cases.push_back({act + "_quads", {quads2, fmt::format("model.activation=\"{}\"", act)}});
  }
  cases.push_back({"no_bias_quads", {quads2, "model.bias=false"}});
  cases.push_back({"label_smoothing_quads", {quads2, "loss.label_smoothing=0.4"}});
  cases.push_back({"mse_quads", {quads2, "loss.type=\"mse\"", "model.activation=\"tanh\""}});
  cases.push_back({"sgd_nesterov_decay_quads",
                   {quads2, "optim.nesterov=true", "optim.weight_decay=0.3", "optim.momentum=0.8"}});
  cases.push_back({"sgd_dampening_quads", {quads2, "optim.dampening=0.6"}});
  cases.push_back({"sgd_plain_quads", {quads2, "optim.momentum=0"}});
  cases.push_back({"sixteen_classes_quads", {quads2, "model.classes=16"}});
  cases.push_back({"warmup_cosine_quads", {quads2, "schedule.type=\"cosine\"", "schedule.warmup_steps=2"}});
  cases.push_back({"partial_batch_quads", {quads2, "data.train_limit=500", "train.drop_last=false"}});
  cases.push_back({"narrow_quads", {}});  // 784-64-48-10
  cases.push_back({"default_model_quads", {"model.hidden=[256, 256]"}});
  // The cluster kernel: every activation it takes, both losses, every optimizer, a partial batch,
  // a deep narrow model (its gradients alternate between two exchange buffers four times) and
  // both logit widths.
  for (const std::string act : {"identity", "relu", "tanh", "sigmoid"}) {
    cases.push_back({act + "_cluster", {fmt::format("model.activation=\"{}\"", act)}});
  }
  cases.push_back({"no_bias_cluster", {"model.bias=false"}});
  cases.push_back({"label_smoothing_cluster", {"loss.label_smoothing=0.4"}});
  cases.push_back({"mse_cluster", {"loss.type=\"mse\"", "model.activation=\"tanh\""}});
  cases.push_back({"sgd_nesterov_decay_cluster",
                   {"optim.nesterov=true", "optim.weight_decay=0.3", "optim.momentum=0.8"}});
  cases.push_back({"sgd_plain_cluster", {"optim.momentum=0"}});
  cases.push_back({"sgd_dampening_cluster", {"optim.dampening=0.6"}});
  cases.push_back({"warmup_cosine_cluster", {"schedule.type=\"cosine\"", "schedule.warmup_steps=2"}});
  cases.push_back(
      {"adam_cluster", {"optim.type=\"adam\"", "optim.lr=0.001", "optim.weight_decay=0.01"}, "bf16", 0.25});
  cases.push_back(
      {"adamw_cluster", {"optim.type=\"adamw\"", "optim.lr=0.001", "optim.weight_decay=25"}, "bf16", 0.25});
  cases.push_back({"partial_batch_cluster", {"data.train_limit=500", "train.drop_last=false"}});
  cases.push_back({"one_hidden_cluster", {"model.hidden=[100]"}});
  cases.push_back({"softmax_regression_cluster", {"model.hidden=[]"}});
  cases.push_back({"softmax_regression_mse_cluster", {"model.hidden=[]", "loss.type=\"mse\"", "optim.lr=0.01"}});
  cases.push_back({"deep_narrow_cluster", {"model.hidden=[96, 64, 40, 24, 16]"}});
  // More than 16 classes take the kernel's 8-tile logits (30 outputs, 20 of them never a label).
  cases.push_back({"many_classes_cluster", {"model.classes=30"}});
  // Its most layers and classes (kClusterMaxLayers, kClusterMaxClasses), as on the grid kernel.
  cases.push_back({"seven_hidden_cluster", deepest_model()});
  cases.push_back({"sixty_four_classes_cluster", {"model.classes=64"}});
  // A first layer 113-128 wide (at most 16 classes) splits 2 x 8 over the blocks and its weight gradient
  // 4 x 2 over the warps (FUSED.md v10g, v11a): with padding rows (120), with SGD's general form, MSE and
  // tanh, a partial batch, Adam, and one hidden layer (the partials through L2).
  cases.push_back({"wide_first_cluster", {"model.hidden=[120, 64]"}});
  cases.push_back({"wide_first_nesterov_mse_cluster",
                   {"model.hidden=[128, 48]", "loss.type=\"mse\"", "model.activation=\"tanh\"", "optim.nesterov=true",
                    "optim.weight_decay=0.3", "optim.momentum=0.8"}});
  cases.push_back(
      {"wide_first_partial_batch_cluster", {"model.hidden=[128, 64]", "data.train_limit=500", "train.drop_last=false"}});
  cases.push_back({"wide_first_adam_cluster",
                   {"model.hidden=[128, 64]", "optim.type=\"adam\"", "optim.lr=0.001", "optim.weight_decay=0.01"},
                   "bf16", 0.25});
  cases.push_back({"wide_first_one_hidden_cluster", {"model.hidden=[128]"}});
  // The split kernel's 784-wide shape, with everything else it takes: every activation, both losses,
  // SGD's variants, no bias, a partial last batch.
  const std::string wide = kSplitModel;
  for (const std::string act : {"identity", "relu", "gelu", "tanh", "sigmoid", "silu"}) {
    cases.push_back({act + "_split", {wide, fmt::format("model.activation=\"{}\"", act)}});
  }
  cases.push_back({"no_bias_split", {wide, "model.bias=false"}});
  cases.push_back({"label_smoothing_split", {wide, "loss.label_smoothing=0.4"}});
  cases.push_back({"mse_split", {wide, "loss.type=\"mse\"", "model.activation=\"tanh\""}});
  cases.push_back(
      {"sgd_nesterov_decay_split", {wide, "optim.nesterov=true", "optim.weight_decay=0.3", "optim.momentum=0.8"}});
  cases.push_back({"sgd_dampening_split", {wide, "optim.dampening=0.6"}});
  cases.push_back({"sgd_plain_split", {wide, "optim.momentum=0"}});
  cases.push_back({"warmup_cosine_split", {wide, "schedule.type=\"cosine\"", "schedule.warmup_steps=2"}});
  cases.push_back({"partial_batch_split", {wide, "data.train_limit=500", "train.drop_last=false"}});
  cases.push_back({"one_hidden_split", {"model.hidden=[784]"}});
  cases.push_back({"two_hidden_gelu_split", {"model.hidden=[784, 784]", "model.activation=\"gelu\""}});
  // 4 steps of 32 rows, 96 masked (16 steps at lr 0.1 move 9-14 % from the CPU's run: bf16's noise
  // compounds with the steps, as any engine's would; H100).
  cases.push_back({"batch32_split", {wide, "train.batch_size=32", "data.train_limit=128"}});
  cases.push_back({"adam_split", {wide, "optim.type=\"adam\"", "optim.lr=0.001", "optim.weight_decay=0.01"}, "bf16", 0.25});
  cases.push_back({"adamw_gelu_split", {wide, "optim.type=\"adamw\"", "optim.lr=0.001", "optim.weight_decay=25",
                                        "model.activation=\"gelu\""}, "bf16", 0.25});
  // Its 256-wide shape (32 blocks in clusters of 4), whose first layer splits its 784 inputs
  // unevenly over the ranks (12 or 13 k-tiles) and the clusters (12 or 13 groups of 8).
  const std::string narrow = kNarrowSplitModel;
  for (const std::string act : {"identity", "relu", "gelu", "tanh", "sigmoid", "silu"}) {
    cases.push_back({"narrow_" + act + "_split", {narrow, fmt::format("model.activation=\"{}\"", act)}});
  }
  cases.push_back({"narrow_no_bias_split", {narrow, "model.bias=false"}});
  cases.push_back({"narrow_mse_split", {narrow, "loss.type=\"mse\"", "model.activation=\"tanh\""}});
  cases.push_back({"narrow_label_smoothing_split", {narrow, "loss.label_smoothing=0.4"}});
  cases.push_back({"narrow_sgd_nesterov_decay_split",
                   {narrow, "optim.nesterov=true", "optim.weight_decay=0.3", "optim.momentum=0.8"}});
  cases.push_back({"narrow_sgd_plain_split", {narrow, "optim.momentum=0"}});
  cases.push_back({"narrow_sgd_dampening_split", {narrow, "optim.dampening=0.6"}});
  cases.push_back({"narrow_warmup_cosine_split", {narrow, "schedule.type=\"cosine\"", "schedule.warmup_steps=2"}});
  cases.push_back({"narrow_partial_batch_split", {narrow, "data.train_limit=500", "train.drop_last=false"}});
  cases.push_back({"narrow_one_hidden_split", {"model.hidden=[256]"}});
  cases.push_back({"narrow_default_model_split", {"model.hidden=[256, 256]"}});
  cases.push_back({"narrow_batch32_split", {narrow, "train.batch_size=32", "data.train_limit=128"}});
  cases.push_back({"narrow_adam_split", {narrow, "optim.type=\"adam\"", "optim.lr=0.001", "optim.weight_decay=0.01"},
                   "bf16", 0.25});
  cases.push_back({"narrow_adamw_gelu_split", {narrow, "optim.type=\"adamw\"", "optim.lr=0.001",
                                               "optim.weight_decay=25", "model.activation=\"gelu\""}, "bf16", 0.25});
  // The regression kernel (models without a hidden layer): both losses, label smoothing, SGD's
  // variants, Adam, AdamW, a schedule, no bias, a partial last batch, a batch of 32 (96 rows masked),
  // 16 classes (its whole logit tile; 784-16 with the labels 0-9).
  const std::string none = kNoHiddenModel;
  cases.push_back({"softmax_regression_regression", {none}});
  cases.push_back({"mse_regression", {none, "loss.type=\"mse\"", "optim.lr=0.01"}});
  cases.push_back({"label_smoothing_regression", {none, "loss.label_smoothing=0.4"}});
  cases.push_back({"no_bias_regression", {none, "model.bias=false"}});
  cases.push_back(
      {"sgd_nesterov_decay_regression", {none, "optim.nesterov=true", "optim.weight_decay=0.3", "optim.momentum=0.8"}});
  cases.push_back({"sgd_dampening_regression", {none, "optim.dampening=0.6"}});
  cases.push_back({"sgd_plain_regression", {none, "optim.momentum=0"}});
  cases.push_back({"warmup_cosine_regression", {none, "schedule.type=\"cosine\"", "schedule.warmup_steps=2"}});
  cases.push_back({"partial_batch_regression", {none, "data.train_limit=500", "train.drop_last=false"}});
  cases.push_back({"batch32_regression", {none, "train.batch_size=32", "data.train_limit=128"}});
  cases.push_back({"sixteen_classes_regression", {none, "model.classes=16"}});
  cases.push_back({"adam_regression", {none, "optim.type=\"adam\"", "optim.lr=0.001", "optim.weight_decay=0.01"},
                   "bf16", 0.25});
  cases.push_back({"adamw_regression", {none, "optim.type=\"adamw\"", "optim.lr=0.001", "optim.weight_decay=25"},
                   "bf16", 0.25});
  return cases;
}

// Each case's guards: one for every feature it has that moves the weights by little (Feature::off).
std::vector<FirstSteps> with_guards(std::vector<FirstSteps> cases) {
  const std::vector<Feature> table = features();
  for (FirstSteps& c : cases) {
    const Config config = first_steps_config(c.overrides);
    for (const Feature& f : table) {
      if (!f.off.empty() && f.in(config)) c.without.push_back(f.off);
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fused, FusedFirstSteps, ::testing::ValuesIn(with_guards(first_steps_cases())),
                         [](const auto& case_info) { return case_info.param.name; });

// MNIST's labels are 0-9: 10 classes unless the model asks for more.
std::int64_t classes_of(const Config& config) { return config.model.classes != 0 ? config.model.classes : 10; }

// Why `kernel` would not train `config` in `precision`, as the kernel choice decides it without a GPU
// (fused_fit.h: the fused engine's limits, which device.engine = "fused" checks, then the kernel's own, which
// SPRINTNET_FUSED_KERNEL insists on); nullopt where it would. Whether the GPU runs the kernel is not asked:
// the cases skip where it does not.
std::optional<std::string> kernel_refuses(const std::string& kernel, const std::string& precision,
                                          const Config& config) {
  nn::MlpSpec mlp;
  mlp.inputs = 784;  // MNIST's, which every case trains
  mlp.hidden = config.model.hidden;
  mlp.outputs = classes_of(config);
  mlp.activation = ops::parse_activation(config.model.activation);
  mlp.bias = config.model.bias;
  const std::int64_t batch = config.train.batch_size;
  // An H100's or H200's L2: the cases' models keep well under 1 MiB resident.
  constexpr std::int64_t kOnChipBytes = std::int64_t{50} << 20;
  if (auto why = fused_unsupported(mlp, precision, config.optim, batch, config.train.eval_batch_size, kOnChipBytes)) {
    return why;
  }
  if (kernel == "cluster") return fused_cluster_unsupported(mlp, precision, batch);
  if (kernel == "rows") return fused_rows_unsupported(mlp, precision, batch);
  if (kernel == "quads") return fused_quads_unsupported(mlp, precision, config.optim, batch);
  if (kernel == "split") return fused_split_unsupported(mlp, precision, batch);
  if (kernel == "regression") return fused_regression_unsupported(mlp, precision, batch);
  return std::nullopt;  // the grid kernel trains whatever the fused engine takes
}

// The code a case runs: its kernel in its precision; the split kernel's two shapes are two compiled kernels.
std::string path_of(const std::string& kernel, const std::string& precision, const Config& config) {
  const std::string shape = kernel == "split" && !config.model.hidden.empty()
                                ? fmt::format(" ({} wide)", config.model.hidden.front())
                                : "";
  return fmt::format("the {} kernel{} in {}", kernel, shape, precision);
}

// The kernels the coverage check asks about, each with the model of its cases.
struct KernelModel {
  const char* kernel;
  const char* model;
};
constexpr KernelModel kKernelModels[] = {
    {"grid", kModel},           {"cluster", kModel},   {"rows", kRowsModel},
    {"quads", kQuadsModel},     {"split", kSplitModel}, {"split", kNarrowSplitModel},
    {"regression", kNoHiddenModel}};

// The cases cover what the kernel choice (fused_fit.h) lets each kernel train. Every case's kernel takes the
// case. Each kernel, in each precision it computes in, has a case for every feature of the table it takes, and for
// the fewest and the most hidden layers and the most classes it takes. A kernel that gains a feature, a shape or a
// precision fails this test until a case runs it. No GPU is needed.
TEST(FusedFirstStepsCases, CoverEveryFeatureAndShapeEachKernelTakes) {
  std::vector<std::pair<std::string, Config>> runs;  // each case's path_of and config
  for (const FirstSteps& c : first_steps_cases()) {
    const Config config = first_steps_config(c.overrides);
    EXPECT_EQ(kernel_refuses(c.kernel(), c.precision, config), std::nullopt) << c.name;
    runs.emplace_back(path_of(c.kernel(), c.precision, config), config);
  }
  const auto has_case = [&](const std::string& path, const std::function<bool(const Config&)>& holds) {
    return std::any_of(runs.begin(), runs.end(),
                       [&](const auto& run) { return run.first == path && holds(run.second); });
  };
  const auto takes = [](const KernelModel& k, const std::string& precision, std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), k.model);
    return !kernel_refuses(k.kernel, precision, first_steps_config(overrides));
  };
  for (const KernelModel& k : kKernelModels) {
    for (const std::string precision : {"bf16", "fp16"}) {
      if (!takes(k, precision, {})) continue;  // the kernel does not compute in this precision
      const Config model = first_steps_config({k.model});
      const std::string path = path_of(k.kernel, precision, model);
      for (const Feature& f : features()) {
        if ((f.needs_hidden && model.model.hidden.empty()) || !takes(k, precision, f.on)) continue;
        EXPECT_TRUE(has_case(path, f.in)) << "no case runs " << f.name << " on " << path << ", which takes it";
      }
      // Depths: the model's first layers, or more of its last (64 wide where it has none).
      std::vector<std::size_t> depths;
      for (std::size_t depth = 0; depth <= static_cast<std::size_t>(kFusedMaxLayersSupported); ++depth) {
        std::vector<std::int64_t> hidden = model.model.hidden;
        hidden.resize(depth, hidden.empty() ? 64 : hidden.back());
        if (takes(k, precision, {fmt::format("model.hidden=[{}]", fmt::join(hidden, ", "))})) depths.push_back(depth);
      }
      ASSERT_FALSE(depths.empty()) << path;
      for (const std::size_t depth : {depths.front(), depths.back()}) {
        EXPECT_TRUE(has_case(path, [&](const Config& c) { return c.model.hidden.size() == depth; }))
            << "no case on " << path << " trains " << depth << " hidden layers, the "
            << (depth == depths.front() ? "fewest" : "most") << " it takes";
      }
      std::int64_t most_classes = 0;
      for (std::int64_t classes = 10; classes <= kFusedMaxClassesSupported + 1; ++classes) {
        if (takes(k, precision, {fmt::format("model.classes={}", classes)})) most_classes = classes;
      }
      EXPECT_TRUE(has_case(path, [&](const Config& c) { return classes_of(c) == most_classes; }))
          << "no case on " << path << " trains " << most_classes << " classes, the most it takes";
    }
  }
}

// The bar: over 3 seeds, ten epochs end within 0.2 points of the compiled step's mean test
// accuracy, and the seeds' mean train loss of each epoch lies on the compiled step's (within 15 % +
// 0.002: late epochs' losses, 0.005-0.02, move by 30-50 % from seed to seed for either engine,
// measured on an H100; a broken update or loss is off by far more). The runs anneal the lr by the
// cosine the CLI's config uses: at a constant lr 0.05 the last epochs' accuracy moves by 0.2-0.5
// points from epoch to epoch, so two correct engines' 3-seed means differ by 0.2 points by chance
// (the split kernel at 784-256-256-256-10 ended 0.207 above the compiled step on one H100 run,
// 2026-11-27, with every seed's loss curve on the compiled step's). The model's list may override it.
void expect_ten_epochs_like_the_compiled_step(const std::string& name, const std::vector<std::string>& model,
                                              const std::string& kernel) {
  double fused_sum = 0.0, compiled_sum = 0.0;
  std::vector<double> fused_loss(10, 0.0), compiled_loss(10, 0.0);
  for (const int seed : {0, 1, 2}) {
    std::vector<std::string> extra = {"schedule.type=\"cosine\""};
    extra.insert(extra.end(), model.begin(), model.end());
    extra.push_back(fmt::format("seed={}", seed));
    const KernelChoice choice(kernel);
    Trainer fused(config_for("cuda", "fused", "bf16", fmt::format("{}-{}", name, seed), extra));
    Trainer compiled(config_for("cuda", "compiled", "bf16", fmt::format("{}-compiled-{}", name, seed), extra));
    ASSERT_EQ(fused.describe().find("16-block cluster") != std::string::npos, kernel == "cluster") << fused.describe();
    ASSERT_EQ(fused.describe().find("blocks in clusters of") != std::string::npos, kernel == "split") << fused.describe();
    ASSERT_EQ(fused.describe().find("8-block cluster") != std::string::npos, kernel == "regression") << fused.describe();
    ASSERT_EQ(fused.describe().find("the batch's rows split") != std::string::npos, kernel == "rows") << fused.describe();
    ASSERT_EQ(fused.describe().find("as four quads") != std::string::npos, kernel == "quads") << fused.describe();
    const TrainSummary f = fused.fit(), c = compiled.fit();
    std::printf("seed %d: %s %.2f %% in %.3f s, compiled %.2f %% in %.3f s\n", seed, name.c_str(),
                100 * f.final_test.accuracy, f.train_time_s, 100 * c.final_test.accuracy, c.train_time_s);
    ASSERT_EQ(f.epochs.size(), 10u);
    for (std::size_t e = 0; e < f.epochs.size(); ++e) {
      fused_loss[e] += f.epochs[e].train_loss / 3;
      compiled_loss[e] += c.epochs[e].train_loss / 3;
    }
    fused_sum += f.final_test.accuracy;
    compiled_sum += c.final_test.accuracy;
  }
  for (std::size_t e = 0; e < fused_loss.size(); ++e) {
    EXPECT_NEAR(fused_loss[e], compiled_loss[e], 0.15 * compiled_loss[e] + 2e-3) << "epoch " << e + 1;
  }
  EXPECT_NEAR(fused_sum / 3, compiled_sum / 3, 0.002);
}

// The default model (784-256-256-10) on the grid kernel.
TEST(FusedEngine, TenEpochsMatchTheCompiledStep) {
  SN_REQUIRE_GPU();
  expect_ten_epochs_like_the_compiled_step("fused", {}, "grid");
}

// The split kernel (docs/FUSED.md v7) on the deepest models of its two shapes (MNIST's last batch is
// partial), and on the default model; with Adam and AdamW too (auto gives them the split kernel).
TEST(FusedEngine, TheSplitKernelsTenEpochsMatchTheCompiledStep) {
  SN_REQUIRE_GPU();
  if (!gpu_runs_split_kernel(0, 784, 3)) GTEST_SKIP() << "this GPU or build does not run the split kernel";
  expect_ten_epochs_like_the_compiled_step("split", {"model.hidden=[784, 784, 784]"}, "split");
  // (Adam at a constant lr 0.001: the last epoch's accuracy of 784-784-784-784-10 moves by 0.4 points from
  // seed to seed on either engine, H100: the cosine matters as much for it.)
  expect_ten_epochs_like_the_compiled_step(
      "split-adamw", {"model.hidden=[784, 784, 784]", "optim.type=\"adamw\"", "optim.lr=0.001"},
      "split");
}

TEST(FusedEngine, TheNarrowSplitKernelsTenEpochsMatchTheCompiledStep) {
  SN_REQUIRE_GPU();
  if (!gpu_runs_split_kernel(0, 256, 3)) GTEST_SKIP() << "this GPU or build does not run the split kernel";
  expect_ten_epochs_like_the_compiled_step("split-narrow", {"model.hidden=[256, 256, 256]"}, "split");
  expect_ten_epochs_like_the_compiled_step("split-default", {}, "split");
  expect_ten_epochs_like_the_compiled_step(
      "split-default-adam", {"optim.type=\"adam\"", "optim.lr=0.001"}, "split");
}

// The regression kernel (docs/FUSED.md v8) on softmax regression, with SGD and with Adam.
TEST(FusedEngine, TheRegressionKernelsTenEpochsMatchTheCompiledStep) {
  SN_REQUIRE_GPU();
  if (!gpu_runs_regression_kernel(0)) GTEST_SKIP() << "this GPU or build does not run the regression kernel";
  expect_ten_epochs_like_the_compiled_step("regression", {"model.hidden=[]"}, "regression");
  expect_ten_epochs_like_the_compiled_step(
      "regression-adam", {"model.hidden=[]", "optim.type=\"adam\"", "optim.lr=0.001"},
      "regression");
}

// The cluster kernel (docs/FUSED.md v4) on 784-128-128-128-10, the model it was built for.
TEST(FusedEngine, TheClusterKernelsTenEpochsMatchTheCompiledStep) {
  SN_REQUIRE_GPU();
  expect_ten_epochs_like_the_compiled_step("cluster", {"model.hidden=[128, 128, 128]"}, "cluster");
  expect_ten_epochs_like_the_compiled_step(
      "cluster-adam", {"model.hidden=[128, 128, 128]", "optim.type=\"adam\"", "optim.lr=0.001"},
      "cluster");
}

// The rows kernel (docs/FUSED.md v13) on 784-128-128-128-10, with SGD and Adam.
TEST(FusedEngine, TheRowsKernelsTenEpochsMatchTheCompiledStep) {
  SN_REQUIRE_GPU();
  if (!gpu_runs_rows_kernel(0, rows_model())) GTEST_SKIP() << "this GPU or build does not run the rows kernel";
  expect_ten_epochs_like_the_compiled_step("rows", {"model.hidden=[128, 128, 128]"}, "rows");
  expect_ten_epochs_like_the_compiled_step(
      "rows-adam", {"model.hidden=[128, 128, 128]", "optim.type=\"adam\"", "optim.lr=0.001"}, "rows");
}

// The quads kernel (docs/FUSED.md v18) on the default model, and with SGD's general form.
TEST(FusedEngine, TheQuadsKernelsTenEpochsMatchTheCompiledStep) {
  SN_REQUIRE_GPU();
  if (!gpu_runs_quads_kernel(0, quads_model())) GTEST_SKIP() << "this GPU or build does not run the quads kernel";
  expect_ten_epochs_like_the_compiled_step("quads", {}, "quads");
  expect_ten_epochs_like_the_compiled_step("quads-nesterov", {"optim.nesterov=true", "optim.weight_decay=0.0005"}, "quads");
}

void expect_bit_identical_reruns(const std::string& name, const std::vector<std::string>& extra,
                                 const std::string& kernel) {
  const KernelChoice choice(kernel);
  Trainer a(config_for("cuda", "fused", "bf16", name + "-a", extra));
  Trainer b(config_for("cuda", "fused", "bf16", name + "-b", extra));
  ASSERT_EQ(a.describe().find("16-block cluster") != std::string::npos, kernel == "cluster") << a.describe();
  ASSERT_EQ(a.describe().find("blocks in clusters of") != std::string::npos, kernel == "split") << a.describe();
  ASSERT_EQ(a.describe().find("8-block cluster") != std::string::npos, kernel == "regression") << a.describe();
  ASSERT_EQ(a.describe().find("the batch's rows split") != std::string::npos, kernel == "rows") << a.describe();
  ASSERT_EQ(a.describe().find("as four quads") != std::string::npos, kernel == "quads") << a.describe();
  a.fit();
  b.fit();
  const auto wa = weights_of(a), wb = weights_of(b);
  ASSERT_EQ(wa.size(), wb.size());
  for (std::size_t t = 0; t < wa.size(); ++t) {
    ASSERT_EQ(wa[t].size(), wb[t].size());
    EXPECT_EQ(std::memcmp(wa[t].data(), wb[t].data(), wa[t].size() * sizeof(float)), 0) << "tensor " << t;
  }
}

TEST(FusedEngine, TheSameSeedGivesBitIdenticalWeights) {
  SN_REQUIRE_GPU();
  expect_bit_identical_reruns("rerun", {"data.train_limit=10000", "train.epochs=2", "model.activation=\"gelu\""}, "grid");
}

TEST(FusedEngine, TheRowsKernelGivesBitIdenticalWeightsForTheSameSeed) {
  SN_REQUIRE_GPU();
  if (!gpu_runs_rows_kernel(0, rows_model())) GTEST_SKIP() << "this GPU or build does not run the rows kernel";
  expect_bit_identical_reruns("rows-rerun",
                              {"data.train_limit=10000", "train.epochs=2", "model.hidden=[128, 128, 128]",
                               "model.activation=\"tanh\"", "train.drop_last=false"},
                              "rows");
}

TEST(FusedEngine, TheQuadsKernelGivesBitIdenticalWeightsForTheSameSeed) {
  SN_REQUIRE_GPU();
  if (!gpu_runs_quads_kernel(0, quads_model())) GTEST_SKIP() << "this GPU or build does not run the quads kernel";
  expect_bit_identical_reruns("quads-rerun",
                              {"data.train_limit=10000", "train.epochs=2", "model.activation=\"tanh\"",
                               "train.drop_last=false"},
                              "quads");
}

TEST(FusedEngine, TheSplitKernelGivesBitIdenticalWeightsForTheSameSeed) {
  SN_REQUIRE_GPU();
  if (!gpu_runs_split_kernel(0, 784, 3)) GTEST_SKIP() << "this GPU or build does not run the split kernel";
  expect_bit_identical_reruns("split-rerun",
                              {"data.train_limit=10000", "train.epochs=2", "model.hidden=[784, 784, 784]",
                               "model.activation=\"tanh\"", "train.drop_last=false"},
                              "split");
  expect_bit_identical_reruns("split-narrow-rerun",
                              {"data.train_limit=10000", "train.epochs=2", "model.hidden=[256, 256, 256]",
                               "model.activation=\"silu\"", "train.drop_last=false"},
                              "split");
}

// A partial last batch, Adam (its running bias corrections), label smoothing.
TEST(FusedEngine, TheRegressionKernelGivesBitIdenticalWeightsForTheSameSeed) {
  SN_REQUIRE_GPU();
  if (!gpu_runs_regression_kernel(0)) GTEST_SKIP() << "this GPU or build does not run the regression kernel";
  expect_bit_identical_reruns("regression-rerun",
                              {"data.train_limit=10000", "train.epochs=2", "model.hidden=[]", "optim.type=\"adam\"",
                               "optim.lr=0.001", "loss.label_smoothing=0.4", "train.drop_last=false"},
                              "regression");
}

// The regression kernel's shapes are fixed: its launch refuses anything else before touching the
// device (fused_fit.h keeps such models away; a caller that did not would read and write past the
// kernel's buffers). Each case is one limit crossed from a model the kernel takes.
TEST(FusedEngine, TheRegressionKernelRefusesModelsOutsideItsShape) {
  SN_REQUIRE_GPU();
  static const std::uint16_t normalised = 0;
  cuda::FusedEpochArgs fits;
  fits.num_layers = 1;
  fits.batch = cuda::kRegressionRows;
  fits.layers[0].in = 784;
  fits.layers[0].out = 10;
  fits.normalised = &normalised;
  const auto refused = [](const cuda::FusedEpochArgs& args) {
    return cuda::launch_regression_epoch(args, nullptr) == cudaErrorInvalidValue;
  };
  auto inputs = fits;
  inputs.layers[0].in = cuda::kRegressionMaxInputs + 16;
  EXPECT_TRUE(refused(inputs));
  auto classes = fits;
  classes.layers[0].out = cuda::kRegressionMaxClasses + 1;
  EXPECT_TRUE(refused(classes));
  auto batch = fits;
  batch.batch = cuda::kRegressionRows + 1;
  EXPECT_TRUE(refused(batch));
  auto hidden = fits;
  hidden.num_layers = 2;
  EXPECT_TRUE(refused(hidden));
  auto fp16 = fits;
  fp16.type = cuda::ElementType::kF16;
  EXPECT_TRUE(refused(fp16));
  auto evaluation = fits;
  evaluation.train = false;
  EXPECT_TRUE(refused(evaluation));
  auto unnormalised = fits;
  unnormalised.normalised = nullptr;
  EXPECT_TRUE(refused(unnormalised));
}

// Widths that leave padding in the blocks' columns, tanh, a partial last batch.
TEST(FusedEngine, TheClusterKernelGivesBitIdenticalWeightsForTheSameSeed) {
  SN_REQUIRE_GPU();
  expect_bit_identical_reruns("cluster-rerun",
                              {"data.train_limit=10000", "train.epochs=2", "model.hidden=[128, 100, 72]",
                               "model.activation=\"tanh\"", "train.drop_last=false"},
                              "cluster");
}

TEST(FusedEngine, TheBannerSaysWhichEngineRunsAndWhy) {
  SN_REQUIRE_GPU();
  Trainer fused(config_for("cuda", "fused", "auto", "fused", {"train.epochs=1"}));
  EXPECT_NE(fused.describe().find("fused engine: one persistent kernel per epoch"), std::string::npos)
      << fused.describe();
  EXPECT_NE(fused.describe().find("device.engine = \"fused\""), std::string::npos) << fused.describe();
  // The default model takes the quads kernel where the GPU runs it (else the split kernel); a model no
  // one-shape kernel takes (300 wide: over the quads kernel's 256, not a split kernel's shape), the grid kernel.
  if (gpu_runs_quads_kernel(0, quads_model())) {
    EXPECT_NE(fused.describe().find("as four quads"), std::string::npos) << fused.describe();
  } else if (gpu_runs_split_kernel(0, 256, 3)) {
    EXPECT_NE(fused.describe().find("32 blocks in clusters of 4"), std::string::npos) << fused.describe();
  }
  Trainer grid(config_for("cuda", "fused", "auto", "grid", {"train.epochs=1", "model.hidden=[300, 100]"}));
  EXPECT_NE(grid.describe().find("a grid of "), std::string::npos) << grid.describe();
  {  // A kernel asked for that cannot train the model says why: the regression kernel, hidden layers.
    const KernelChoice regression("regression");
    EXPECT_THAT(test::error_message([] { Trainer(config_for("cuda", "fused", "auto", "hidden", {"train.epochs=1"})); }),
                ::testing::HasSubstr("regression kernel cannot train this model: 2 hidden layers"));
  }
  // The default model's 256-wide layers are too wide for one cluster: asked for, it says so.
  const KernelChoice kernel("cluster");
  EXPECT_THAT(test::error_message([] { Trainer(config_for("cuda", "fused", "auto", "wide", {"train.epochs=1"})); }),
              ::testing::HasSubstr("cannot train this model: a hidden layer of 256"));
  // Too wide for the chip: asked for, the fused engine refuses, naming the limit and the need.
  EXPECT_THROW(Trainer(config_for("cuda", "fused", "auto", "wide", {"train.epochs=1", "model.hidden=[8192, 8192]"})),
               std::exception);
}

// The cluster kernel (or, for 1 to 3 hidden layers, the rows kernel) is the fused engine's kernel
// wherever it runs, and auto's engine for every model it takes (the fastest there, docs/PERFORMANCE.md).
TEST(FusedEngine, TheClusterKernelRunsWhereItCanAndAutoTakesEveryModelItFits) {
  SN_REQUIRE_GPU();
  nn::MlpSpec regression;
  regression.inputs = 784;
  regression.outputs = 10;
  if (!gpu_runs_cluster_kernel(0, regression)) GTEST_SKIP() << "this GPU or build does not run the cluster kernel";
  // 1 to 3 hidden layers of at most 128: the rows kernel (v13) where the GPU runs it, auto's choice too;
  // deeper ones the cluster kernel.
  const bool rows = gpu_runs_rows_kernel(0, rows_model());
  const char* cluster_or_rows = rows ? "the batch's rows split" : "16-block cluster";
  Trainer small(config_for("cuda", "fused", "auto", "small", {"train.epochs=1", "model.hidden=[128]"}));
  EXPECT_NE(small.describe().find(cluster_or_rows), std::string::npos) << small.describe();
  // Softmax regression: the regression kernel where the GPU runs it (auto's choice too), else the
  // cluster kernel; with 30 classes (more than its logit tile) the cluster kernel.
  Trainer softmax(config_for("cuda", "auto", "auto", "softmax", {"train.epochs=1", "model.hidden=[]"}));
  EXPECT_NE(softmax.describe().find("softmax regression) train fastest"), std::string::npos) << softmax.describe();
  EXPECT_NE(softmax.describe().find(gpu_runs_regression_kernel(0) ? "8-block cluster" : "16-block cluster"),
            std::string::npos)
      << softmax.describe();
  Trainer classes30(config_for("cuda", "auto", "auto", "softmax30", {"train.epochs=1", "model.hidden=[]", "model.classes=30"}));
  EXPECT_NE(classes30.describe().find("16-block cluster"), std::string::npos) << classes30.describe();
  Trainer narrow(config_for("cuda", "auto", "auto", "narrow", {"train.epochs=1", "model.hidden=[64, 64, 64]"}));
  EXPECT_NE(narrow.describe().find(cluster_or_rows), std::string::npos) << narrow.describe();
  Trainer hidden(config_for("cuda", "auto", "auto", "hidden", {"train.epochs=1", "model.hidden=[128, 128, 128]"}));
  EXPECT_NE(hidden.describe().find(cluster_or_rows), std::string::npos) << hidden.describe();
  if (rows) {
    EXPECT_NE(hidden.describe().find("train fastest on the fused engine's rows kernel"), std::string::npos);
  }
  Trainer deep(config_for("cuda", "auto", "auto", "deep", {"train.epochs=1", "model.hidden=[96, 64, 40, 24, 16]"}));
  EXPECT_NE(deep.describe().find("16-block cluster"), std::string::npos) << deep.describe();
  // 784-784-784-784-10 at batch 128: the split kernel, auto's choice too.
  if (gpu_runs_split_kernel(0, 784, 3)) {
    Trainer wide(config_for("cuda", "auto", "auto", "split", {"train.epochs=1", "model.hidden=[784, 784, 784]"}));
    EXPECT_NE(wide.describe().find("train fastest on the fused engine's split kernel"), std::string::npos)
        << wide.describe();
    EXPECT_NE(wide.describe().find("98 blocks in clusters of 7"), std::string::npos) << wide.describe();
    // Beside other runs (a sweep's worker, with a stream of its own) auto keeps the compiled step,
    // whose runs overlap where the split kernel's would take turns.
    const cuda::StreamScope worker(0);
    Trainer shared(config_for("cuda", "auto", "auto", "split-shared", {"train.epochs=1", "model.hidden=[784, 784, 784]"}));
    EXPECT_EQ(shared.describe().find("fused engine"), std::string::npos) << shared.describe();
  }
  // The default model (784-256-256-10): the quads kernel where the GPU runs it, auto's choice too; with
  // Adam (or on a GPU without the quads kernel) the split kernel's 256-wide shape.
  if (gpu_runs_quads_kernel(0, quads_model())) {
    Trainer quads(config_for("cuda", "auto", "auto", "quads", {"train.epochs=1", "model.hidden=[256, 256]"}));
    EXPECT_NE(quads.describe().find("take the fused engine's quads kernel"), std::string::npos) << quads.describe();
    EXPECT_NE(quads.describe().find("as four quads"), std::string::npos) << quads.describe();
  }
  if (gpu_runs_split_kernel(0, 256, 3)) {
    Trainer narrow_split(config_for("cuda", "auto", "auto", "split-narrow",
                                    {"train.epochs=1", "model.hidden=[256, 256]", "optim.type=\"adam\"", "optim.lr=0.001"}));
    EXPECT_NE(narrow_split.describe().find("32 blocks in clusters of 4"), std::string::npos) << narrow_split.describe();
  }
  // Too wide for one cluster and no shape of the split kernel: auto keeps the compiled step.
  Trainer wide(config_for("cuda", "auto", "auto", "wide", {"train.epochs=1", "model.hidden=[512, 512]"}));
  EXPECT_EQ(wide.describe().find("fused engine"), std::string::npos) << wide.describe();
}

}  // namespace
}  // namespace sprintnet::train
