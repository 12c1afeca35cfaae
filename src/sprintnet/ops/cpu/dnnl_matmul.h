#pragma once
// One matrix product of the compiled CPU step, planned once in oneDNN (docs/PERFORMANCE.md,
// "GEMM libraries": oneDNN measured 2x OpenBLAS on our shapes in fp32, 3.8x in bf16):
// C[m,n] (fp32, row-major) = A[m,k] B[k,n] (+ bias[n]) (then ReLU), with A and B given by
// strides, so transposed operands need no copy. The primitive is created in the constructor;
// run() only swaps the data pointers, so a step allocates nothing. Results are identical run to
// run for a fixed thread count (oneDNN's CPU matmul splits work by thread count, without atomics).
#include <cstdint>
#include <memory>
#include <string>

namespace sprintnet::cpu {

enum class MatmulInput { kF32, kBF16 };  // bf16: A and B hold bf16 bits, accumulation is fp32

// Element (i, j) of A is a[i*a_row_stride + j*a_col_stride]; likewise B.
struct MatmulShape {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t a_row_stride = 0, a_col_stride = 1, b_row_stride = 0, b_col_stride = 1;
};

// The products of a linear layer with weight W[out, in] on `rows` samples.
MatmulShape forward_product(std::int64_t rows, std::int64_t in, std::int64_t out);      // Y = X W^T
MatmulShape input_grad_product(std::int64_t rows, std::int64_t in, std::int64_t out);   // dX = dY W
MatmulShape weight_grad_product(std::int64_t rows, std::int64_t in, std::int64_t out);  // dW = dY^T X

class DnnlMatmul {
 public:
  // accumulate: c += a b (oneDNN's sum post-op), for a product split along k.
  DnnlMatmul(const MatmulShape& shape, MatmulInput input, bool with_bias, bool relu, bool accumulate = false);
  ~DnnlMatmul();
  DnnlMatmul(DnnlMatmul&&) noexcept;
  DnnlMatmul& operator=(DnnlMatmul&&) noexcept;
  // c = a b (+ bias) (then ReLU), or c += a b. bias is read only when the product was planned with one.
  void run(const void* a, const void* b, const float* bias, float* c) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX); without it oneDNN would emulate.
bool cpu_has_native_bf16();
// The instruction set oneDNN dispatches to here, e.g. "avx512_core_bf16".
std::string dnnl_cpu_isa();
// The oneDNN library this process runs, e.g. "oneDNN 2.6.3" (Debian 12's).
std::string dnnl_library_version();

}  // namespace sprintnet::cpu
