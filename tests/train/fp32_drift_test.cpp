// Why a 32-step fp32 CPU run can part from an fp64 run by ~3e-4 while each step is exact to
// ~1e-7 (noted when the checkpoints issue closed: 3e-4 on the GPU host's CPU, 3.7e-7 on CUDA):
// ReLU decisions. The default model (784-256-256-10, SGD momentum 0.9, lr 0.05, cosine) trains
// 32 steps on 2048 MNIST samples in lockstep: in fp64 (the exact path), in fp32, and in fp32 with
// every hidden pre-activation whose sign disagrees with the fp64 run's set to the fp64 value (a
// change of the size of fp32's rounding: such inputs lie within rounding of zero). Each fp32 run
// starts from weights nudged by 16 ulps at random (~1e-6 relative): another rounding pattern, as
// another BLAS or thread count gives, made large enough that switches happen within 32 steps.
// A pre-activation rounded across zero switches a ReLU; the switch changes a whole gradient row,
// momentum carries it into every later step, and the runs part for good (measured: 5 of 6
// patterns switch and end 1e-3..2e-3 off; aligned, all 6 stay at their 1.5e-6 start). Unnudged,
// the eager fp32 run here switches none and ends 2e-7 from fp64; the compiled CPU step (oneDNN's
// rounding; its pre-activations are not observable here) shows a switch's signature: its error
// jumps from 1.6e-7 to 1.7e-5 at step 11 and grows to 2.7e-4 by step 32, the GPU host's 3e-4.
// Which rounding switches a ReLU is luck (CUDA's did not); nothing is wrong with the products
// (each within 4e-7 of fp64). fp32 training is chaotic
// at ReLU boundaries, so a 32-step fp32-vs-fp64 comparison needs ~1e-3, not fp32 rounding; the
// per-step golden replay (tests/parity) is where fp32 is held to 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "sprintnet/data/dataset.h"
#include "sprintnet/nn/linear.h"
#include "sprintnet/nn/loss.h"
#include "sprintnet/nn/mlp.h"
#include "sprintnet/ops/cpu/cpu_backend.h"
#include "sprintnet/optim/lr_schedule.h"
#include "sprintnet/optim/optimizer.h"
#include "sprintnet/train/batch_loader.h"
#include "sprintnet/train/train_plan.h"
#include "support/test_util.h"

namespace sprintnet::train {
namespace {

constexpr std::int64_t kSamples = 2048, kBatch = 128, kEpochs = 2;
constexpr int kNudgeUlps = 16;

struct TrainingRun {
  std::unique_ptr<nn::Sequential> model;
  std::unique_ptr<optim::SGD> optimizer;
  std::unique_ptr<BatchLoader> loader;
};

// `nudge` != 0: every fp32 initial value moved by one ulp up or down at random (that seed).
TrainingRun make_run(const Dataset& data, const Normalization& norm, DType dtype, std::uint64_t nudge = 0) {
  nn::MlpSpec spec;
  spec.hidden = {256, 256};
  Generator gen(0, 1), same_gen(0, 1);
  TrainingRun run;
  run.model = nn::make_mlp(spec, gen, Device::cpu(), dtype);
  if (dtype == DType::kF64) {  // the fp32 run's initial values, widened
    const auto fp32 = nn::make_mlp(spec, same_gen, Device::cpu(), DType::kF32);
    const auto from = fp32->named_parameters(), to = run.model->named_parameters();
    for (std::size_t i = 0; i < from.size(); ++i) to[i].second->value = from[i].second->value.to(DType::kF64);
  }
  if (nudge != 0) {
    Generator coin(nudge, 9);
    for (auto& [name, p] : run.model->named_parameters()) {
      float* v = p->value.data<float>();
      for (std::int64_t i = 0; i < p->value.numel(); ++i) {
        const float toward = coin.below(2) == 0 ? -1e30F : 1e30F;
        for (int u = 0; u < kNudgeUlps; ++u) v[i] = std::nextafter(v[i], toward);
      }
    }
  }
  run.optimizer = std::make_unique<optim::SGD>(run.model->parameters(), optim::SgdOptions{.lr = 0.05, .momentum = 0.9});
  run.loader = std::make_unique<BatchLoader>(data, norm, LoaderOptions{kBatch, true, true, 5}, Device::cpu(), dtype);
  return run;
}

// Sets the elements of z (fp32) whose sign differs from the reference's (fp64) to the reference's
// value; returns how many there were.
std::int64_t align_signs(const Tensor& z, const Tensor& reference) {
  float* a = z.data<float>();
  const double* r = reference.data<double>();
  std::int64_t flipped = 0;
  for (std::int64_t i = 0; i < z.numel(); ++i) {
    if ((a[i] > 0.0F) != (r[i] > 0.0)) {
      a[i] = static_cast<float>(r[i]);
      ++flipped;
    }
  }
  return flipped;
}

// Module by module, keeping each hidden layer's pre-activation in `pre`; with `reference`, the
// pre-activations' signs are first aligned with it (counted in *flips).
Tensor forward(nn::Sequential& model, Tensor x, std::vector<Tensor>& pre, const std::vector<Tensor>* reference,
               std::int64_t* flips) {
  pre.clear();
  for (std::size_t i = 0; i < model.size(); ++i) {
    x = model[i].forward(x);
    const bool hidden_linear = dynamic_cast<nn::Linear*>(&model[i]) != nullptr && i + 1 < model.size();
    if (!hidden_linear) continue;
    if (reference != nullptr) *flips += align_signs(x, (*reference)[pre.size()]);
    pre.push_back(x);
  }
  return x;
}

// Sign disagreements between two runs' pre-activations (fp32 against fp64).
std::int64_t sign_disagreements(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  std::int64_t n = 0;
  for (std::size_t l = 0; l < a.size(); ++l) {
    const float* x = a[l].data<float>();
    const double* y = b[l].data<double>();
    for (std::int64_t i = 0; i < a[l].numel(); ++i) n += (x[i] > 0.0F) != (y[i] > 0.0);
  }
  return n;
}

double weights_error(TrainingRun& run, TrainingRun& exact) {
  double worst = 0.0;
  const auto a = run.model->named_parameters(), b = exact.model->named_parameters();
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, test::relative_error(a[i].second->value.to(DType::kF64), b[i].second->value));
  }
  return worst;
}

struct DriftResult {
  double plain_error = 0.0, aligned_error = 0.0;
  std::int64_t plain_flips = 0, aligned_flips = 0, first_flip_step = -1;
  double error_before_first_flip = 0.0;
};

DriftResult run_lockstep(const TrainTestData& data, const Normalization& norm, std::uint64_t nudge) {
  TrainingRun exact = make_run(data.train, norm, DType::kF64);
  TrainingRun plain = make_run(data.train, norm, DType::kF32, nudge);
  TrainingRun aligned = make_run(data.train, norm, DType::kF32, nudge);
  nn::CrossEntropyLoss loss64, loss_plain, loss_aligned;
  const std::int64_t steps = exact.loader->batches_per_epoch();
  ScheduleConfig cosine;
  cosine.type = "cosine";
  optim::LrSchedule schedule(cosine, 0.05, steps, steps * kEpochs);
  DriftResult result;
  std::vector<Tensor> pre64, pre_plain, pre_aligned;
  std::int64_t step = 0;
  for (std::int64_t epoch = 0; epoch < kEpochs; ++epoch) {
    for (TrainingRun* r : {&exact, &plain, &aligned}) r->loader->start_epoch(epoch);
    for (std::int64_t b = 0; b < steps; ++b, ++step) {
      const auto train_step = [&](TrainingRun& r, nn::Loss& loss, std::vector<Tensor>& pre,
                                  const std::vector<Tensor>* ref, std::int64_t* flips) {
        r.optimizer->set_lr(schedule.lr_at(step));
        const Batch batch = r.loader->batch(b);
        r.optimizer->zero_grad();
        loss.forward(forward(*r.model, batch.inputs, pre, ref, flips), batch.labels);
        r.model->backward(loss.backward());
        r.optimizer->step();
      };
      std::int64_t unused = 0;
      const double before = weights_error(plain, exact);
      train_step(exact, loss64, pre64, nullptr, &unused);
      train_step(plain, loss_plain, pre_plain, nullptr, &unused);
      const std::int64_t disagreements = sign_disagreements(pre_plain, pre64);
      if (disagreements > 0 && result.first_flip_step < 0) {
        result.first_flip_step = step;
        result.error_before_first_flip = before;
      }
      result.plain_flips += disagreements;
      train_step(aligned, loss_aligned, pre_aligned, &pre64, &result.aligned_flips);
    }
  }
  result.plain_error = weights_error(plain, exact);
  result.aligned_error = weights_error(aligned, exact);
  return result;
}

TEST(Fp32Drift, ReluDecisionsRoundedAcrossZeroAreWhatPartsFp32FromFp64) {
  set_cpu_threads(2);
  DataConfig config;
  config.dir = test::data_dir().string();
  config.train_limit = kSamples;
  config.test_limit = 10;
  const TrainTestData data = load_train_test(config);
  const Normalization norm = make_normalization(data.train, "standard");
  int switched = 0;
  for (const std::uint64_t nudge : {1, 2, 3, 4, 5, 6}) {
    const DriftResult r = run_lockstep(data, norm, nudge);
    std::printf("nudge %llu: fp32 against fp64 after 32 steps (worst parameter, relative): plain %.3g with %lld "
                "ReLU inputs across zero (first at step %lld, error %.3g before it); aligned %.3g (%lld set)\n",
                static_cast<unsigned long long>(nudge), r.plain_error, static_cast<long long>(r.plain_flips),
                static_cast<long long>(r.first_flip_step), r.error_before_first_flip, r.aligned_error,
                static_cast<long long>(r.aligned_flips));
    // With the exact run's ReLU decisions, fp32 stays at its rounding: ~1e-7 per step, a few
    // times that after 32 steps.
    EXPECT_LT(r.aligned_error, 1e-5) << nudge;
    if (r.plain_flips == 0) {
      EXPECT_LT(r.plain_error, 1e-5) << nudge;  // no switch, no drift
      continue;
    }
    // Until its first switch the plain run is as exact as the aligned one; the switch is what
    // moves it further than fp32 rounding.
    ++switched;
    EXPECT_LT(r.error_before_first_flip, 1e-5) << nudge;
    EXPECT_GT(r.plain_error, 10.0 * r.aligned_error) << nudge;
  }
  // The mechanism is exercised: some of these rounding patterns do switch a ReLU.
  EXPECT_GT(switched, 0);
}

}  // namespace
}  // namespace sprintnet::train
