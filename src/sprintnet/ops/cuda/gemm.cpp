#include "sprintnet/ops/cuda/gemm.h"

#include <bit>
#include <cstdlib>
#include <functional>
#include <string_view>

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/error.h"
#include "sprintnet/core/graph_capture_lock.h"
#include "sprintnet/core/out_of_memory_error.h"
#include "sprintnet/ops/cuda/cublaslt_library.h"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

// The loaded library (cublaslt_library.h), looked up once.
const CublasLtApi& lt() {
  static const CublasLtApi& api = cublaslt();
  return api;
}

// cuBLASLt's recommendation for Hopper (and more than enough for Ampere/Ada).
inline constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

const char* precision_name(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kF32: return "fp32";
    case GemmPrecision::kTF32: return "tf32";
    case GemmPrecision::kBF16: return "bf16";
    case GemmPrecision::kF16: return "fp16";
  }
  return "unknown";
}

const char* epilogue_name(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone: return "none";
    case GemmEpilogue::kBias: return "bias";
    case GemmEpilogue::kReluAuxBias: return "relu_aux_bias";
    case GemmEpilogue::kReluAux: return "relu_aux";
    case GemmEpilogue::kReluBias: return "relu_bias";
    case GemmEpilogue::kRelu: return "relu";
    case GemmEpilogue::kDRelu: return "drelu";
    case GemmEpilogue::kBiasGradA: return "bias_grad_a";
  }
  return "unknown";
}

std::string describe(const GemmDesc& d) {
  return fmt::format("gemm m={} n={} k={} trans_a={} trans_b={} precision={} c_f32={} epilogue={} (alignments a={} "
                     "b={} c={} bytes)",
                     d.m, d.n, d.k, d.trans_a, d.trans_b, precision_name(d.precision), d.c_f32,
                     epilogue_name(d.epilogue), d.align_a, d.align_b, d.align_c);
}

// Throws `what` failed with `status`. ALLOC_FAILED is cuBLASLt not getting memory ("usually a cudaMalloc
// failure", its documentation says): an OutOfMemoryError, as SN_CUDA_CHECK throws for cudaMalloc.
void check_cublas_status(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  if (status == CUBLAS_STATUS_ALLOC_FAILED) {
    SN_FAIL_OUT_OF_MEMORY("{} failed: {} ({})", what, lt().status_name(status), lt().status_string(status));
  }
  SN_FAIL("{} failed: {} ({})", what, lt().status_name(status), lt().status_string(status));
}

void check_cublas(cublasStatus_t status, const char* call, const GemmDesc& desc) {
  if (status != CUBLAS_STATUS_SUCCESS) check_cublas_status(status, fmt::format("{} for {}", call, describe(desc)));
}

template <typename T>
void set_attribute(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attribute, const T& value,
                   const GemmDesc& desc) {
  check_cublas(lt().desc_set_attribute(op, attribute, &value, sizeof(value)), "cublasLtMatmulDescSetAttribute",
               desc);
}

template <typename T>
void set_preference(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute, const T& value,
                    const GemmDesc& desc) {
  check_cublas(lt().preference_set_attribute(pref, attribute, &value, sizeof(value)),
               "cublasLtMatmulPreferenceSetAttribute", desc);
}

// Kernel lab: SPRINTNET_GEMM_OUTPUT_TYPE_REDUCTION=1 lets the heuristic sum split-K products in C's type again.
bool output_type_reduction_allowed() {
  static const bool allowed = [] {
    const char* env = std::getenv("SPRINTNET_GEMM_OUTPUT_TYPE_REDUCTION");
    return env != nullptr && std::string_view(env) == "1";
  }();
  return allowed;
}

// Owns a preference descriptor for the duration of one heuristic query.
struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  ~Preference() {
    if (pref != nullptr) lt().preference_destroy(pref);
  }
};

}  // namespace

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  // In cuBLAS's (column-major) slots: first = our B, second = our A, out = our C (also D).
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (out != nullptr) lt().layout_destroy(out);
    if (second != nullptr) lt().layout_destroy(second);
    if (first != nullptr) lt().layout_destroy(first);
    if (op != nullptr) lt().desc_destroy(op);
  }
};

std::size_t GemmDescHash::operator()(const GemmDesc& d) const noexcept {
  std::size_t h = 0;
  const auto mix = [&h](std::uint64_t v) { h ^= std::hash<std::uint64_t>{}(v) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2); };
  mix(static_cast<std::uint64_t>(d.m));
  mix(static_cast<std::uint64_t>(d.n));
  mix(static_cast<std::uint64_t>(d.k));
  mix((d.trans_a ? 1u : 0u) | (d.trans_b ? 2u : 0u) | (static_cast<std::uint64_t>(d.precision) << 8) |
      (static_cast<std::uint64_t>(d.epilogue) << 16) | (d.c_f32 ? (1u << 24) : 0u));
  mix(static_cast<std::uint64_t>(d.align_a) | (static_cast<std::uint64_t>(d.align_b) << 16) |
      (static_cast<std::uint64_t>(d.align_c) << 32));
  return h;
}

std::uint32_t pointer_alignment(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (address == 0) return 256;
  return static_cast<std::uint32_t>(std::min<std::uintptr_t>(256, std::uintptr_t{1} << std::countr_zero(address)));
}

CublasLtGemm::CublasLtGemm() {
  const std::unique_lock no_capture(graph_capture_mutex());  // graph_capture_lock.h
  check_cublas_status(lt().create(&handle_), "cublasLtCreate");
  const cudaError_t allocated = cudaMalloc(&workspace_, kWorkspaceBytes);
  if (allocated != cudaSuccess) {
    lt().destroy(handle_);
    const std::string call = fmt::format("cudaMalloc of the cuBLASLt workspace ({} bytes)", kWorkspaceBytes);
    detail::throw_cuda_error(allocated, __FILE__, __LINE__, call.c_str());  // OutOfMemoryError when out of memory
  }
}

CublasLtGemm::~CublasLtGemm() {
  const std::unique_lock no_capture(graph_capture_mutex());
  plans_.clear();
  SN_CUDA_WARN(cudaFree(workspace_));
  lt().destroy(handle_);
}

namespace {

cudaDataType_t input_type(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kBF16: return CUDA_R_16BF;
    case GemmPrecision::kF16: return CUDA_R_16F;
    case GemmPrecision::kF32:
    case GemmPrecision::kTF32: break;
  }
  return CUDA_R_32F;
}

cudaDataType_t output_type(const GemmDesc& d) { return d.c_f32 ? CUDA_R_32F : input_type(d.precision); }

cublasLtEpilogue_t cublas_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kReluAuxBias: return CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
    case GemmEpilogue::kReluAux: return CUBLASLT_EPILOGUE_RELU_AUX;
    case GemmEpilogue::kReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case GemmEpilogue::kRelu: return CUBLASLT_EPILOGUE_RELU;
    case GemmEpilogue::kDRelu: return CUBLASLT_EPILOGUE_DRELU;
    case GemmEpilogue::kBiasGradA: return CUBLASLT_EPILOGUE_BGRADB;  // our A is cuBLAS's B
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool uses_bias(GemmEpilogue e) {
  return e == GemmEpilogue::kBias || e == GemmEpilogue::kReluAuxBias || e == GemmEpilogue::kReluBias ||
         e == GemmEpilogue::kBiasGradA;
}
bool uses_aux(GemmEpilogue e) {
  return e == GemmEpilogue::kReluAuxBias || e == GemmEpilogue::kReluAux || e == GemmEpilogue::kDRelu;
}

}  // namespace

CublasLtGemm::Plan* CublasLtGemm::plan_for(const GemmDesc& desc) {
  if (auto it = plans_.find(desc); it != plans_.end()) return it->second.get();

  auto plan = std::make_unique<Plan>();
  const cublasComputeType_t compute =
      desc.precision == GemmPrecision::kTF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check_cublas(lt().desc_create(&plan->op, compute, CUDA_R_32F), "cublasLtMatmulDescCreate", desc);
  const cublasOperation_t op_first = desc.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = desc.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, op_first, desc);
  set_attribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, op_second, desc);
  set_attribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, cublas_epilogue(desc.epilogue), desc);
  if (uses_aux(desc.epilogue)) {
    set_attribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, relu_mask_ld(desc.n), desc);
  }

  // Layouts describe the stored matrices (before op) column-major: the row-major [r, c] is rows = c, cols = r.
  // Our B is stored [k, n] (or [n, k] when transposed); our A [m, k] (or [k, m]); C [m, n].
  const auto m = static_cast<std::uint64_t>(desc.m), n = static_cast<std::uint64_t>(desc.n),
             k = static_cast<std::uint64_t>(desc.k);
  const std::uint64_t first_rows = desc.trans_b ? k : n, first_cols = desc.trans_b ? n : k;
  const std::uint64_t second_rows = desc.trans_a ? m : k, second_cols = desc.trans_a ? k : m;
  const cudaDataType_t in = input_type(desc.precision), out = output_type(desc);
  check_cublas(lt().layout_create(&plan->first, in, first_rows, first_cols, static_cast<std::int64_t>(first_rows)),
               "cublasLtMatrixLayoutCreate", desc);
  check_cublas(lt().layout_create(&plan->second, in, second_rows, second_cols,
                                          static_cast<std::int64_t>(second_rows)),
               "cublasLtMatrixLayoutCreate", desc);
  check_cublas(lt().layout_create(&plan->out, out, n, m, static_cast<std::int64_t>(n)),
               "cublasLtMatrixLayoutCreate", desc);

  Preference preference;
  check_cublas(lt().preference_create(&preference.pref), "cublasLtMatmulPreferenceCreate", desc);
  set_preference(preference.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, std::uint64_t{kWorkspaceBytes}, desc);
  set_preference(preference.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, desc.align_b, desc);  // first = our B
  set_preference(preference.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, desc.align_a, desc);  // second = our A
  set_preference(preference.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, desc.align_c, desc);
  set_preference(preference.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, desc.align_c, desc);
  // No split-K whose partial sums are added in C's type: in bf16 that rounds every partial sum to 8 bits, and
  // the heuristic picked it for a 128x256 input gradient with the DRELU epilogue (66 splits; 1-2 % off fp64 on
  // the H200, 2026-11-29, GemmEpilogueTest). Splits summed in fp32 stay allowed. Kernel lab:
  // SPRINTNET_GEMM_OUTPUT_TYPE_REDUCTION=1 allows it again.
  if (!output_type_reduction_allowed()) {
    set_preference(preference.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                   std::uint32_t{CUBLASLT_REDUCTION_SCHEME_MASK & ~CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE}, desc);
  }

  // The heuristic reads the bias and aux pointers' alignment only; run() sets the real ones, which come
  // from allocations aligned to at least 256 bytes like these placeholders.
  void* const aligned_placeholder = workspace_;
  if (uses_bias(desc.epilogue)) set_attribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, aligned_placeholder, desc);
  if (uses_aux(desc.epilogue)) {
    set_attribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aligned_placeholder, desc);
  }

  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status = lt().algo_get_heuristic(handle_, plan->op, plan->first, plan->second, plan->out,
                                                               plan->out, preference.pref, 1, &result, &returned);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || returned == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    plans_.emplace(desc, nullptr);  // remembered, so the query is not repeated
    return nullptr;
  }
  check_cublas(status, "cublasLtMatmulAlgoGetHeuristic", desc);
  plan->algo = result.algo;
  return plans_.emplace(desc, std::move(plan)).first->second.get();
}

bool CublasLtGemm::supported(const GemmDesc& desc) { return plan_for(desc) != nullptr; }

void CublasLtGemm::run(const GemmDesc& desc, const float* a, const float* b, float* c, float alpha, float beta,
                       cudaStream_t stream) {
  SN_CHECK(desc.precision == GemmPrecision::kF32 || desc.precision == GemmPrecision::kTF32,
           "{}: fp32 pointers for a 16-bit product", describe(desc));
  run(desc, GemmArgs{.a = a, .b = b, .c = c, .alpha = alpha, .beta = beta}, stream);
}

void CublasLtGemm::run(const GemmDesc& desc, const GemmArgs& args, cudaStream_t stream) {
  SN_CHECK(desc.m >= 1 && desc.n >= 1 && desc.k >= 1, "{}: empty products are handled by the caller", describe(desc));
  // The arguments first: a missing bias or mask is the caller's mistake, whatever cuBLASLt could plan.
  SN_CHECK(!uses_bias(desc.epilogue) || args.bias != nullptr, "{}: the epilogue needs a bias vector", describe(desc));
  SN_CHECK(!uses_aux(desc.epilogue) || args.aux != nullptr, "{}: the epilogue needs a ReLU mask buffer",
           describe(desc));
  Plan* plan = plan_for(desc);
  SN_CHECK(plan != nullptr, "cuBLASLt has no algorithm for {}", describe(desc));
  if (uses_bias(desc.epilogue)) set_attribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, args.bias, desc);
  if (uses_aux(desc.epilogue)) set_attribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, args.aux, desc);
  const NvtxRange range("gemm");
  check_cublas(lt().matmul(handle_, plan->op, &args.alpha, args.b, plan->first, args.a, plan->second, &args.beta,
                              args.c, plan->out, args.c, plan->out, &plan->algo, workspace_, kWorkspaceBytes, stream),
               "cublasLtMatmul", desc);
}

}  // namespace sprintnet::cuda
