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
// host thread. Two products that may run concurrently (on two streams) need
// two instances, since each has one workspace.
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

namespace sprintnet::cuda {

// The operands' element type and how the product is computed. Accumulation is
// always fp32: kTF32 rounds fp32 inputs to TF32 on the matrix units
// (CUBLAS_COMPUTE_32F_FAST_TF32); kBF16/kF16 take 16-bit A and B.
enum class GemmPrecision : std::uint8_t { kF32, kTF32, kBF16, kF16 };
// What cuBLASLt fuses after the product, in our row-major terms (C[m, n]):
//   kBias           C += bias[n] on every row
//   kReluAuxBias    C = relu(C + bias), and the ReLU mask (1 bit per element) into aux
//   kReluAux        C = relu(C), mask into aux
//   kReluBias       C = relu(C + bias), no mask (inference)
//   kRelu           C = relu(C), no mask
//   kDRelu          C *= mask from aux (the ReLU gradient, backward)
//   kBiasGradA      also bias[m] = sum over k of op(A) (a weight-gradient product whose A is
//                   the output gradient yields the bias gradient; cuBLAS's BGRADB)
// Bias vectors have C's element type. The mask matrix has a leading dimension of
// aux_ld(n) bits per row of C.
enum class GemmEpilogue : std::uint8_t { kNone, kBias, kReluAuxBias, kReluAux, kReluBias, kRelu, kDRelu, kBiasGradA };

// Everything that selects a plan, in row-major terms:
// C[m, n] = alpha * op(A)[m, k] @ op(B)[k, n] + beta * C, all contiguous.
struct GemmDesc {
  std::int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  GemmPrecision precision = GemmPrecision::kF32;
  // C in fp32 even when A and B are 16-bit (weight gradients into fp32 master gradients).
  bool c_f32 = false;
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

// Leading dimension, in bits, of the ReLU mask of a C with n columns (cuBLASLt wants a multiple of 128).
inline std::int64_t relu_mask_ld(std::int64_t n) { return (n + 127) / 128 * 128; }
// Bytes of the ReLU mask of an [m, n] C.
inline std::size_t relu_mask_bytes(std::int64_t m, std::int64_t n) {
  return static_cast<std::size_t>(relu_mask_ld(n) / 8 * m);
}

// Pointers of one product. a, b, c point to elements of the types GemmDesc says;
// bias and aux are needed by the epilogues that use them, null otherwise.
struct GemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  float alpha = 1.0f, beta = 0.0f;
  void* bias = nullptr;  // read by kBias/kRelu*Bias, written by kBiasGradA
  void* aux = nullptr;   // written by kReluAux*, read by kDRelu
};

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
  // Any precision and epilogue. Safe to capture in a CUDA graph: it allocates nothing.
  void run(const GemmDesc& desc, const GemmArgs& args, cudaStream_t stream);
  // Whether cuBLASLt has an algorithm for desc (plans it, as run() would); never throws for a
  // missing algorithm, so callers can choose a fallback.
  bool supported(const GemmDesc& desc);
  std::size_t cached_plans() const { return plans_.size(); }

 private:
  struct Plan;
  // Null (with supported() false) when cuBLASLt has no algorithm for desc.
  Plan* plan_for(const GemmDesc& desc);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::unordered_map<GemmDesc, std::unique_ptr<Plan>, GemmDescHash> plans_;
};

}  // namespace sprintnet::cuda
