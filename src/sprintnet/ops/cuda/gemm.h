#pragma once
// Matrix products on CUDA through cuBLASLt.
//
// Tensors are row-major; cuBLAS is column-major. A row-major [r, c] matrix is
// the column-major [c, r] matrix holding its transpose, so the row-major
// C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T:
// cuBLAS's first operand is our B, its second our A, and both transpose flags
// carry over unchanged.
//
// A cuBLASLt plan (operation descriptor, three layouts, the heuristic's
// algorithm) depends only on a GemmDesc, so plans are made once per distinct
// GemmDesc and cached; a training run uses a handful of shapes. The workspace
// is allocated once. Not thread-safe: one instance per backend, used from one
// host thread.
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

namespace sprintnet::cuda {

// How the product is computed. fp32 for now; TF32 (CUBLAS_COMPUTE_32F_FAST_TF32)
// and bf16 inputs are the planned additions.
enum class GemmPrecision : std::uint8_t { kF32 };
// What cuBLASLt fuses after the product. None for now; bias, ReLU with an aux
// mask, DRELU_BGRAD and BGRADB are the planned additions.
enum class GemmEpilogue : std::uint8_t { kNone };

// Everything that selects a plan, in row-major terms:
// C[m, n] = alpha * op(A)[m, k] @ op(B)[k, n] + beta * C, all contiguous.
struct GemmDesc {
  std::int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  GemmPrecision precision = GemmPrecision::kF32;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  // Pointer alignments in bytes (powers of two, at most 256). cuBLASLt's
  // heuristic assumes 256 unless told, and a kernel chosen for 256 must not
  // get a row slice that starts mid-way through a 16-byte vector.
  std::uint32_t align_a = 256, align_b = 256, align_c = 256;

  bool operator==(const GemmDesc&) const = default;
};

struct GemmDescHash {
  std::size_t operator()(const GemmDesc& d) const noexcept;
};

// The largest power of two (at most 256) that divides the address.
std::uint32_t pointer_alignment(const void* p);

class CublasLtGemm {
 public:
  // On the current device; the workspace lives there.
  CublasLtGemm();
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // c = alpha * op(a) @ op(b) + beta * c, enqueued on `stream`. Needs m, n, k >= 1.
  // beta == 0 does not read c (NaN there does not propagate).
  void run(const GemmDesc& desc, const float* a, const float* b, float* c, float alpha, float beta,
           cudaStream_t stream);
  std::size_t cached_plans() const { return plans_.size(); }

 private:
  struct Plan;
  const Plan& plan_for(const GemmDesc& desc);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::unordered_map<GemmDesc, std::unique_ptr<Plan>, GemmDescHash> plans_;
};

}  // namespace sprintnet::cuda
