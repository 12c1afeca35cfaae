// The output layer's kernels (ops/cuda/skinny_layer.cu, skinny_mma.cu) in the modes the compiled step
// runs and SkinnyOutputLayerMatchesTheCpu (gpu_step_kernels_test.cpp) does not reach: no bias; the
// loss scale read from the step state; rows gathered straight from the data set; the optimizer step
// fused into the weight gradient; the forward's sums left to the weight-gradient kernel (RowSums, the
// forward with no metrics); the input gradient with no ReLU below. Each against the CPU in fp64 on fresh
// random inputs with outputs poisoned, and, where two launches must do the same sums in the same order,
// against the other launch to the bit.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "sprintnet/core/random.h"
#include "sprintnet/ops/ops.h"
#include "sprintnet/train/padded_parameters.h"
#include "step_kernel_util.h"
#include "support/test_util.h"

namespace sprintnet {
namespace {

using test::DeviceValue;
using test::gpu;
using test::gpu_stream;

struct LayerShape {
  std::int64_t rows, in;
  int classes;
};

// Shapes that take each kernel variant (the launchers in skinny_layer.cu): below 256 K rows x inputs the
// narrow FMA kernels (32 classes: their kC = 32 build); {1000, 784} the wide ones (four-at-a-time loads,
// the weight gradient in slices of rows); {2048, 784} in 16 bits the tensor cores (the forward from 1024
// rows, the bf16 weight gradient, the bf16 input gradient from 2048 rows).
const std::vector<LayerShape> kShapes = {{128, 784, 10}, {37, 100, 32}, {1000, 784, 10}, {2048, 784, 10}};
const std::vector<DType> kTypes = {DType::kF32, DType::kBF16, DType::kF16};

// skinny_layer.cu's wide() is false: every mode runs the same narrow kernel, so their sums agree to the bit.
bool narrow(const LayerShape& s) { return s.rows * s.in < 256 * 1024; }

std::string describe(const LayerShape& s, DType type) {
  return fmt::format("{}x{}x{} {}", s.rows, s.in, s.classes, dtype_name(type));
}

Tensor poisoned_on_gpu(const Shape& shape, DType type) { return test::poisoned(shape, type).to(gpu()); }

std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }

// SkinnyOutputLayerMatchesTheCpu's bounds, which it derives: the fp32 sums run in another order than
// fp64's; in 16 bits a logit within its fp32 error of a rounding boundary may also round the other way
// (a step of 2^-8 relative in bf16, 2^-11 in fp16), which moves its softmax term and can swap a near tie
// in the hits; a gradient stored in the type is rounded once more.
struct Bounds {
  double loss;          // relative
  double hits;          // how many may differ
  double dlogits_atol;  // times the gradient's scale
  double dlogits_rtol;
  double rounding;  // relative, of a gradient stored in the type
};
Bounds bounds(DType type, std::int64_t rows) {
  const bool fp16 = type == DType::kF16, sixteen = type != DType::kF32;
  return {.loss = fp16 ? 2e-4 : sixteen ? 1e-3 : 1e-5,
          .hits = sixteen ? 1.0 + static_cast<double>(rows) / 500.0 : 0.0,
          .dlogits_atol = fp16 ? 0.004 : sixteen ? 0.02 : 1e-6,
          .dlogits_rtol = sixteen ? 1e-3 : 1e-4,
          .rounding = fp16 ? 1e-3 : sixteen ? 5e-3 : 1e-4};
}

// A layer's operands in its type (the oracle reads the same rounded values in fp64).
struct Operands {
  Tensor x, w, b, labels;
  Operands to_gpu() const { return {x.to(gpu()), w.to(gpu()), b.to(gpu()), labels.to(gpu())}; }
};
Operands random_operands(const LayerShape& s, DType type, Generator& gen) {
  return {test::random_uniform({s.rows, s.in}, DType::kF32, gen, 0.0, 1.0).to(type),  // a ReLU's output
          test::random_uniform({s.classes, s.in}, DType::kF32, gen, -0.1, 0.1).to(type),
          test::random_uniform({s.classes}, DType::kF32, gen).to(type), test::random_labels(s.rows, s.classes, gen)};
}

// The forward's scratch: a loss and a hit a row (poisoned, so a row it does not write shows in the sums)
// and its counter of finished blocks (zero between launches).
struct Scratch {
  std::int64_t rows;
  Tensor loss, hits, blocks_done;
  explicit Scratch(std::int64_t r)
      : rows(r), blocks_done(Tensor::zeros({4}, DType::kU8, gpu())) {
    poison();
  }
  void poison() {
    loss = poisoned_on_gpu({cuda::skinny_forward_blocks(rows)}, DType::kF64);
    hits = poisoned_on_gpu({cuda::skinny_forward_blocks(rows) * 8}, DType::kU8);  // 0x5A bytes
  }
  cuda::SkinnyForwardArgs fill(cuda::SkinnyForwardArgs a) const {
    a.block_loss = loss.data<double>();
    a.block_correct = static_cast<long long*>(hits.raw_data());
    a.blocks_done = static_cast<std::uint32_t*>(blocks_done.raw_data());
    return a;
  }
  cuda::RowSums sums(cuda::StepMetrics* metrics, double loss_weight) const {
    return {.loss = loss.data<double>(), .correct = static_cast<const long long*>(hits.raw_data()), .rows = rows,
            .metrics = metrics, .loss_weight = loss_weight};
  }
  std::uint32_t counter() const {
    const Tensor host = blocks_done.to(Device::cpu());
    std::uint32_t v = 0;
    std::memcpy(&v, host.raw_data(), sizeof(v));
    return v;
  }
};

// The training forward over `g` with its bias, gradient scale 1/rows, no state and no metrics: each test
// changes what it is about.
cuda::SkinnyForwardArgs forward_args(const Operands& g, const LayerShape& s, DType type, const Scratch& scratch,
                                     const Tensor& dlogits) {
  const double weight = 1.0 / static_cast<double>(s.rows);
  return scratch.fill({.x = g.x.raw_data(), .w = g.w.raw_data(), .bias = g.b.raw_data(),
                       .type = test::element_type(type), .rows = s.rows, .in = s.in, .classes = s.classes,
                       .labels = g.labels.data<std::int32_t>(), .smoothing = 0.0f, .dlogits = dlogits.data<float>(),
                       .grad_scale = static_cast<float>(weight), .state = nullptr, .block_loss = nullptr,
                       .block_correct = nullptr, .blocks_done = nullptr, .metrics = nullptr, .loss_weight = weight});
}

struct ForwardReference {
  double loss = 0.0, hits = 0.0;
  Tensor dlogits;
};
// The CPU in fp64 on the values the kernels read: logits = x w^T (+ b), rounded to the type in 16 bits as
// the kernels round them; the cross-entropy's loss times 1/rows, its hits, its gradient times grad_scale.
ForwardReference cpu_forward(const Operands& h, bool bias, DType type, double smoothing, double grad_scale) {
  const std::int64_t rows = h.x.size(0), classes = h.w.size(0);
  Tensor logits = Tensor::empty({rows, classes}, DType::kF64);
  ops::gemm(test::oracle_copy(h.x), false, test::oracle_copy(h.w), true, logits);
  if (bias) ops::add_bias(logits, test::oracle_copy(h.b));
  if (type != DType::kF32) logits = test::oracle_copy(logits.to(type));
  ForwardReference ref{.dlogits = Tensor::empty({rows, classes}, DType::kF64)};
  const Tensor loss = Tensor::zeros({1}, DType::kF64);
  ops::cross_entropy(logits, h.labels, smoothing, loss, 1.0 / static_cast<double>(rows), &ref.dlogits, grad_scale);
  const Tensor hits = Tensor::zeros({1}, DType::kI32);
  ops::count_correct(logits, h.labels, hits);
  ref.loss = loss.item();
  ref.hits = hits.item();
  return ref;
}

// The forward's sums (added to metrics that started at `start`) and its gradient against the CPU's.
void expect_forward(const cuda::StepMetrics& got, const Tensor& dlogits, const ForwardReference& ref, const Bounds& b,
                    double grad_scale, const std::string& what, const cuda::StepMetrics& start = {}) {
  EXPECT_NEAR(got.loss_sum - start.loss_sum, ref.loss, b.loss * ref.loss) << what;
  EXPECT_NEAR(static_cast<double>(got.correct - start.correct), ref.hits, b.hits) << what;
  test::expect_allclose(dlogits, ref.dlogits, b.dlogits_atol * grad_scale, b.dlogits_rtol, "dlogits " + what);
}

void expect_same_sums(const cuda::StepMetrics& got, const cuda::StepMetrics& want, const std::string& what) {
  EXPECT_EQ(got.loss_sum, want.loss_sum) << what << ": the loss sum is not the same to the bit";
  EXPECT_EQ(got.correct, want.correct) << what;
}

struct GradReference {
  Tensor dw, db;
};
// dW = dlogits^T x and the bias gradient in fp64, from the GPU's own dlogits: only the kernel's sums are measured.
GradReference cpu_weight_grad(const Tensor& dlogits, const Tensor& x) {
  const Tensor g = test::oracle_copy(dlogits);
  GradReference r{Tensor::empty({g.size(1), x.size(1)}, DType::kF64), Tensor::empty({g.size(1)}, DType::kF64)};
  ops::gemm(g, true, test::oracle_copy(x), false, r.dw);
  ops::sum_rows(g, r.db);
  return r;
}
// Sums of `rows` terms of size ~1/rows in fp32: ~1e-6 absolute; then one rounding to the type.
void expect_weight_grad(const Tensor& dw, const Tensor* db, const GradReference& ref, const Bounds& b,
                        const std::string& what) {
  test::expect_allclose(dw, ref.dw, 1e-6, b.rounding, "dW " + what);
  if (db != nullptr) test::expect_allclose(*db, ref.db, 1e-6, b.rounding, "bias gradient " + what);
}

// The sliced weight gradient's scratch (skinny_weight_grad_split): counters zero, partial sums poisoned.
struct SplitScratch {
  cuda::SkinnySplit plan;
  Tensor partials, counters;
  SplitScratch(std::int64_t rows, std::int64_t in)
      : plan(cuda::skinny_weight_grad_split(rows, in)),
        partials(test::poisoned({std::max<std::int64_t>(plan.scratch_floats, 1)}, DType::kF32, gpu())),
        counters(Tensor::zeros({plan.groups}, DType::kI32, gpu())) {}
  // Whole (one slice), or in the plan's slices.
  cuda::SkinnyScratch get(bool sliced) const {
    if (!sliced) return {};
    return {.partials = partials.data<float>(), .counters = static_cast<std::uint32_t*>(counters.raw_data())};
  }
  std::vector<bool> ways() const { return plan.splits > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false}; }
};

// ------------------------------------------------------------------------------------------ no bias

TEST(SkinnyLayerModes, WithoutABiasTheLayerIsTheCpusProduct) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 101);
  for (const DType type : kTypes) {
    for (const LayerShape& s : kShapes) {
      const std::string what = describe(s, type) + ", no bias";
      const Operands h = random_operands(s, type, gen), g = h.to_gpu();
      const double weight = 1.0 / static_cast<double>(s.rows);
      const Bounds b = bounds(type, s.rows);
      const Scratch scratch(s.rows);
      DeviceValue<cuda::StepMetrics> metrics;
      const Tensor dlogits = poisoned_on_gpu({s.rows, s.classes}, DType::kF32);
      cuda::SkinnyForwardArgs args = forward_args(g, s, type, scratch, dlogits);
      args.bias = nullptr;
      args.metrics = metrics.get();
      SN_CUDA_CHECK(cuda::launch_skinny_forward_cross_entropy(args, gpu_stream()));
      expect_forward(metrics.read(), dlogits, cpu_forward(h, false, type, 0.0, weight), b, weight, what);

      // dW with no bias gradient asked for: whole, and in slices where the shape is wide.
      const GradReference ref = cpu_weight_grad(dlogits, h.x);
      const SplitScratch split(s.rows, s.in);
      for (const bool sliced : split.ways()) {
        const Tensor dw = poisoned_on_gpu({s.classes, s.in}, type);
        SN_CUDA_CHECK(cuda::launch_skinny_weight_grad(dlogits.data<float>(), s.classes, g.x.raw_data(),
                                                      test::element_type(type), s.rows, s.in, dw.raw_data(), nullptr,
                                                      gpu_stream(), nullptr, nullptr, nullptr, split.get(sliced)));
        expect_weight_grad(dw, nullptr, ref, b, what + (sliced ? " in slices" : " whole"));
      }
    }
  }
}

// ------------------------------------------------------------------------------------- loss scale

// Every training step passes the step state; fp16's dynamic loss scale lives there (a power of two, from
// 2^16 down as torch.amp's GradScaler keeps it). A power of two scales a product exactly, so the scaled
// gradient is the unscaled one times the scale, to the bit, and the loss and the hits do not see it.
TEST(SkinnyLayerModes, TheLossScaleComesFromTheStepState) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 102);
  for (const DType type : kTypes) {
    for (const LayerShape& s : kShapes) {
      const float loss_scale = std::ldexp(1.0f, 4 + static_cast<int>(gen.below(13)));  // 2^4 .. 2^16
      const std::string what = describe(s, type) + fmt::format(", loss scale {}", loss_scale);
      const Operands h = random_operands(s, type, gen), g = h.to_gpu();
      const double weight = 1.0 / static_cast<double>(s.rows);
      const Scratch scratch(s.rows);
      DeviceValue<cuda::StepState> state({.loss_scale = loss_scale});
      DeviceValue<cuda::StepMetrics> plain_metrics, scaled_metrics;
      const Tensor plain = poisoned_on_gpu({s.rows, s.classes}, DType::kF32);
      const Tensor scaled = poisoned_on_gpu({s.rows, s.classes}, DType::kF32);
      cuda::SkinnyForwardArgs args = forward_args(g, s, type, scratch, plain);
      args.metrics = plain_metrics.get();
      SN_CUDA_CHECK(cuda::launch_skinny_forward_cross_entropy(args, gpu_stream()));
      args.dlogits = scaled.data<float>();
      args.state = state.get();
      args.metrics = scaled_metrics.get();
      SN_CUDA_CHECK(cuda::launch_skinny_forward_cross_entropy(args, gpu_stream()));

      const std::vector<float> p = plain.to(Device::cpu()).to_vector<float>();
      const std::vector<float> q = scaled.to(Device::cpu()).to_vector<float>();
      for (std::size_t i = 0; i < p.size(); ++i) {
        ASSERT_EQ(q[i], p[i] * loss_scale) << what << ": element " << i << " is not the unscaled one times the scale";
      }
      const cuda::StepMetrics got = scaled_metrics.read();
      expect_same_sums(got, plain_metrics.read(), what);
      expect_forward(got, scaled, cpu_forward(h, true, type, 0.0, weight * loss_scale), bounds(type, s.rows),
                     weight * loss_scale, what);
    }
  }
}

// ----------------------------------------------------------------------------------- gathered rows

// A lone output layer reads its batch straight from the uint8 data set (SkinnyForwardArgs::gathered, and
// the weight gradient's `source`), "normalised and rounded exactly as launch_gather_batch would": here
// rank 1's share of a 2-GPU step (first = rows, stride = the global batch), a normalisation whose
// products round (1/255, shifted to [-0.5, 0.5]: logits as small as the other tests'), and label smoothing
// as the default model runs it. x and the labels are passed as null: only the source may
// be read. On the narrow shapes the stored-input launches run the same kernel on launch_gather_batch's
// output, so the two agree to the bit; every shape is checked against the CPU on that output.
TEST(SkinnyLayerModes, GatheredRowsAreTheGatherKernelsRows) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 103);
  const std::int64_t world = 2, rank = 1, steps_per_epoch = 3;
  const float smoothing = 0.1f;
  for (const DType type : kTypes) {
    for (const LayerShape& s : {LayerShape{128, 784, 10}, LayerShape{37, 100, 32}, LayerShape{1024, 784, 10}}) {
      const std::string what = describe(s, type) + ", gathered";
      const cuda::ElementType element = test::element_type(type);
      const std::int64_t n = steps_per_epoch * world * s.rows + 7;
      const Dataset data = test::random_dataset("skinny", n, s.in, s.classes, gen);
      const Tensor images = data.images.to(gpu()), all_labels = data.labels.to(gpu());
      const Tensor order = Tensor::from_vector(epoch_permutation(test::test_seed(), 2, n), {n}, gpu());
      // The second epoch, not its first batch.
      DeviceValue<cuda::StepState> state({.step = steps_per_epoch + 1 + static_cast<std::int64_t>(gen.below(2))});
      const Tensor x = poisoned_on_gpu({s.rows, s.in}, type), labels = poisoned_on_gpu({s.rows}, DType::kI32);
      cuda::GatherArgs source{.images = images.data<std::uint8_t>(), .labels = all_labels.data<std::int32_t>(),
                              .features = s.in, .order = order.data<std::int32_t>(), .state = state.get(),
                              .steps_per_epoch = steps_per_epoch, .first = rank * s.rows, .rows = s.rows,
                              .scale = 1.0f / 255.0f, .shift = -0.5f, .dst = x.raw_data(), .dst_type = element,
                              .dst_labels = labels.data<std::int32_t>(), .stride = world * s.rows};
      SN_CUDA_CHECK(cuda::launch_gather_batch(source, gpu_stream()));
      source.dst = nullptr;  // the gathered launches must not need them
      source.dst_labels = nullptr;

      Operands h = random_operands(s, type, gen);
      h.x = x.to(Device::cpu());
      h.labels = labels.to(Device::cpu());
      const Operands g = h.to_gpu();
      const double weight = 1.0 / static_cast<double>(s.rows);
      const Bounds b = bounds(type, s.rows);
      const Scratch scratch(s.rows);
      DeviceValue<cuda::StepMetrics> stored_metrics, gathered_metrics;
      const Tensor stored = poisoned_on_gpu({s.rows, s.classes}, DType::kF32);
      const Tensor gathered = poisoned_on_gpu({s.rows, s.classes}, DType::kF32);
      cuda::SkinnyForwardArgs args = forward_args(g, s, type, scratch, stored);
      args.smoothing = smoothing;
      args.metrics = stored_metrics.get();
      SN_CUDA_CHECK(cuda::launch_skinny_forward_cross_entropy(args, gpu_stream()));
      args.x = nullptr;
      args.labels = nullptr;
      args.dlogits = gathered.data<float>();
      args.metrics = gathered_metrics.get();
      args.gathered = true;
      args.source = source;
      SN_CUDA_CHECK(cuda::launch_skinny_forward_cross_entropy(args, gpu_stream()));
      const cuda::StepMetrics got = gathered_metrics.read();
      expect_forward(got, gathered, cpu_forward(h, true, type, smoothing, weight), b, weight, what);
      if (narrow(s)) {
        test::expect_bit_identical(gathered, stored, what + ": dlogits, gathered and stored");
        expect_same_sums(got, stored_metrics.read(), what + ", gathered and stored");
      }

      const GradReference ref = cpu_weight_grad(gathered, h.x);
      const Tensor dw_stored = poisoned_on_gpu({s.classes, s.in}, type), db_stored = poisoned_on_gpu({s.classes}, type);
      const Tensor dw = poisoned_on_gpu({s.classes, s.in}, type), db = poisoned_on_gpu({s.classes}, type);
      SN_CUDA_CHECK(cuda::launch_skinny_weight_grad(gathered.data<float>(), s.classes, g.x.raw_data(), element, s.rows,
                                                    s.in, dw_stored.raw_data(), db_stored.raw_data(), gpu_stream()));
      SN_CUDA_CHECK(cuda::launch_skinny_weight_grad(gathered.data<float>(), s.classes, nullptr, element, s.rows, s.in,
                                                    dw.raw_data(), db.raw_data(), gpu_stream(), &source));
      expect_weight_grad(dw, &db, ref, b, what);
      if (narrow(s)) {
        test::expect_bit_identical(dw, dw_stored, what + ": dW, gathered and stored");
        test::expect_bit_identical(db, db_stored, what + ": bias gradient, gathered and stored");
      }
    }
  }
}

// -------------------------------------------------------------------------------- the fused update

struct UpdateCase {
  const char* name;
  OptimConfig optim;  // what a config gives the plan (its lr: the table's below)
  double lr[2];       // the two steps' learning rates
};
const std::vector<UpdateCase> kUpdates = {
    {"sgd", {.type = "sgd", .momentum = 0.0, .weight_decay = 1e-3}, {0.5, 0.25}},
    {"sgd momentum", {.type = "sgd", .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-3}, {0.5, 0.25}},
    {"sgd nesterov", {.type = "sgd", .momentum = 0.9, .nesterov = true, .weight_decay = 1e-2}, {0.5, 0.25}},
    {"adam", {.type = "adam", .weight_decay = 1e-2}, {1e-2, 5e-3}},
    {"adamw", {.type = "adamw", .weight_decay = 0.1}, {1e-2, 5e-3}},
};

using Regions = std::vector<std::pair<std::int64_t, std::int64_t>>;  // [begin, end) of the layer's parameters

// The CPU's step `step` (ops::sgd_step / adam_step, in fp64) on the layer's regions of flat buffers.
void cpu_step(const UpdateCase& u, int step, const Regions& regions, const Tensor& p, const Tensor& grad,
              const Tensor& s1, const Tensor& s2) {
  const OptimConfig& o = u.optim;
  for (const auto& [begin, end] : regions) {
    const Tensor pr = p.slice_rows(begin, end), gr = grad.slice_rows(begin, end);
    const Tensor s1r = s1.slice_rows(begin, end), s2r = s2.slice_rows(begin, end);
    if (o.type == "sgd") {
      const SgdHyper h{.lr = u.lr[step], .momentum = o.momentum, .dampening = o.dampening,
                       .weight_decay = o.weight_decay, .nesterov = o.nesterov, .first_step = step == 0};
      ops::sgd_step(pr, gr, h.momentum > 0.0 ? &s1r : nullptr, h);
    } else {
      const AdamHyper h{.lr = u.lr[step], .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps,
                        .weight_decay = o.weight_decay, .decoupled = o.type == "adamw", .step = step + 1};
      ops::adam_step(pr, gr, s1r, s2r, h);
    }
  }
}

// ||a - b|| / ||scale|| over the regions (scale: b - before for the weights, an error against the update's size).
double region_error(const std::vector<double>& a, const std::vector<double>& b, const std::vector<double>& scale,
                    const Regions& regions) {
  double diff = 0.0, norm = 0.0;
  for (const auto& [begin, end] : regions) {
    for (auto i = static_cast<std::size_t>(begin); i < static_cast<std::size_t>(end); ++i) {
      diff += (a[i] - b[i]) * (a[i] - b[i]);
      norm += scale[i] * scale[i];
    }
  }
  return std::isnan(diff) ? INFINITY : std::sqrt(diff) / std::max(std::sqrt(norm), 1e-300);
}
std::vector<double> minus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> d(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}
bool inside(std::int64_t i, const Regions& regions) {
  return std::any_of(regions.begin(), regions.end(), [&](const auto& r) { return i >= r.first && i < r.second; });
}
// Elements outside the layer keep their bits (a buffer of the other parameters the update must not touch).
void expect_outside_unchanged(const Tensor& before, const Tensor& after, const Regions& regions,
                              const std::string& what) {
  const Tensor a = before.to(Device::cpu()), b = after.to(Device::cpu());
  const std::size_t bytes = dtype_size(a.dtype());
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    if (inside(i, regions)) continue;
    ASSERT_EQ(std::memcmp(static_cast<const char*>(a.raw_data()) + i * bytes,
                          static_cast<const char*>(b.raw_data()) + i * bytes, bytes),
              0)
        << what << ": element " << i << ", outside the layer, changed";
  }
}

// The lone output layer's step with the update fused into its weight gradient (cuda_train_plan.cpp,
// enqueue_step: fp32 or bf16, gathered input, RowSums), two steps, against the same step done apart: the
// weight-gradient kernel storing its gradient (the same sums, so the same values), and the CPU's
// optimizer in fp64 applying it. The flat buffers are laid out as the plan does (parameters 128
// elements apart) with other parameters before and after the layer, which must keep their bits.
// fp32 against fp64 leaves a few ulp of each weight (|w| <= 0.2: ~3e-8) against updates of ~1e-2
// (SGD: lr 0.5 times gradients ~0.02; Adam: ~lr): ~3e-6 of the update at worst (a simulation of these
// cases measured 2e-7), bound 1e-5. The gradient's rounding to bf16 (2^-9 relative, ~1e-3 of the update)
// is far above it: the reference fed the unrounded gradient must miss the bound, which the SGD bf16
// cases check (the simulation: 1.4e-3 to 2e-3). The moments and momentum buffers, fp32 against fp64
// for two steps: 1e-5 of their norm.
void check_fused_update(const UpdateCase& u, DType type, const LayerShape& s, bool gathered, bool bias,
                        Generator& gen) {
  const std::string what = fmt::format("{}, {}{}{}", u.name, describe(s, type), gathered ? ", gathered" : "",
                                       bias ? "" : ", no bias");
  const cuda::ElementType element = test::element_type(type);
  const bool sixteen = type != DType::kF32;
  const bool adam = u.optim.type != "sgd";
  const bool momentum = adam || u.optim.momentum > 0.0;
  const double weight = 1.0 / static_cast<double>(s.rows);

  constexpr std::int64_t kAlign = 128;
  const std::int64_t weight_offset = kAlign, weights = s.classes * s.in;
  const std::int64_t bias_offset = bias ? round_up(weight_offset + weights, kAlign) : -1;
  const std::int64_t count = round_up(bias ? bias_offset + s.classes : weight_offset + weights, kAlign) + kAlign;
  Regions regions = {{weight_offset, weight_offset + weights}};
  if (bias) regions.emplace_back(bias_offset, bias_offset + s.classes);

  const Tensor master0 = test::random_uniform({count}, DType::kF32, gen, -0.1, 0.1);
  std::vector<float> s1 = test::random_uniform({count}, DType::kF32, gen, -0.1, 0.1).to_vector<float>();
  std::vector<float> s2 = test::random_uniform({count}, DType::kF32, gen, 0.0, 0.01).to_vector<float>();
  if (adam) {  // the first update assumes zero moments (the other parameters' stay random)
    for (const auto& [begin, end] : regions) {
      std::fill(s1.begin() + begin, s1.begin() + end, 0.0f);
      std::fill(s2.begin() + begin, s2.begin() + end, 0.0f);
    }
  }
  const Tensor state1_0 = Tensor::from_vector(s1, {count}), state2_0 = Tensor::from_vector(s2, {count});
  const Tensor master = master0.to(gpu()), state1 = state1_0.to(gpu()), state2 = state2_0.to(gpu());
  // 16 bits: the compute copy the forward reads, the master rounded inside the layer, poison outside.
  Tensor copy0;
  if (sixteen) {
    copy0 = test::poisoned({count}, type);
    const Tensor rounded = master0.to(type);
    for (const auto& [begin, end] : regions) {
      std::memcpy(static_cast<char*>(copy0.raw_data()) + begin * 2, static_cast<const char*>(rounded.raw_data()) + begin * 2,
                  static_cast<std::size_t>(end - begin) * 2);
    }
  }
  const Tensor copy = sixteen ? copy0.to(gpu()) : Tensor();
  const Tensor& weights_read = sixteen ? copy : master;  // fp32 reads the master
  const auto at = [](const Tensor& t, std::int64_t offset) {
    return static_cast<char*>(t.raw_data()) + offset * static_cast<std::int64_t>(dtype_size(t.dtype()));
  };

  // The input: stored, or the step's batch of a data set (one GPU, so no stride).
  const Operands h = random_operands(s, type, gen), g = h.to_gpu();
  const std::int64_t steps_per_epoch = 3, n = steps_per_epoch * s.rows + 5;
  const Dataset data = test::random_dataset("fused", n, s.in, s.classes, gen);
  const Tensor images = data.images.to(gpu()), all_labels = data.labels.to(gpu());
  const Tensor order = Tensor::from_vector(epoch_permutation(test::test_seed(), 0, n), {n}, gpu());
  DeviceValue<cuda::StepState> state;  // shared by the gather, the forward and the update, as in the plan
  const cuda::GatherArgs source{.images = images.data<std::uint8_t>(), .labels = all_labels.data<std::int32_t>(),
                                .features = s.in, .order = order.data<std::int32_t>(), .state = state.get(),
                                .steps_per_epoch = steps_per_epoch, .first = 0, .rows = s.rows,
                                .scale = 1.0f / 255.0f, .shift = 0.0f, .dst = nullptr,
                                .dst_type = element, .dst_labels = nullptr};

  const Tensor lr_table = Tensor::from_vector(std::vector<double>{u.lr[0], u.lr[1]}, {2}, gpu());
  DeviceValue<cuda::StepMetrics> metrics, forward_metrics;
  cuda::FlatOptimizerArgs opt = train::flat_optimizer_config(u.optim, false);  // the plan's hyper-parameters
  opt.master = master.data<float>();
  opt.grad_type = element;
  opt.state1 = momentum ? state1.data<float>() : nullptr;
  opt.state2 = adam ? state2.data<float>() : nullptr;
  opt.copy = sixteen ? copy.raw_data() : nullptr;
  opt.copy_type = element;
  opt.count = count;
  opt.lr_table = lr_table.data<double>();
  opt.lr_table_size = 2;
  opt.state = state.get();
  opt.metrics = metrics.get();
  const cuda::FusedUpdate update{.args = opt, .weight_offset = weight_offset, .bias_offset = bias_offset};

  // The CPU's buffers in fp64; `unrounded`: the same steps fed the fp64 gradient (the bound must see the rounding).
  const Tensor p = test::oracle_copy(master0), m1 = test::oracle_copy(state1_0), m2 = test::oracle_copy(state2_0);
  const bool vacuity = sixteen && !adam && !gathered;
  const Tensor q = p.clone(), q1 = m1.clone(), q2 = m2.clone();
  const Scratch scratch(s.rows);
  for (int step = 0; step < 2; ++step) {
    // The forward as the step runs it: the weights as they now are, the loss scale from the state, its sums
    // left in the scratch; then again owning them, the sums the weight-gradient kernel must add.
    const Tensor dlogits = poisoned_on_gpu({s.rows, s.classes}, DType::kF32);
    cuda::SkinnyForwardArgs f = forward_args(g, s, type, scratch, dlogits);
    f.w = at(weights_read, weight_offset);
    f.bias = bias ? at(weights_read, bias_offset) : nullptr;
    f.state = state.get();
    if (gathered) {
      f.x = nullptr;
      f.labels = nullptr;
      f.gathered = true;
      f.source = source;
    }
    SN_CUDA_CHECK(cuda::launch_skinny_forward_cross_entropy(f, gpu_stream()));
    f.dlogits = nullptr;
    f.metrics = forward_metrics.get();
    SN_CUDA_CHECK(cuda::launch_skinny_forward_cross_entropy(f, gpu_stream()));

    // The gradient stored, then the update fused into the same kernel.
    const void* x = gathered ? nullptr : g.x.raw_data();
    const cuda::GatherArgs* src = gathered ? &source : nullptr;
    const Tensor dw = poisoned_on_gpu({s.classes, s.in}, type), db = poisoned_on_gpu({s.classes}, type);
    SN_CUDA_CHECK(cuda::launch_skinny_weight_grad(dlogits.data<float>(), s.classes, x, element, s.rows, s.in,
                                                  dw.raw_data(), bias ? db.raw_data() : nullptr, gpu_stream(), src));
    const cuda::RowSums sums = scratch.sums(metrics.get(), weight);
    SN_CUDA_CHECK(cuda::launch_skinny_weight_grad(dlogits.data<float>(), s.classes, x, element, s.rows, s.in, nullptr,
                                                  nullptr, gpu_stream(), src, &update, &sums));

    const Tensor grad = Tensor::zeros({count}, DType::kF64);
    ops::copy(grad.slice_rows(weight_offset, weight_offset + weights), test::oracle_copy(dw).view({weights}));
    if (bias) ops::copy(grad.slice_rows(bias_offset, bias_offset + s.classes), test::oracle_copy(db));
    cpu_step(u, step, regions, p, grad, m1, m2);
    if (vacuity) {
      const GradReference exact = cpu_weight_grad(dlogits, h.x);
      const Tensor unrounded = Tensor::zeros({count}, DType::kF64);
      ops::copy(unrounded.slice_rows(weight_offset, weight_offset + weights), exact.dw.view({weights}));
      if (bias) ops::copy(unrounded.slice_rows(bias_offset, bias_offset + s.classes), exact.db);
      cpu_step(u, step, regions, q, unrounded, q1, q2);
    }
  }

  const cuda::StepState after = state.read();
  EXPECT_EQ(after.step, 2) << what;
  EXPECT_EQ(after.opt_steps, 2) << what;
  EXPECT_EQ(after.blocks_done, 0u) << what;
  const cuda::StepMetrics got = metrics.read();
  expect_same_sums(got, forward_metrics.read(), what + ": RowSums against the forward's own sums");
  EXPECT_EQ(got.skipped, 0) << what;

  const std::vector<double> p0 = test::oracle_copy(master0).to_vector<double>();
  const std::vector<double> want = p.to_vector<double>(), got_p = master.to(Device::cpu()).to_vector<double>();
  const std::vector<double> change = minus(want, p0);
  const double error = region_error(got_p, want, change, regions);
  EXPECT_LE(error, 1e-5) << what << ": the weights' error against the size of the update";
  if (vacuity) {
    EXPECT_GT(region_error(q.to_vector<double>(), want, change, regions), 1e-5)
        << what << ": the bound cannot tell a gradient rounded to bf16 from the exact one";
  }
  expect_outside_unchanged(master0, master, regions, what + ", master");
  if (momentum) {
    const std::vector<double> w1 = m1.to_vector<double>();
    EXPECT_LE(region_error(state1.to(Device::cpu()).to_vector<double>(), w1, w1, regions), 1e-5) << what << ", state1";
    expect_outside_unchanged(state1_0, state1, regions, what + ", state1");
  }
  if (adam) {
    const std::vector<double> w2 = m2.to_vector<double>();
    EXPECT_LE(region_error(state2.to(Device::cpu()).to_vector<double>(), w2, w2, regions), 1e-5) << what << ", state2";
    expect_outside_unchanged(state2_0, state2, regions, what + ", state2");
  }
  if (sixteen) {
    // The copy is the new master rounded once (the host's rounding is the same to the bit).
    const Tensor rounded = master.to(Device::cpu()).to(type);
    const Tensor got_copy = copy.to(Device::cpu());
    for (const auto& [begin, end] : regions) {
      ASSERT_EQ(std::memcmp(static_cast<const char*>(got_copy.raw_data()) + begin * 2,
                            static_cast<const char*>(rounded.raw_data()) + begin * 2, static_cast<std::size_t>(end - begin) * 2),
                0)
          << what << ": the compute copy is not the master rounded";
    }
    expect_outside_unchanged(copy0, copy, regions, what + ", compute copy");
  }
}

// fp32 and bf16 (fp16 never fuses: its update waits for every gradient's finiteness check); the plan's
// batch-128 MNIST layer and a 32-class one; stored and gathered input; with and without a bias.
TEST(SkinnyLayerModes, FusedUpdateIsTheOptimizerStepOfTheStoredGradient) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 104);
  for (const UpdateCase& u : kUpdates) {
    for (const DType type : {DType::kF32, DType::kBF16}) {
      for (const LayerShape& s : {LayerShape{128, 784, 10}, LayerShape{37, 100, 32}}) {
        for (const bool gathered : {false, true}) {
          for (const bool bias : {true, false}) check_fused_update(u, type, s, gathered, bias, gen);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------- RowSums

// The training forward leaves its rows' losses and hits in the scratch (metrics == nullptr) and the
// weight-gradient kernel adds them, in a block of its own (the narrow kernel's extra block, the sliced and
// tensor-core kernels' bias block), with the same 256-thread tree as the forward's own last block: the
// sums are the forward's to the bit, and the gradients those of a launch without them. The evaluation's
// forward (no gradient, no state) owns the same sums too.
TEST(SkinnyLayerModes, RowSumsAddTheForwardsRowsInTheWeightGradient) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 105);
  const cuda::StepMetrics start{.loss_sum = 0.5, .correct = 3, .skipped = 0};  // the sums accumulate
  for (const DType type : kTypes) {
    for (const LayerShape& s : kShapes) {
      const std::string what = describe(s, type);
      const cuda::ElementType element = test::element_type(type);
      const Operands h = random_operands(s, type, gen), g = h.to_gpu();
      const double weight = 1.0 / static_cast<double>(s.rows);
      const Bounds b = bounds(type, s.rows);
      Scratch scratch(s.rows);

      DeviceValue<cuda::StepMetrics> owned(start), evaluated(start);
      const Tensor dlogits = poisoned_on_gpu({s.rows, s.classes}, DType::kF32);
      cuda::SkinnyForwardArgs args = forward_args(g, s, type, scratch, dlogits);
      args.metrics = owned.get();
      SN_CUDA_CHECK(cuda::launch_skinny_forward_cross_entropy(args, gpu_stream()));
      const cuda::StepMetrics want = owned.read();
      expect_forward(want, dlogits, cpu_forward(h, true, type, 0.0, weight), b, weight, what, start);
      cuda::SkinnyForwardArgs evaluation = args;
      evaluation.dlogits = nullptr;
      evaluation.metrics = evaluated.get();
      SN_CUDA_CHECK(cuda::launch_skinny_forward_cross_entropy(evaluation, gpu_stream()));
      expect_same_sums(evaluated.read(), want, what + ", the evaluation's forward");

      scratch.poison();
      const Tensor training = poisoned_on_gpu({s.rows, s.classes}, DType::kF32);
      args = scratch.fill(args);
      args.dlogits = training.data<float>();
      args.metrics = nullptr;
      SN_CUDA_CHECK(cuda::launch_skinny_forward_cross_entropy(args, gpu_stream()));
      EXPECT_EQ(scratch.counter(), 0u) << what << ": the forward with no metrics counted its blocks";
      test::expect_bit_identical(training, dlogits, what + ": dlogits with and without metrics");

      const GradReference ref = cpu_weight_grad(dlogits, h.x);
      const SplitScratch split(s.rows, s.in);
      for (const bool sliced : split.ways()) {
        const std::string how = what + (sliced ? " in slices" : " whole");
        const Tensor dw0 = poisoned_on_gpu({s.classes, s.in}, type), db0 = poisoned_on_gpu({s.classes}, type);
        SN_CUDA_CHECK(cuda::launch_skinny_weight_grad(training.data<float>(), s.classes, g.x.raw_data(), element,
                                                      s.rows, s.in, dw0.raw_data(), db0.raw_data(), gpu_stream(),
                                                      nullptr, nullptr, nullptr, split.get(sliced)));
        DeviceValue<cuda::StepMetrics> summed(start);
        const cuda::RowSums sums = scratch.sums(summed.get(), weight);
        const Tensor dw = poisoned_on_gpu({s.classes, s.in}, type), db = poisoned_on_gpu({s.classes}, type);
        SN_CUDA_CHECK(cuda::launch_skinny_weight_grad(training.data<float>(), s.classes, g.x.raw_data(), element,
                                                      s.rows, s.in, dw.raw_data(), db.raw_data(), gpu_stream(),
                                                      nullptr, nullptr, &sums, split.get(sliced)));
        expect_same_sums(summed.read(), want, how + ", RowSums against the forward's own sums");
        expect_weight_grad(dw, &db, ref, b, how);
        test::expect_bit_identical(dw, dw0, how + ": dW with and without RowSums");
        test::expect_bit_identical(db, db0, how + ": bias gradient with and without RowSums");
      }
    }
  }
}

// ------------------------------------------------------------------------ input gradient, no ReLU

// The layer below the output layer without a ReLU (identity, or an activation applied by its own
// kernel): dX = dlogits W, unmasked, on the scalar kernel (narrow shapes, and rows of no whole vectors:
// 1030), the four-at-a-time one, and bf16's tensor cores (2048 rows). Against the CPU product in fp64:
// fp32 sums of at most 32 terms of size <= 0.1 / rows (far below 1e-7), then one rounding to the type.
// With a ReLU mask the same launch must give the same bits where the layer below passed, and 0 elsewhere.
TEST(SkinnyLayerModes, WithoutAReluBelowTheInputGradientIsThePlainProduct) {
  SN_REQUIRE_GPU();
  Generator gen(test::test_seed() + 106);
  std::vector<LayerShape> shapes = kShapes;
  shapes.push_back({1000, 1030, 10});
  for (const DType type : kTypes) {
    for (const LayerShape& s : shapes) {
      const std::string what = describe(s, type);
      const cuda::ElementType element = test::element_type(type);
      const double weight = 1.0 / static_cast<double>(s.rows);
      const Tensor dlogits = test::random_uniform({s.rows, s.classes}, DType::kF32, gen, -weight, weight);
      const Tensor w = test::random_uniform({s.classes, s.in}, DType::kF32, gen, -0.1, 0.1).to(type);
      Tensor relu_out = test::random_uniform({s.rows, s.in}, DType::kF32, gen, -1.0, 1.0);  // ~half masked
      relu_out.data<float>()[0] = 0.5f;  // at least one unit passes
      relu_out = relu_out.to(type);
      Tensor ref = Tensor::empty({s.rows, s.in}, DType::kF64);
      ops::gemm(test::oracle_copy(dlogits), false, test::oracle_copy(w), false, ref);

      const Tensor d_dlogits = dlogits.to(gpu()), d_w = w.to(gpu()), d_relu = relu_out.to(gpu());
      const Tensor plain = poisoned_on_gpu({s.rows, s.in}, type), masked = poisoned_on_gpu({s.rows, s.in}, type);
      SN_CUDA_CHECK(cuda::launch_skinny_input_grad(d_dlogits.data<float>(), s.classes, d_w.raw_data(), element, s.rows,
                                                   s.in, nullptr, plain.raw_data(), gpu_stream()));
      test::expect_allclose(plain, ref, 1e-7, bounds(type, s.rows).rounding, "dX, no ReLU " + what);

      SN_CUDA_CHECK(cuda::launch_skinny_input_grad(d_dlogits.data<float>(), s.classes, d_w.raw_data(), element, s.rows,
                                                   s.in, d_relu.raw_data(), masked.raw_data(), gpu_stream()));
      const std::vector<float> p = plain.to(Device::cpu()).to_vector<float>();
      const std::vector<float> m = masked.to(Device::cpu()).to_vector<float>();
      const std::vector<float> y = relu_out.to_vector<float>();
      for (std::size_t i = 0; i < p.size(); ++i) {
        ASSERT_EQ(m[i], y[i] > 0.0f ? p[i] : 0.0f) << what << ": element " << i << " with the ReLU mask";
      }
    }
  }
}

}  // namespace
}  // namespace sprintnet
