#include "sprintnet/ops/cuda/gemm.h"

#include <bit>
#include <functional>

#include "sprintnet/core/cuda_check.h"
#include "sprintnet/core/error.h"
#include "sprintnet/ops/cuda/nvtx.h"

namespace sprintnet::cuda {
namespace {

// cuBLASLt's recommendation for Hopper (and more than enough for Ampere/Ada).
inline constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

std::string describe(const GemmDesc& d) {
  return fmt::format("gemm m={} n={} k={} trans_a={} trans_b={} (alignments a={} b={} c={} bytes)", d.m, d.n, d.k,
                     d.trans_a, d.trans_b, d.align_a, d.align_b, d.align_c);
}

void check_cublas(cublasStatus_t status, const char* call, const GemmDesc& desc) {
  SN_CHECK(status == CUBLAS_STATUS_SUCCESS, "{} failed for {}: {} ({})", call, describe(desc),
           cublasLtGetStatusName(status), cublasLtGetStatusString(status));
}

template <typename T>
void set_attribute(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attribute, const T& value,
                   const GemmDesc& desc) {
  check_cublas(cublasLtMatmulDescSetAttribute(op, attribute, &value, sizeof(value)), "cublasLtMatmulDescSetAttribute",
               desc);
}

template <typename T>
void set_preference(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute, const T& value,
                    const GemmDesc& desc) {
  check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)),
               "cublasLtMatmulPreferenceSetAttribute", desc);
}

// Owns a preference descriptor for the duration of one heuristic query.
struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  ~Preference() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
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
    if (out != nullptr) cublasLtMatrixLayoutDestroy(out);
    if (second != nullptr) cublasLtMatrixLayoutDestroy(second);
    if (first != nullptr) cublasLtMatrixLayoutDestroy(first);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

std::size_t GemmDescHash::operator()(const GemmDesc& d) const noexcept {
  std::size_t h = 0;
  const auto mix = [&h](std::uint64_t v) { h ^= std::hash<std::uint64_t>{}(v) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2); };
  mix(static_cast<std::uint64_t>(d.m));
  mix(static_cast<std::uint64_t>(d.n));
  mix(static_cast<std::uint64_t>(d.k));
  mix((d.trans_a ? 1u : 0u) | (d.trans_b ? 2u : 0u) | (static_cast<std::uint64_t>(d.precision) << 8) |
      (static_cast<std::uint64_t>(d.epilogue) << 16));
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
  const cublasStatus_t status = cublasLtCreate(&handle_);
  SN_CHECK(status == CUBLAS_STATUS_SUCCESS, "cublasLtCreate failed: {} ({})", cublasLtGetStatusName(status),
           cublasLtGetStatusString(status));
  const cudaError_t allocated = cudaMalloc(&workspace_, kWorkspaceBytes);
  if (allocated != cudaSuccess) {
    cublasLtDestroy(handle_);
    SN_CUDA_CHECK(allocated);
  }
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  SN_CUDA_WARN(cudaFree(workspace_));
  cublasLtDestroy(handle_);
}

const CublasLtGemm::Plan& CublasLtGemm::plan_for(const GemmDesc& desc) {
  if (auto it = plans_.find(desc); it != plans_.end()) return *it->second;
  SN_CHECK(desc.precision == GemmPrecision::kF32 && desc.epilogue == GemmEpilogue::kNone,
           "{}: only fp32 without epilogue is implemented", describe(desc));

  auto plan = std::make_unique<Plan>();
  check_cublas(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", desc);
  const cublasOperation_t op_first = desc.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = desc.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, op_first, desc);
  set_attribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, op_second, desc);

  // Layouts describe the stored matrices (before op) column-major: the row-major [r, c] is rows = c, cols = r.
  // Our B is stored [k, n] (or [n, k] when transposed); our A [m, k] (or [k, m]); C [m, n].
  const auto m = static_cast<std::uint64_t>(desc.m), n = static_cast<std::uint64_t>(desc.n),
             k = static_cast<std::uint64_t>(desc.k);
  const std::uint64_t first_rows = desc.trans_b ? k : n, first_cols = desc.trans_b ? n : k;
  const std::uint64_t second_rows = desc.trans_a ? m : k, second_cols = desc.trans_a ? k : m;
  check_cublas(cublasLtMatrixLayoutCreate(&plan->first, CUDA_R_32F, first_rows, first_cols,
                                          static_cast<std::int64_t>(first_rows)),
               "cublasLtMatrixLayoutCreate", desc);
  check_cublas(cublasLtMatrixLayoutCreate(&plan->second, CUDA_R_32F, second_rows, second_cols,
                                          static_cast<std::int64_t>(second_rows)),
               "cublasLtMatrixLayoutCreate", desc);
  check_cublas(cublasLtMatrixLayoutCreate(&plan->out, CUDA_R_32F, n, m, static_cast<std::int64_t>(n)),
               "cublasLtMatrixLayoutCreate", desc);

  Preference preference;
  check_cublas(cublasLtMatmulPreferenceCreate(&preference.pref), "cublasLtMatmulPreferenceCreate", desc);
  set_preference(preference.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, std::uint64_t{kWorkspaceBytes}, desc);
  set_preference(preference.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, desc.align_b, desc);  // first = our B
  set_preference(preference.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, desc.align_a, desc);  // second = our A
  set_preference(preference.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, desc.align_c, desc);
  set_preference(preference.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, desc.align_c, desc);

  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  check_cublas(cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->first, plan->second, plan->out, plan->out,
                                              preference.pref, 1, &result, &returned),
               "cublasLtMatmulAlgoGetHeuristic", desc);
  SN_CHECK(returned > 0 && result.state == CUBLAS_STATUS_SUCCESS, "cuBLASLt has no algorithm for {}", describe(desc));
  plan->algo = result.algo;
  return *plans_.emplace(desc, std::move(plan)).first->second;
}

void CublasLtGemm::run(const GemmDesc& desc, const float* a, const float* b, float* c, float alpha, float beta,
                       cudaStream_t stream) {
  SN_CHECK(desc.m >= 1 && desc.n >= 1 && desc.k >= 1, "{}: empty products are handled by the caller", describe(desc));
  const Plan& plan = plan_for(desc);
  const NvtxRange range("gemm");
  check_cublas(cublasLtMatmul(handle_, plan.op, &alpha, b, plan.first, a, plan.second, &beta, c, plan.out, c,
                              plan.out, &plan.algo, workspace_, kWorkspaceBytes, stream),
               "cublasLtMatmul", desc);
}

}  // namespace sprintnet::cuda
