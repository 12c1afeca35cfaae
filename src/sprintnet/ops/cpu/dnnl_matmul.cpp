#include "sprintnet/ops/cpu/dnnl_matmul.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <utility>

#include "sprintnet/core/error.h"
#include "sprintnet/ops/cpu/jit_signal_shield.h"

namespace sprintnet::cpu {
namespace {

// One engine and stream for the process: oneDNN's CPU stream runs on the calling thread's
// OpenMP team (the same one our own loops and OpenBLAS use).
struct DnnlContext {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

DnnlContext& context() {
  static DnnlContext ctx;
  return ctx;
}

// The primitive for c = a b (+ bias) (then ReLU), or c += a b. oneDNN 3 dropped the operation
// descriptors and the post-op's scale; Debian 12 ships 2.6, Debian 13 3.7: both build.
dnnl::matmul plan_matmul(const dnnl::engine& engine, const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                         const dnnl::memory::desc* bias, const dnnl::memory::desc& c, bool relu, bool accumulate) {
  dnnl::primitive_attr attr;
  dnnl::post_ops ops;
  if (accumulate) ops.append_sum(1.0F);
#if DNNL_VERSION_MAJOR >= 3
  if (relu) ops.append_eltwise(dnnl::algorithm::eltwise_relu, 0.0F, 0.0F);
  attr.set_post_ops(ops);
  return dnnl::matmul(bias != nullptr ? dnnl::matmul::primitive_desc(engine, a, b, *bias, c, attr)
                                      : dnnl::matmul::primitive_desc(engine, a, b, c, attr));
#else
  if (relu) ops.append_eltwise(1.0F, dnnl::algorithm::eltwise_relu, 0.0F, 0.0F);
  attr.set_post_ops(ops);
  const auto desc = bias != nullptr ? dnnl::matmul::desc(a, b, *bias, c) : dnnl::matmul::desc(a, b, c);
  return dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, engine));
#endif
}

}  // namespace

MatmulShape forward_product(std::int64_t rows, std::int64_t in, std::int64_t out) {
  return {.m = rows, .n = out, .k = in, .a_row_stride = in, .a_col_stride = 1, .b_row_stride = 1, .b_col_stride = in};
}

MatmulShape input_grad_product(std::int64_t rows, std::int64_t in, std::int64_t out) {
  return {.m = rows, .n = in, .k = out, .a_row_stride = out, .a_col_stride = 1, .b_row_stride = in, .b_col_stride = 1};
}

MatmulShape weight_grad_product(std::int64_t rows, std::int64_t in, std::int64_t out) {
  return {.m = out, .n = in, .k = rows, .a_row_stride = 1, .a_col_stride = out, .b_row_stride = in, .b_col_stride = 1};
}

struct DnnlMatmul::Impl {
  dnnl::matmul primitive;
  dnnl::memory a, b, c, bias;
  bool with_bias = false;
  std::unordered_map<int, dnnl::memory> args;  // the same handles: run() only changes their data
};

DnnlMatmul::DnnlMatmul(const MatmulShape& s, MatmulInput input, bool with_bias, bool relu, bool accumulate)
    : impl_(new Impl) {
  SN_CHECK(!(accumulate && relu), "matmul: an accumulating product has no ReLU (it would apply to the sum)");
  SN_CHECK(s.m > 0 && s.n > 0 && s.k > 0, "matmul {}x{}x{}: every dimension must be positive", s.m, s.n, s.k);
  using dt = dnnl::memory::data_type;
  const dt in_type = input == MatmulInput::kBF16 ? dt::bf16 : dt::f32;
  const dnnl::memory::desc a_md({s.m, s.k}, in_type, {s.a_row_stride, s.a_col_stride});
  const dnnl::memory::desc b_md({s.k, s.n}, in_type, {s.b_row_stride, s.b_col_stride});
  const dnnl::memory::desc c_md({s.m, s.n}, dt::f32, {s.n, 1});
  const dnnl::memory::desc bias_md({1, s.n}, dt::f32, {s.n, 1});
  DnnlContext& ctx = context();
  try {
    impl_->primitive = plan_matmul(ctx.engine, a_md, b_md, with_bias ? &bias_md : nullptr, c_md, relu, accumulate);
  } catch (const dnnl::error& e) {
    SN_FAIL("oneDNN cannot plan the {} matmul {}x{}x{}: {}", input == MatmulInput::kBF16 ? "bf16" : "fp32", s.m, s.n,
            s.k, e.what());
  }
  // Memory objects without data: run() points them at the step's buffers.
  impl_->a = dnnl::memory(a_md, ctx.engine, DNNL_MEMORY_NONE);
  impl_->b = dnnl::memory(b_md, ctx.engine, DNNL_MEMORY_NONE);
  impl_->c = dnnl::memory(c_md, ctx.engine, DNNL_MEMORY_NONE);
  if (with_bias) impl_->bias = dnnl::memory(bias_md, ctx.engine, DNNL_MEMORY_NONE);
  impl_->with_bias = with_bias;
  impl_->args = {{DNNL_ARG_SRC, impl_->a}, {DNNL_ARG_WEIGHTS, impl_->b}, {DNNL_ARG_DST, impl_->c}};
  if (with_bias) impl_->args.emplace(DNNL_ARG_BIAS, impl_->bias);
}

DnnlMatmul::~DnnlMatmul() = default;
DnnlMatmul::DnnlMatmul(DnnlMatmul&&) noexcept = default;
DnnlMatmul& DnnlMatmul::operator=(DnnlMatmul&&) noexcept = default;

void DnnlMatmul::run(const void* a, const void* b, const float* bias, float* c) const {
  // oneDNN's handles are non-const pointers; it only reads A, B and the bias.
  impl_->a.set_data_handle(const_cast<void*>(a));
  impl_->b.set_data_handle(const_cast<void*>(b));
  impl_->c.set_data_handle(c);
  if (impl_->with_bias) impl_->bias.set_data_handle(const_cast<float*>(bias));
  DnnlContext& ctx = context();
  const JitSignalShield shield;
  impl_->primitive.execute(ctx.stream, impl_->args);
  ctx.stream.wait();
}

bool cpu_has_native_bf16() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;  // ISA values are nested bit masks: AMX includes AVX512-BF16
}

std::string dnnl_library_version() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

std::string dnnl_cpu_isa() {
  // The widest named set the effective ISA contains (newer oneDNN names sets above these, such as
  // AVX10 with AMX-FP16, which contain them).
  const auto effective = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const std::pair<dnnl::cpu_isa, const char*> named[] = {
      {dnnl::cpu_isa::avx512_core_amx, "avx512_core_amx"}, {dnnl::cpu_isa::avx512_core_bf16, "avx512_core_bf16"},
      {dnnl::cpu_isa::avx512_core_vnni, "avx512_core_vnni"}, {dnnl::cpu_isa::avx512_core, "avx512_core"},
      {dnnl::cpu_isa::avx2_vnni, "avx2_vnni"},               {dnnl::cpu_isa::avx2, "avx2"}};
  for (const auto& [isa, name] : named) {
    const auto bits = static_cast<unsigned>(isa);
    if ((effective & bits) == bits) return name;
  }
  return "sse41/avx";
}

}  // namespace sprintnet::cpu
