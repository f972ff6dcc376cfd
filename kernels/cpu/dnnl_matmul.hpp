// Float GEMMs on oneDNN's matmul, one of the two libraries FastestFloatGemm chooses between.
// oneDNN picks its kernel from the CPU's feature flags (AVX2, AVX-512, AMX) at run time, so a CPU
// newer than the library still gets vector kernels, where OpenBLAS 0.3.21 picks its kernel from
// CPU model numbers and falls back to older code on models it does not know.
#pragma once

#include <cstddef>
#include <map>
#include <tuple>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/dnnl_support.hpp"
#include "kernels/device.hpp"

namespace dlscale::kernels {

class DnnlMatmul {
 public:
  // With `inputs` bf16, each GEMM multiplies bf16 copies of a and b (made as they are staged)
  // and accumulates and writes c in float.
  DnnlMatmul(const dnnl::engine& engine, dnnl::stream& stream,
             dnnl::memory::data_type inputs = dnnl::memory::data_type::f32);

  // c[m x n] = alpha * op(a) * op(b) + beta * c, row-major with leading dimensions, as
  // MathOps::gemm. The primitive for each shape is made once and kept.
  void multiply(Transpose transpose_a, Transpose transpose_b, int m, int n, int k, float alpha,
                const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
    multiply_batched(transpose_a, transpose_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc,
                     0, 1);
  }
  // `count` of them at once, matrix i at x + i * stride_x, as MathOps::gemm_strided_batched: one
  // primitive with a batch dimension, which oneDNN spreads over its threads.
  void multiply_batched(Transpose transpose_a, Transpose transpose_b, int m, int n, int k,
                        float alpha, const float* a, int lda, std::ptrdiff_t stride_a,
                        const float* b, int ldb, std::ptrdiff_t stride_b, float beta, float* c,
                        int ldc, std::ptrdiff_t stride_c, int count);

 private:
  using Shape = std::tuple<bool, bool, int, int, int, int, int, int, float, float, int,
                           std::ptrdiff_t, std::ptrdiff_t, std::ptrdiff_t>;
  struct Prepared {
    dnnl::matmul primitive;
    dnnl::memory::desc a, b, c;  // as the caller holds them: float, row-major, strided
    LayoutStage a_read, b_read;  // converted to `inputs_` where that is not float
  };
  Prepared& prepared(const Shape& shape);

  dnnl::engine engine_;
  dnnl::stream& stream_;
  dnnl::memory::data_type inputs_;
  std::map<Shape, Prepared> primitives_;
};

}  // namespace dlscale::kernels
