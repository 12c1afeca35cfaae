// The compiled step's optimizer (ops/cuda/flat_optimizer.cu over flat_update.cuh) against the CPU
// backend's per-tensor update (ops/cpu/optimizer.cpp, torch.optim's algebra): every optimizer form in
// every gradient and copy type, the per-range launches of the per-layer update, the fused kernels' fast
// Adam step, and fp16's loss-scale bookkeeping. Outputs poisoned first, fresh random inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "adam_fast_probe.h"
#include "sprintnet/io/config.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/train/padded_parameters.h"
#include "step_kernel_util.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using test::DeviceValue;
using test::element_type;
using test::gpu;
using test::gpu_stream;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct OptimizerCase {
  cuda::FlatOptimizerKind kind;
  SgdHyper sgd;
  AdamHyper adam;
  const char* name;
  bool adam_like() const { return kind != cuda::FlatOptimizerKind::kSgd; }
  bool has_state1() const { return adam_like() || sgd.momentum > 0.0; }  // a momentum buffer or exp_avg
};

// Every form of the flat update: SGD with momentum and weight decay, nesterov, dampening, without
// momentum; Adam (coupled weight decay) and AdamW.
std::vector<OptimizerCase> optimizer_cases() {
  return {
      {cuda::FlatOptimizerKind::kSgd, {.momentum = 0.9, .weight_decay = 1e-3}, {}, "sgd momentum"},
      {cuda::FlatOptimizerKind::kSgd, {.momentum = 0.9, .nesterov = true}, {}, "sgd nesterov"},
      {cuda::FlatOptimizerKind::kSgd, {.momentum = 0.9, .dampening = 0.5, .weight_decay = 1e-3}, {}, "sgd dampening"},
      {cuda::FlatOptimizerKind::kSgd, {.momentum = 0.0, .weight_decay = 1e-2}, {}, "sgd plain"},
      {cuda::FlatOptimizerKind::kAdam, {}, {.weight_decay = 1e-2}, "adam"},
      {cuda::FlatOptimizerKind::kAdamW, {}, {.weight_decay = 1e-2, .decoupled = true}, "adamw"},
  };
}

// The case's hyper-parameters, derived by the plan's own flat_optimizer_config from the case as a config;
// buffers, types and state are the caller's.
cuda::FlatOptimizerArgs hyper_args(const OptimizerCase& c) {
  OptimConfig o;
  o.type = c.kind == cuda::FlatOptimizerKind::kSgd ? "sgd" : c.kind == cuda::FlatOptimizerKind::kAdam ? "adam" : "adamw";
  o.momentum = c.sgd.momentum;
  o.dampening = c.sgd.dampening;
  o.nesterov = c.sgd.nesterov;
  o.weight_decay = c.adam_like() ? c.adam.weight_decay : c.sgd.weight_decay;
  o.beta1 = c.adam.beta1;
  o.beta2 = c.adam.beta2;
  o.eps = c.adam.eps;
  return train::flat_optimizer_config(o, false);  // check_finite: flat_args decides
}

OptimizerCase without_weight_decay(OptimizerCase c) {
  c.sgd.weight_decay = 0.0;
  c.adam.weight_decay = 0.0;
  return c;
}

// One update of the CPU backend (the reference): the `update`-th applied (from 0), at learning rate lr.
void reference_update(const OptimizerCase& c, const Tensor& param, const Tensor& grad, const Tensor& s1,
                      const Tensor& s2, double lr, std::int64_t update) {
  if (c.adam_like()) {
    AdamHyper h = c.adam;
    h.lr = lr;
    h.step = update + 1;
    ops::adam_step(param, grad, s1, s2, h);
  } else {
    SgdHyper h = c.sgd;
    h.lr = lr;
    h.first_step = update == 0;
    ops::sgd_step(param, grad, c.has_state1() ? &s1 : nullptr, h);
  }
}

// The learning-rate table on the device with a NaN past its end: an update that read beyond the table
// instead of holding its last entry would turn the weights to NaN.
Tensor lr_table_on_gpu(std::vector<double> lrs) {
  lrs.push_back(kNaN);
  const auto size = static_cast<std::int64_t>(lrs.size());
  return Tensor::from_vector(lrs, {size}, gpu());
}

// A gradient as the step stores it (in `type`, times the fp16 loss scale), and what the update sees once it
// has unscaled it: those values in fp32, exactly (the scale is a power of 2 and the rounding came first).
struct Gradient {
  Tensor stored;  // on the device
  Tensor seen;    // on the host, fp32: the reference's gradient
};

Gradient gradient_of(std::vector<float> values, DType type, float loss_scale) {
  const auto count = static_cast<std::int64_t>(values.size());
  for (float& v : values) v *= loss_scale;
  const Tensor stored = Tensor::from_vector(values, {count}).to(type);
  std::vector<float> seen = stored.to_vector<float>();
  for (float& v : seen) v /= loss_scale;
  return {stored.to(gpu()), Tensor::from_vector(seen, {count})};
}

Gradient random_gradient(std::int64_t count, DType type, float loss_scale, Generator& gen) {
  return gradient_of(test::random_uniform({count}, DType::kF32, gen).to_vector<float>(), type, loss_scale);
}

// random_gradient for Adam's coupled weight decay from zero state, which steps by g' / (|g'| + eps) with
// g' = g + decay * p: where g' cancels to eps's scale (|g'| ~ 1e-7), that ratio is the rounding of g' itself, and
// two correct fp32 updates (one fusing decay * p + g, one rounding twice) part by far more than their ulps. Seen on
// the H200 once in ~700 runs (seed 173795727390, weight 3016: g = -0.0081635, p = 0.81633, g' = -1.4e-7; changes of
// 0.0746383 and 0.0746335 against 0.0746343 in double). Gradients within 1e-3 of -decay * p are moved 2e-3 away (after
// the rounding to `type`, |g'| stays above 9e-4: well conditioned), so the comparison keeps a bar that sees the decay.
Gradient random_gradient_away_from_decay(std::int64_t count, DType type, float loss_scale, Generator& gen,
                                         const Tensor& weights, double decay) {
  std::vector<float> values = test::random_uniform({count}, DType::kF32, gen).to_vector<float>();
  const std::vector<float> p = weights.to_vector<float>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double cancelled = values[i] + decay * p[i];
    if (std::abs(cancelled) < 1e-3) values[i] += cancelled < 0.0 ? -2e-3f : 2e-3f;
  }
  return gradient_of(std::move(values), type, loss_scale);
}

// The worst |got - want| / tolerance over the weights' change p - p0 (<= 1 passes), elementwise. GPU and CPU
// apply the same fp32 operations, one fusing a multiply-add where the other rounds twice, so:
//  - each rounds p at most twice an update (AdamW decays, then steps), by at most 2^-24 |p| each time:
//    over `updates` updates they drift apart by up to updates * 4 * 2^-24 (|p0| + |p|);
//  - the steps agree to a few ulp of the quantities they are made of, of size lr (|d| <= ~5 with momentum
//    and nesterov, Adam's m / sqrt(v) ~ 1): 1e-5 of the change, and 1e-5 of the sum of the learning rates
//    where successive steps cancel.
// Measured against |p| instead, an error of the lr-sized steps would hide below the weights' own rounding.
double worst_change_error(const Tensor& got, const Tensor& want, const Tensor& before, double lr_sum, int updates,
                          std::int64_t* worst_at = nullptr) {
  const auto p = got.to_vector<double>(), q = want.to_vector<double>(), p0 = before.to_vector<double>();
  double worst = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double want_change = q[i] - p0[i];
    const double tolerance = 1e-5 * (std::abs(want_change) + lr_sum) +
                             updates * 4.0 * std::ldexp(1.0, -24) * (std::abs(p0[i]) + std::abs(q[i]));
    const double error = std::abs((p[i] - p0[i]) - want_change) / tolerance;
    if (!(error <= worst)) {  // NaN too
      worst = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
      if (worst_at != nullptr) *worst_at = static_cast<std::int64_t>(i);
    }
  }
  return worst;
}

void expect_same_change(const Tensor& got, const Tensor& want, const Tensor& before, double lr_sum, int updates,
                        const std::string& what) {
  std::int64_t at = 0;
  const double worst = worst_change_error(got, want, before, lr_sum, updates, &at);
  EXPECT_LE(worst, 1.0) << what << ": the change of weight " << at << " is " << got.to_vector<double>()[at] -
                                                                                 before.to_vector<double>()[at]
                        << ", the CPU's " << want.to_vector<double>()[at] - before.to_vector<double>()[at] << " ("
                        << worst << " times the tolerance)";
}

// Optimizer state (momentum buffer, exp_avg, exp_avg_sq): O(1)-scaled sums of a few terms per update, a
// fused multiply-add on one side where the other rounds twice: a few 2^-24 relative, norm-wise.
void expect_same_state(const Tensor& got, const Tensor& want, const std::string& what) {
  EXPECT_LT(test::relative_error(got.to(Device::cpu()), want), 1e-6) << what;
}

// The compute copy is the new master weight rounded once to its type, to nearest even: the host's
// conversion (core/half.h) is bit-exact with the device's __floats2bfloat162_rn / __floats2half2_rn, so they
// must be equal, element by element (a truncating store, or a stale or unwritten copy, is not).
void expect_copy_is_rounded_master(const Tensor& copy, const Tensor& master, const std::string& what) {
  const std::vector<float> got = copy.to(Device::cpu()).to(DType::kF32).to_vector<float>();
  const std::vector<float> want = master.to(Device::cpu()).to(copy.dtype()).to(DType::kF32).to_vector<float>();
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(got[i] == want[i])) {
      ADD_FAILURE() << what << ": copy element " << i << " is " << got[i] << ", the master "
                    << master.to_vector<float>()[i] << " rounded to " << dtype_name(copy.dtype()) << " is " << want[i];
      return;
    }
  }
}

struct FlatRange {
  std::int64_t begin, end;
};

// Every element outside `r` holds the bytes it held before (NaN poison included): r = {0, 0} checks them all.
void expect_same_bytes_outside(const Tensor& now, const Tensor& before, FlatRange r, const std::string& what) {
  const Tensor a = now.to(Device::cpu()), b = before.to(Device::cpu());
  ASSERT_EQ(a.nbytes(), b.nbytes()) << what;
  const std::size_t size = dtype_size(a.dtype());
  const auto* x = static_cast<const unsigned char*>(a.raw_data());
  const auto* y = static_cast<const unsigned char*>(b.raw_data());
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    if (i >= r.begin && i < r.end) continue;
    const std::size_t at = static_cast<std::size_t>(i) * size;
    if (std::memcmp(x + at, y + at, size) != 0) {
      ADD_FAILURE() << what << ": element " << i << " (outside [" << r.begin << ", " << r.end << ")) was "
                    << b.to_vector<double>()[static_cast<std::size_t>(i)] << " and is now "
                    << a.to_vector<double>()[static_cast<std::size_t>(i)];
      return;
    }
  }
}

void expect_state(const cuda::StepState& s, std::int64_t step, std::int64_t opt_steps, float loss_scale,
                  std::int32_t good_steps, const std::string& what) {
  EXPECT_EQ(s.step, step) << what;
  EXPECT_EQ(s.opt_steps, opt_steps) << what;
  EXPECT_EQ(s.blocks_done, 0u) << what << ": the completion counter must be left at 0 for the next launch";
  EXPECT_EQ(s.found_inf, 0) << what;
  EXPECT_EQ(s.loss_scale, loss_scale) << what;
  EXPECT_EQ(s.good_steps, good_steps) << what;
}

// The flat buffers of one run on the device, from the host tensors the reference updates.
struct DeviceBuffers {
  Tensor master, state1, state2, copy;
  DeviceBuffers(const Tensor& param, const Tensor& s1, const Tensor& s2, DType copy_type, bool with_copy)
      : master(param.to(gpu())), state1(s1.to(gpu())), state2(s2.to(gpu())) {
    if (with_copy) copy = test::poisoned(param.shape(), copy_type, gpu());
  }
  void point(cuda::FlatOptimizerArgs& args, const OptimizerCase& c) const {
    args.master = master.data<float>();
    args.state1 = c.has_state1() ? state1.data<float>() : nullptr;
    args.state2 = c.adam_like() ? state2.data<float>() : nullptr;
    args.copy = copy.defined() ? copy.raw_data() : nullptr;
    args.count = master.numel();
  }
};

const std::vector<DType> kElementTypes = {DType::kF32, DType::kBF16, DType::kF16};

// The update's arguments for case c over the buffers d: gradients and copy in their types, the learning-rate
// table (lr_table_on_gpu's, whose NaN is no entry), the step state; fp16 gradients come with check_finite, as
// in fp16 runs.
cuda::FlatOptimizerArgs flat_args(const OptimizerCase& c, const DeviceBuffers& d, DType grad_type, DType copy_type,
                                  const Tensor& lr_table, cuda::StepState* state) {
  cuda::FlatOptimizerArgs args = hyper_args(c);
  d.point(args, c);
  args.grad_type = element_type(grad_type);
  args.copy_type = element_type(copy_type);
  args.lr_table = lr_table.data<double>();
  args.lr_table_size = lr_table.numel() - 1;
  args.state = state;
  args.check_finite = grad_type == DType::kF16;
  return args;
}

// ------------------------------------------------------------------------------------ whole buffer

// Four updates of every optimizer form over one flat buffer, with the gradients in each type the step stores
// them in (fp16 as fp16 runs have them: times a loss scale of 1024, with check_finite) and each compute-copy
// type, against the CPU's update on the same rounded, unscaled gradients. The learning-rate table has three
// entries: the fourth update takes the last (step_lr, flat_update.cuh: "steps past its end use its last
// entry"). Weight decay is the smallest effect here (1e-3 of the gradient): the reference without it must
// miss the tolerance, so the comparison can see it.
TEST(GpuStepKernels, FlatOptimizerFollowsTheCpuOptimizerInEveryGradientAndCopyType) {
  SN_REQUIRE_GPU();
  const std::vector<double> lrs = {0.05, 0.03, 0.01};
  const Tensor lr_table = lr_table_on_gpu(lrs);
  constexpr int kUpdates = 4;
  const std::int64_t count = 4 * 1001;  // a multiple of 4, as the plan pads its buffers; an odd number of vectors
  for (const OptimizerCase& c : optimizer_cases()) {
    const OptimizerCase no_decay = without_weight_decay(c);
    for (const DType grad_type : kElementTypes) {
      for (const DType copy_type : kElementTypes) {
        const std::string what =
            fmt::format("{}, {} gradients, {} copy", c.name, dtype_name(grad_type), dtype_name(copy_type));
        const bool fp16 = grad_type == DType::kF16;
        const float loss_scale = fp16 ? 1024.0f : 1.0f;
        Generator gen(test::test_seed() + 7);
        Tensor param = test::random_uniform({count}, DType::kF32, gen);
        Tensor s1 = Tensor::zeros({count}, DType::kF32), s2 = Tensor::zeros({count}, DType::kF32);
        const Tensor p0 = param.clone();
        Tensor nd_param = param.clone(), nd_s1 = s1.clone(), nd_s2 = s2.clone();  // the reference without decay
        const DeviceBuffers d(param, s1, s2, copy_type, true);
        DeviceValue<cuda::StepState> state({.loss_scale = loss_scale});
        cuda::FlatOptimizerArgs args = flat_args(c, d, grad_type, copy_type, lr_table, state.get());
        double lr_sum = 0.0;
        for (int update = 0; update < kUpdates; ++update) {
          const double lr = lrs[std::min<std::size_t>(static_cast<std::size_t>(update), lrs.size() - 1)];
          lr_sum += lr;
          const double coupled_decay = c.kind == cuda::FlatOptimizerKind::kAdam ? c.adam.weight_decay : 0.0;
          const Gradient g = random_gradient_away_from_decay(count, grad_type, loss_scale, gen, param, coupled_decay);
          reference_update(c, param, g.seen, s1, s2, lr, update);
          reference_update(no_decay, nd_param, g.seen, nd_s1, nd_s2, lr, update);
          args.grad = g.stored.raw_data();
          if (fp16) {
            SN_CUDA_CHECK(cuda::launch_check_finite(args.grad, args.grad_type, count, state.get(), gpu_stream()));
          }
          SN_CUDA_CHECK(cuda::launch_flat_optimizer(args, gpu_stream()));
        }
        expect_state(state.read(), kUpdates, kUpdates, loss_scale, fp16 ? kUpdates : 0, what);
        expect_same_change(d.master, param, p0, lr_sum, kUpdates, what);
        if (c.sgd.weight_decay > 0.0 || c.adam.weight_decay > 0.0) {
          EXPECT_GT(worst_change_error(d.master, nd_param, p0, lr_sum, kUpdates), 1.0)
              << what << ": the tolerance would not see the weight decay";
        }
        if (c.has_state1()) expect_same_state(d.state1, s1, what + ": momentum buffer / exp_avg");
        if (c.adam_like()) expect_same_state(d.state2, s2, what + ": exp_avg_sq");
        expect_copy_is_rounded_master(d.copy, d.master, what);
      }
    }
  }
}

// --------------------------------------------------------------------------------- per-layer ranges

// The per-layer update's ranges of a flat buffer (cuda_train_plan.cpp's layer_range): one vector, an empty
// range, three vectors, and two spanning 2 and 3 blocks of 512 vectors (256 threads, two vectors each) with
// a partial last block. All but the first start past 0, so the kernel offsets its vectors (first_vector).
const std::vector<FlatRange> kLayerRanges = {{0, 4}, {4, 4}, {4, 16}, {16, 2076}, {2076, 6176}};
constexpr std::int64_t kRangedCount = 6176;

// One launch over a range with advance = false, as the per-layer update runs every layer's but the step's
// last: inside the range, the CPU's update of those elements; outside it, every buffer (weights, state, the
// poisoned compute copy) keeps its bytes, and so does the step state (only advance moves it). The state is
// mid-run: step 2 with one update applied (an fp16 step was skipped), so the learning rate is the table's
// third and Adam's bias correction that of update 2, and the buffers hold earlier state. Then the step's last
// launch, an empty range with advance = true, moves the counters on and writes nothing.
TEST(GpuStepKernels, FlatOptimizerRangeUpdatesItsRangeAndNothingElse) {
  SN_REQUIRE_GPU();
  const std::vector<double> lrs = {0.05, 0.03, 0.01};
  const Tensor lr_table = lr_table_on_gpu(lrs);
  const std::int64_t n = kRangedCount;
  for (const OptimizerCase& c : optimizer_cases()) {
    for (const auto& [grad_type, copy_type] : std::vector<std::pair<DType, DType>>{
             {DType::kF32, DType::kF32}, {DType::kBF16, DType::kBF16}, {DType::kF16, DType::kF16}}) {
      for (const FlatRange r : kLayerRanges) {
        const std::string what =
            fmt::format("{}, {} gradients, range [{}, {})", c.name, dtype_name(grad_type), r.begin, r.end);
        const bool fp16 = grad_type == DType::kF16;
        const float loss_scale = fp16 ? 1024.0f : 1.0f;
        Generator gen(test::test_seed() + 12);
        Tensor param = test::random_uniform({n}, DType::kF32, gen);
        Tensor s1 = test::random_uniform({n}, DType::kF32, gen, -0.1, 0.1);  // a momentum buffer / exp_avg
        Tensor s2 = test::random_uniform({n}, DType::kF32, gen, 0.0, 0.01);  // exp_avg_sq >= 0
        const Tensor p0 = param.clone(), s1_0 = s1.clone(), s2_0 = s2.clone();
        const DeviceBuffers d(param, s1, s2, copy_type, true);
        const Tensor copy0 = d.copy.to(Device::cpu());  // the poison
        const cuda::StepState mid_run{.step = 2, .opt_steps = 1, .loss_scale = loss_scale, .good_steps = 5};
        DeviceValue<cuda::StepState> state(mid_run);
        cuda::FlatOptimizerArgs args = flat_args(c, d, grad_type, copy_type, lr_table, state.get());
        const Gradient g = random_gradient(n, grad_type, loss_scale, gen);
        reference_update(c, param, g.seen, s1, s2, lrs[2], /*update=*/1);
        args.grad = g.stored.raw_data();
        SN_CUDA_CHECK(cuda::launch_flat_optimizer_range(args, r.begin, r.end, /*advance=*/false, gpu_stream()));
        expect_state(state.read(), 2, 1, loss_scale, 5, what + ", advance = false");

        expect_same_bytes_outside(d.master, p0, r, what + ": weights");
        if (c.has_state1()) expect_same_bytes_outside(d.state1, s1_0, r, what + ": momentum buffer / exp_avg");
        if (c.adam_like()) expect_same_bytes_outside(d.state2, s2_0, r, what + ": exp_avg_sq");
        expect_same_bytes_outside(d.copy, copy0, r, what + ": compute copy");
        if (r.begin < r.end) {
          const auto in = [&](const Tensor& t) { return t.slice_rows(r.begin, r.end); };
          expect_same_change(in(d.master), in(param), in(p0), lrs[2], 1, what);
          if (c.has_state1()) expect_same_state(in(d.state1), in(s1), what + ": momentum buffer / exp_avg");
          if (c.adam_like()) expect_same_state(in(d.state2), in(s2), what + ": exp_avg_sq");
          expect_copy_is_rounded_master(in(d.copy), in(d.master), what);
        }

        const Tensor master1 = d.master.to(Device::cpu()), copy1 = d.copy.to(Device::cpu());
        SN_CUDA_CHECK(cuda::launch_flat_optimizer_range(args, n, n, /*advance=*/true, gpu_stream()));
        expect_state(state.read(), 3, 2, loss_scale, fp16 ? 6 : 5, what + ", then an empty range with advance");
        expect_same_bytes_outside(d.master, master1, {0, 0}, what + ": weights after the empty range");
        expect_same_bytes_outside(d.copy, copy1, {0, 0}, what + ": copy after the empty range");
      }
    }
  }
}

// A step of the per-layer update (cuda_train_plan.cpp: each layer's range as soon as its gradient is ready,
// from the last layer to the first, advance only on the first layer's, the step's last launch) is the
// whole-buffer update (launch_flat_optimizer, compared with the CPU above) to the bit: every element goes
// through the same arithmetic with the same step scalars. Four steps through a three-entry table, so a launch
// that advanced the counters early would give the later ranges another learning rate or update count. The
// precisions that update per layer (fp16 updates in one launch, after its finiteness check): fp32 and tf32
// without a compute copy, bf16 with one.
TEST(GpuStepKernels, FlatOptimizerPerLayerRangesMatchTheWholeUpdateBitForBit) {
  SN_REQUIRE_GPU();
  const Tensor lr_table = lr_table_on_gpu({0.05, 0.03, 0.01});
  const std::int64_t n = kRangedCount;
  for (const OptimizerCase& c : optimizer_cases()) {
    for (const DType type : {DType::kF32, DType::kBF16}) {
      const std::string what = fmt::format("{}, {}", c.name, dtype_name(type));
      const bool with_copy = type != DType::kF32;
      Generator gen(test::test_seed() + 13);
      const Tensor param = test::random_uniform({n}, DType::kF32, gen);
      const Tensor zeros = Tensor::zeros({n}, DType::kF32);
      const DeviceBuffers ranged(param, zeros, zeros, type, with_copy), whole(param, zeros, zeros, type, with_copy);
      DeviceValue<cuda::StepState> ranged_state, whole_state;
      cuda::FlatOptimizerArgs ranged_args = flat_args(c, ranged, type, type, lr_table, ranged_state.get());
      cuda::FlatOptimizerArgs whole_args = flat_args(c, whole, type, type, lr_table, whole_state.get());
      for (int step = 0; step < 4; ++step) {
        const Gradient g = random_gradient(n, type, 1.0f, gen);
        ranged_args.grad = whole_args.grad = g.stored.raw_data();
        for (auto r = kLayerRanges.rbegin(); r != kLayerRanges.rend(); ++r) {
          SN_CUDA_CHECK(cuda::launch_flat_optimizer_range(ranged_args, r->begin, r->end, r->begin == 0, gpu_stream()));
        }
        SN_CUDA_CHECK(cuda::launch_flat_optimizer(whole_args, gpu_stream()));
      }
      expect_state(ranged_state.read(), 4, 4, 1.0f, 0, what + ": ranged");
      expect_state(whole_state.read(), 4, 4, 1.0f, 0, what + ": whole");
      expect_same_bytes_outside(ranged.master, whole.master, {0, 0}, what + ": weights, ranged against whole");
      if (c.has_state1()) expect_same_bytes_outside(ranged.state1, whole.state1, {0, 0}, what + ": state1");
      if (c.adam_like()) expect_same_bytes_outside(ranged.state2, whole.state2, {0, 0}, what + ": state2");
      if (with_copy) expect_same_bytes_outside(ranged.copy, whole.copy, {0, 0}, what + ": compute copy");
      EXPECT_GT(test::relative_error(ranged.master.to(Device::cpu()), param), 1e-3) << what << ": nothing was updated";
    }
  }
}

// Ranges are whole vectors of 4 within the buffers; anything else is refused before any launch (so this
// runs without a GPU).
TEST(GpuStepKernels, FlatOptimizerRangeRefusesRangesThatAreNotWholeVectorsInside) {
  cuda::FlatOptimizerArgs args;
  args.count = 16;
  for (const auto& [begin, end] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {2, 8}, {0, 6}, {8, 4}, {0, 20}, {16, 20}, {-4, 8}}) {
    EXPECT_EQ(cuda::launch_flat_optimizer_range(args, begin, end, true, nullptr), cudaErrorInvalidValue)
        << "[" << begin << ", " << end << ")";
  }
  args.count = 6;
  EXPECT_EQ(cuda::launch_flat_optimizer(args, nullptr), cudaErrorInvalidValue) << "a count of 6";
}

// ------------------------------------------------------------------------------- fused Adam, fp16

// flat_update.cuh's adam_update_fast (the fused kernels' Adam step: approximate square root and
// reciprocal, no slow paths) against the CPU's exact Adam step, on random values and on the ones the
// exact step takes its slow paths for: v = 0 (a weight that never gets a gradient), denormal v or
// g^2, a huge gradient; a NaN gradient must give a NaN weight. The approximations' relative error is
// below 2^-22, so the weight's change agrees to 1e-5 of itself (plus an ulp of the weight).
TEST(GpuStepKernels, AdamFastStepFollowsTheCpuAdamOnTheSlowPathsToo) {
  SN_REQUIRE_GPU();
  for (const bool decoupled : {false, true}) {
    for (const std::int64_t t : {std::int64_t{1}, std::int64_t{7}}) {
      const AdamHyper h{.lr = 1e-3, .weight_decay = 1e-2, .decoupled = decoupled, .step = t};
      Generator gen(test::test_seed() + 11);
      const std::int64_t n = 2048;
      Tensor p = test::random_uniform({n}, DType::kF32, gen);
      Tensor g = test::random_uniform({n}, DType::kF32, gen);
      Tensor m = test::random_uniform({n}, DType::kF32, gen, -0.1, 0.1);
      Tensor v = test::random_uniform({n}, DType::kF32, gen, 0.0, 0.01);
      float* pg = g.data<float>();
      float* pm = m.data<float>();
      float* pv = v.data<float>();
      const float nan = std::numeric_limits<float>::quiet_NaN();
      float* pp = p.data<float>();
      for (int i = 0; i < 64; ++i) {  // never a gradient: v and m stay 0
        pg[i] = 0.0f, pm[i] = 0.0f, pv[i] = 0.0f;
        // Adam's coupled weight decay adds weight_decay * p to the gradient: only a zero weight gets
        // none there (a random one gets a step, which the tolerance below covers, not bit-equality).
        if (!decoupled) pp[i] = 0.0f;
      }
      for (int i = 64; i < 128; ++i) pg[i] = 0.0f, pv[i] = 1e-40f;    // denormal v
      for (int i = 128; i < 192; ++i) pg[i] = 1e-20f, pv[i] = 0.0f;   // denormal g^2
      for (int i = 192; i < 256; ++i) pg[i] = 1e10f;                   // huge
      pg[256] = nan;
      const Tensor p0 = p.clone(), m0 = m.clone();
      Tensor d_p = p.to(gpu()), d_g = g.to(gpu()), d_m = m.to(gpu()), d_v = v.to(gpu());
      ops::adam_step(p, g, m, v, h);
      const cuda::FlatOptimizerArgs args{
          .kind = decoupled ? cuda::FlatOptimizerKind::kAdamW : cuda::FlatOptimizerKind::kAdam,
          .weight_decay = static_cast<float>(h.weight_decay), .beta1 = static_cast<float>(h.beta1),
          .beta2 = static_cast<float>(h.beta2), .eps = static_cast<float>(h.eps), .beta1_d = h.beta1,
          .beta2_d = h.beta2, .weight_decay_d = h.weight_decay};
      const double beta1_t = std::pow(h.beta1, static_cast<double>(t)), beta2_t = std::pow(h.beta2, static_cast<double>(t));
      test::adam_update_fast_on_gpu(args, h.lr, beta1_t, beta2_t, d_p.data<float>(), d_g.data<float>(),
                                    d_m.data<float>(), d_v.data<float>(), static_cast<int>(n));
      const Tensor gp = d_p.to(Device::cpu()), gm = d_m.to(Device::cpu()), gv = d_v.to(Device::cpu());
      const std::string where = fmt::format("{} t={}", decoupled ? "adamw" : "adam", t);
      EXPECT_TRUE(std::isnan(gp.data<float>()[256])) << where << ": a NaN gradient leaves a NaN weight";
      for (std::int64_t i = 0; i < n; ++i) {
        if (i == 256) continue;
        // m = beta1 m + (1 - beta1) g rounds once (a fused multiply-add) on the GPU, twice on the CPU:
        // they differ by an ulp of the terms, which cancel where m is near zero; that difference
        // reaches the weight through step_size * m / denom.
        const double g_eff = pg[i] + (decoupled ? 0.0 : h.weight_decay * p0.data<float>()[i]);
        const double m_tol = 2.4e-7 * (h.beta1 * std::fabs(m0.data<float>()[i]) + (1.0 - h.beta1) * std::fabs(g_eff));
        const double denom = std::sqrt(v.data<float>()[i]) / std::sqrt(1.0 - beta2_t) + h.eps;
        const double want = p.data<float>()[i], got = gp.data<float>()[i];
        const double change = std::fabs(want - p0.data<float>()[i]);
        const double p_tol = 1e-5 * change + 1.2e-7 * std::fabs(want) + h.lr / (1.0 - beta1_t) * m_tol / denom;
        ASSERT_LE(std::fabs(got - want), p_tol) << where << " element " << i;
        ASSERT_LE(std::fabs(gm.data<float>()[i] - m.data<float>()[i]), m_tol) << where << " m, element " << i;
        ASSERT_LE(std::fabs(gv.data<float>()[i] - v.data<float>()[i]), 2.4e-7 * std::fabs(v.data<float>()[i]) + 1e-44)
            << where << " v, element " << i;
      }
      // No gradient: v = 0 on both sides, the step is exactly zero (AdamW: the weight only decays, by the
      // same float factor), so the weights agree to the bit.
      for (int i = 0; i < 64; ++i) EXPECT_EQ(gp.data<float>()[i], p.data<float>()[i]) << where << ": no gradient";
    }
  }
}

TEST(GpuStepKernels, Fp16LossScalingSkipsANonFiniteStepAndHalvesTheScale) {
  SN_REQUIRE_GPU();
  const std::int64_t count = 64;
  const Tensor param = Tensor::full({count}, 1.0, DType::kF32, gpu());
  std::vector<float> g(static_cast<std::size_t>(count), 512.0f);  // scaled by 256 → 2 after unscaling
  const Tensor grad = Tensor::from_vector(g, {count}, gpu());
  const Tensor lr = Tensor::from_vector(std::vector<double>{0.25}, {1}, gpu());
  DeviceValue<cuda::StepState> state({.loss_scale = 256.0f});
  DeviceValue<cuda::StepMetrics> metrics;
  const auto update = [&] {
    SN_CUDA_CHECK(
        cuda::launch_check_finite(grad.data<float>(), cuda::ElementType::kF32, count, state.get(), gpu_stream()));
    const cuda::FlatOptimizerArgs args{.kind = cuda::FlatOptimizerKind::kSgd, .master = param.data<float>(),
                                       .grad = grad.data<float>(), .count = count, .lr_table = lr.data<double>(),
                                       .lr_table_size = 1, .state = state.get(), .check_finite = true,
                                       .metrics = metrics.get()};
    SN_CUDA_CHECK(cuda::launch_flat_optimizer(args, gpu_stream()));
  };
  update();  // finite: p = 1 - 0.25 * 512 / 256 = 0.5
  EXPECT_EQ(param.to(Device::cpu()).to_vector<float>()[5], 0.5f);
  g[17] = INFINITY;
  ops::copy(grad, Tensor::from_vector(g, {count}, gpu()));
  update();  // skipped: p stays, the scale halves
  const cuda::StepState after = state.read();
  EXPECT_EQ(param.to(Device::cpu()).to_vector<float>()[5], 0.5f);
  EXPECT_EQ(after.loss_scale, 128.0f);
  EXPECT_EQ(after.step, 2);
  EXPECT_EQ(after.opt_steps, 1);
  EXPECT_EQ(after.found_inf, 0);
  EXPECT_EQ(metrics.read().skipped, 1);
}

// fp16's dynamic loss scale as torch.amp.GradScaler keeps it (advance_step_state, flat_update.cuh), with Adam,
// fp16 gradients times the scale of their step, and the CPU's Adam on the unscaled ones. A gradient that
// overflowed fp16 skips the update: weights, moments and copy keep their bits and the update count stays, so
// the next update's bias correction is the second's while its learning rate is step 2's; the scale halves and
// the count of good steps restarts. 2000 good steps in a row (GradScaler's growth interval) double it: not
// 1999, and not 2000 counted across the skip.
TEST(GpuStepKernels, Fp16LossScaleHalvesOnAnOverflowAndDoublesAfter2000GoodSteps) {
  SN_REQUIRE_GPU();
  const OptimizerCase c{cuda::FlatOptimizerKind::kAdam, {}, {.weight_decay = 1e-2}, "adam"};
  const std::vector<double> lrs = {1e-3, 2e-3, 3e-3};
  const Tensor lr_table = lr_table_on_gpu(lrs);
  const std::int64_t count = 68;
  Generator gen(test::test_seed() + 14);
  Tensor param = test::random_uniform({count}, DType::kF32, gen);
  Tensor s1 = Tensor::zeros({count}, DType::kF32), s2 = Tensor::zeros({count}, DType::kF32);
  const Tensor p0 = param.clone();
  const DeviceBuffers d(param, s1, s2, DType::kF16, true);
  DeviceValue<cuda::StepState> state({.loss_scale = 1024.0f});
  DeviceValue<cuda::StepMetrics> metrics;
  cuda::FlatOptimizerArgs args = flat_args(c, d, DType::kF16, DType::kF16, lr_table, state.get());
  args.metrics = metrics.get();
  const auto step = [&](const Tensor& grad) {  // as the plan's fp16 step: the check, then the update
    args.grad = grad.raw_data();
    SN_CUDA_CHECK(cuda::launch_check_finite(args.grad, args.grad_type, count, state.get(), gpu_stream()));
    SN_CUDA_CHECK(cuda::launch_flat_optimizer(args, gpu_stream()));
  };

  const Gradient g0 = random_gradient(count, DType::kF16, 1024.0f, gen);
  reference_update(c, param, g0.seen, s1, s2, lrs[0], 0);
  step(g0.stored);
  expect_state(state.read(), 1, 1, 1024.0f, 1, "after a good step");

  std::vector<float> overflowing = test::random_uniform({count}, DType::kF32, gen).to_vector<float>();
  overflowing[33] = 100.0f;  // x 1024 is past fp16's largest finite value (65504): stored as infinity
  const Gradient g1 = gradient_of(overflowing, DType::kF16, 1024.0f);
  ASSERT_TRUE(std::isinf(g1.stored.to_vector<float>()[33]));
  const Tensor master1 = d.master.to(Device::cpu()), m1 = d.state1.to(Device::cpu()), v1 = d.state2.to(Device::cpu()),
               copy1 = d.copy.to(Device::cpu());
  step(g1.stored);
  expect_state(state.read(), 2, 1, 512.0f, 0, "after an overflow");
  EXPECT_EQ(metrics.read().skipped, 1);
  expect_same_bytes_outside(d.master, master1, {0, 0}, "weights over a skipped update");
  expect_same_bytes_outside(d.state1, m1, {0, 0}, "exp_avg over a skipped update");
  expect_same_bytes_outside(d.state2, v1, {0, 0}, "exp_avg_sq over a skipped update");
  expect_same_bytes_outside(d.copy, copy1, {0, 0}, "compute copy over a skipped update");

  const Gradient g2 = random_gradient(count, DType::kF16, 512.0f, gen);  // scaled by the halved scale
  reference_update(c, param, g2.seen, s1, s2, lrs[2], 1);
  step(g2.stored);
  expect_state(state.read(), 3, 2, 512.0f, 1, "after the skip, a good step");
  expect_same_change(d.master, param, p0, lrs[0] + lrs[2], 2, "Adam around a skipped update");
  expect_same_state(d.state1, s1, "exp_avg around a skipped update");
  expect_same_state(d.state2, s2, "exp_avg_sq around a skipped update");
  expect_copy_is_rounded_master(d.copy, d.master, "fp16 copy");

  for (int i = 0; i < 1998; ++i) step(g2.stored);  // 1999 good steps since the skip (2001 in all)
  expect_state(state.read(), 2001, 2000, 512.0f, 1999, "1999 good steps after the skip");
  step(g2.stored);
  expect_state(state.read(), 2002, 2001, 1024.0f, 0, "2000 good steps after the skip");
  EXPECT_EQ(metrics.read().skipped, 1);
  EXPECT_TRUE(test::all_finite(d.master));
}

// launch_check_finite sets found_inf for an infinite or NaN gradient anywhere in the buffer (the first
// element, one in the middle, the last of an odd count), in each element type; finite extremes (the type's
// largest value, its smallest subnormal) leave it clear, and it never clears a flag already set (the
// update's last block does).
TEST(GpuStepKernels, CheckFiniteFlagsEveryNonFiniteGradientInEveryElementType) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 15);
  const std::int64_t count = 4099;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const DType type : kElementTypes) {
    const float largest = type == DType::kF16    ? 65504.0f
                          : type == DType::kBF16 ? std::bit_cast<float>(0x7F7F0000u)
                                                 : std::numeric_limits<float>::max();
    const float smallest = type == DType::kF16    ? std::ldexp(1.0f, -24)
                           : type == DType::kBF16 ? std::bit_cast<float>(0x00010000u)
                                                  : std::numeric_limits<float>::denorm_min();
    std::vector<float> finite = test::random_uniform({count}, DType::kF32, gen, -1e3, 1e3).to_vector<float>();
    finite[7] = largest;
    finite[8] = -largest;
    finite[9] = smallest;
    finite[10] = -smallest;
    const auto check = [&](const std::vector<float>& values, std::int32_t found_before) {
      const Tensor grad = Tensor::from_vector(values, {count}).to(type);
      const Tensor d_grad = grad.to(gpu());
      DeviceValue<cuda::StepState> state({.found_inf = found_before});
      SN_CUDA_CHECK(cuda::launch_check_finite(d_grad.raw_data(), element_type(type), count, state.get(), gpu_stream()));
      return std::pair{state.read().found_inf, test::all_finite(grad)};
    };
    const auto [clear, really_finite] = check(finite, 0);
    ASSERT_TRUE(really_finite) << dtype_name(type) << ": the extremes must stay finite in the type";
    EXPECT_EQ(clear, 0) << dtype_name(type) << ": all finite";
    EXPECT_EQ(check(finite, 1).first, 1) << dtype_name(type) << ": a flag already set stays set";
    for (const std::int64_t at : {std::int64_t{0}, std::int64_t{2050}, count - 1}) {
      for (const float bad : {inf, -inf, nan}) {
        std::vector<float> values = finite;
        values[static_cast<std::size_t>(at)] = bad;
        EXPECT_EQ(check(values, 0).first, 1) << dtype_name(type) << ": " << bad << " at " << at;
      }
    }
  }
  DeviceValue<cuda::StepState> state;
  SN_CUDA_CHECK(cuda::launch_check_finite(nullptr, cuda::ElementType::kF16, 0, state.get(), gpu_stream()));
  EXPECT_EQ(state.read().found_inf, 0) << "an empty buffer";
}

}  // namespace
}  // namespace sprintnet
