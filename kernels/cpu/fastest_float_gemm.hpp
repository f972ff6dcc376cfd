// Float GEMMs on oneDNN's matmul, or on OpenBLAS's sgemm for a shape where that is clearly faster
// on this CPU and thread count, measured the first time the shape is seen (as cudnn.benchmark
// does for convolutions). Which library wins changes with the CPU, and the CPUs of one cluster,
// or of one cloud VM from day to day, differ: docs/performance.md has the measurements.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/dnnl_matmul.hpp"
#include "kernels/device.hpp"

namespace dlscale::kernels {

enum class FloatGemmLibrary { onednn, openblas };

// Which library runs float GEMMs: the faster one for each shape (the default), or always one.
enum class FloatGemmPolicy { fastest, onednn, openblas };
inline constexpr EnumNames<FloatGemmPolicy, 3> float_gemm_policy_names{
    {"fastest", "onednn", "openblas"}};  // DLSCALE_CPU_GEMM

// The policy DLSCALE_CPU_GEMM names (unset or empty: fastest); any other value is a UserError
// that names the variable.
FloatGemmPolicy float_gemm_policy();

class FastestFloatGemm {
 public:
  FastestFloatGemm(DnnlMatmul& matmul, FloatGemmPolicy policy);

  // c[m x n] = alpha * op(a) * op(b) + beta * c, row-major with leading dimensions, as
  // MathOps::gemm. The first call of a shape also times both libraries on a scratch output.
  void multiply(Transpose transpose_a, Transpose transpose_b, int m, int n, int k, float alpha,
                const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
  // As MathOps::gemm_strided_batched: oneDNN's matmul with a batch dimension, or the GEMMs one at
  // a time through multiply(), whichever the first call of the shape timed faster (small
  // matrices on one thread can go either way).
  void multiply_batched(Transpose transpose_a, Transpose transpose_b, int m, int n, int k,
                        float alpha, const float* a, int lda, std::ptrdiff_t stride_a,
                        const float* b, int ldb, std::ptrdiff_t stride_b, float beta, float* c,
                        int ldc, std::ptrdiff_t stride_c, int count);

 private:
  using BatchedShape = std::tuple<bool, bool, int, int, int, int, int, int, std::ptrdiff_t,
                                  std::ptrdiff_t, std::ptrdiff_t, int>;
  using Shape = std::tuple<bool, bool, int, int, int, int, int, int>;
  void run(FloatGemmLibrary library, Transpose transpose_a, Transpose transpose_b, int m, int n,
           int k, float alpha, const float* a, int lda, const float* b, int ldb, float beta,
           float* c, int ldc);
  FloatGemmLibrary choose(Transpose transpose_a, Transpose transpose_b, int m, int n, int k,
                          const float* a, int lda, const float* b, int ldb, int ldc);

  DnnlMatmul& matmul_;
  FloatGemmPolicy policy_;
  std::map<Shape, FloatGemmLibrary> choices_;
  std::vector<float> scratch_output_;
  std::map<BatchedShape, bool> batched_wins_;  // true: oneDNN's batch, false: one at a time
  std::vector<float> batched_scratch_output_;
};

}  // namespace dlscale::kernels
