// The CPU device's float GEMM against a plain triple loop in double, with each library
// DLSCALE_CPU_GEMM can name: every transpose combination, leading dimensions wider than the
// matrices, alpha and beta, and a repeated shape, which reuses its cached primitive and choice
// with new pointers. With "fastest" the first call of a shape also times both libraries: an
// accumulating GEMM (beta != 0) must still add into its output exactly once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/errors.hpp"
#include "kernels/cpu/cpu_device.hpp"

namespace dlscale::kernels {
namespace {

struct GemmCase {
  Transpose transpose_a, transpose_b;
  int m, n, k;
  float alpha, beta;
};

// Sets DLSCALE_CPU_GEMM for one test and restores the unset default after it.
class GemmPolicy {
 public:
  explicit GemmPolicy(const std::string& policy) {
    ::setenv("DLSCALE_CPU_GEMM", policy.c_str(), 1);
  }
  ~GemmPolicy() { ::unsetenv("DLSCALE_CPU_GEMM"); }
};

class FloatGemm : public ::testing::TestWithParam<std::tuple<GemmCase, std::string>> {};

TEST_P(FloatGemm, MatchesATripleLoop) {
  const auto& [c, policy] = GetParam();
  const GemmPolicy chosen(policy);
  CpuDevice device(2);
  const bool ta = c.transpose_a == Transpose::yes, tb = c.transpose_b == Transpose::yes;
  // Stored shapes, with 3 columns of padding to make every leading dimension wider than needed.
  const int a_rows = ta ? c.k : c.m, a_cols = ta ? c.m : c.k, lda = a_cols + 3;
  const int b_rows = tb ? c.n : c.k, b_cols = tb ? c.k : c.n, ldb = b_cols + 3;
  const int ldc = c.n + 3;
  std::mt19937 random(7);
  std::uniform_real_distribution<float> value(-1, 1);
  for (int repeat = 0; repeat < 2; ++repeat) {
    std::vector<float> a(std::size_t(a_rows) * lda), b(std::size_t(b_rows) * ldb),
        out(std::size_t(c.m) * ldc);
    for (auto* v : {&a, &b, &out})
      for (float& x : *v) x = value(random);
    const auto a_at = [&](int i, int p) {
      return ta ? a[std::size_t(p) * lda + i] : a[std::size_t(i) * lda + p];
    };
    const auto b_at = [&](int p, int j) {
      return tb ? b[std::size_t(j) * ldb + p] : b[std::size_t(p) * ldb + j];
    };
    std::vector<double> expected(out.begin(), out.end());
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j) {
        double sum = 0;
        for (int p = 0; p < c.k; ++p) sum += double(a_at(i, p)) * b_at(p, j);
        expected[std::size_t(i) * ldc + j] =
            c.alpha * sum + c.beta * double(out[std::size_t(i) * ldc + j]);
      }
    device.math_float().gemm(c.transpose_a, c.transpose_b, c.m, c.n, c.k, c.alpha, a.data(), lda,
                             b.data(), ldb, c.beta, out.data(), ldc);
    double worst = 0;
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j)
        worst = std::max(
            worst, std::abs(out[std::size_t(i) * ldc + j] - expected[std::size_t(i) * ldc + j]));
    // Float products summed over k terms of size <= 1: a few ulps of sqrt(k).
    EXPECT_LT(worst, 1e-5 * (1 + std::sqrt(double(c.k)))) << "repeat " << repeat;
  }
}

INSTANTIATE_TEST_SUITE_P(
    TransposesLeadingDimensionsAlphaBeta, FloatGemm,
    ::testing::Combine(
        ::testing::Values(GemmCase{Transpose::no, Transpose::no, 5, 7, 9, 1, 0},
                          GemmCase{Transpose::no, Transpose::yes, 64, 33, 129, 1, 0},
                          GemmCase{Transpose::yes, Transpose::no, 17, 65, 31, 1, 1},
                          GemmCase{Transpose::yes, Transpose::yes, 8, 8, 300, 0.5f, 0},
                          GemmCase{Transpose::no, Transpose::no, 40, 12, 70, -2, 0.25f},
                          GemmCase{Transpose::no, Transpose::yes, 1, 1, 1000, 1, 1}),
        ::testing::Values("fastest", "onednn", "openblas")));

TEST(FloatGemmPolicy, AnUnknownLibraryIsAUserErrorNamingTheVariable) {
  const GemmPolicy chosen("mkl");
  try {
    CpuDevice device(1);
    FAIL() << "DLSCALE_CPU_GEMM=mkl was accepted";
  } catch (const UserError& error) {
    EXPECT_STREQ(error.what(), "DLSCALE_CPU_GEMM=mkl: want fastest, onednn or openblas");
  }
}

// The strided batches of an attention layer (model/causal_self_attention_layer.hpp): 3 heads of
// width 8 over 20 steps, a head's Q, K and V columns 8 after the previous head's inside rows of
// 3 x 32 values, its scores dense and steps^2 apart. Each batched call must equal the same GEMMs
// made one at a time in double (fp32 within float rounding; bf16 within its 8-bit mantissa, and
// not equal to fp32, or the bf16 copies were never made).
struct BatchedCase {
  const char* what;
  Transpose transpose_a, transpose_b;
  int m, n, k, lda, ldb, ldc;
  std::ptrdiff_t stride_a, stride_b, stride_c;
  float alpha, beta;
};
constexpr int steps = 20, head_width = 8, width = 32, heads = 3;
constexpr std::ptrdiff_t scores = steps * steps;
const BatchedCase batched_cases[] = {
    {"S = Q K^T", Transpose::no, Transpose::yes, steps, steps, head_width, 3 * width, 3 * width,
     steps, head_width, head_width, scores, 0.35f, 0},
    {"O = P V", Transpose::no, Transpose::no, steps, head_width, steps, steps, 3 * width, width,
     scores, head_width, head_width, 1, 0},
    {"dV = P^T dO", Transpose::yes, Transpose::no, steps, head_width, steps, steps, width,
     3 * width, scores, head_width, head_width, 1, 0},
    {"dK = dS^T Q, accumulated", Transpose::yes, Transpose::no, steps, head_width, steps, steps,
     3 * width, 3 * width, scores, head_width, head_width, 0.35f, 0.5f}};

std::vector<float> batched_result(CpuDevice& device, const BatchedCase& c,
                                  const std::vector<float>& a, const std::vector<float>& b,
                                  std::vector<float> out) {
  device.math_float().gemm_strided_batched(c.transpose_a, c.transpose_b, c.m, c.n, c.k, c.alpha,
                                           a.data(), c.lda, c.stride_a, b.data(), c.ldb, c.stride_b,
                                           c.beta, out.data(), c.ldc, c.stride_c, heads);
  return out;
}

TEST(FloatGemmStridedBatched, AttentionHeadsMatchOneGemmAtATime) {
  CpuDevice fp32(2), bf16(2, Precision::bf16);
  std::mt19937 random(11);
  std::uniform_real_distribution<float> value(-1, 1);
  const std::size_t buffer = std::size_t(heads) * scores + std::size_t(steps) * 3 * width;
  for (const BatchedCase& c : batched_cases) {
    std::vector<float> a(buffer), b(buffer), out(buffer);
    for (auto* v : {&a, &b, &out})
      for (float& x : *v) x = value(random);
    std::vector<double> expected(out.begin(), out.end());
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < c.m; ++i)
        for (int j = 0; j < c.n; ++j) {
          double sum = 0;
          for (int p = 0; p < c.k; ++p) {
            const float x = c.transpose_a == Transpose::yes
                                ? a[h * c.stride_a + std::size_t(p) * c.lda + i]
                                : a[h * c.stride_a + std::size_t(i) * c.lda + p];
            const float y = c.transpose_b == Transpose::yes
                                ? b[h * c.stride_b + std::size_t(j) * c.ldb + p]
                                : b[h * c.stride_b + std::size_t(p) * c.ldb + j];
            sum += double(x) * y;
          }
          double& result = expected[h * c.stride_c + std::size_t(i) * c.ldc + j];
          result = c.alpha * sum + c.beta * result;
        }
    const auto float_out = batched_result(fp32, c, a, b, out);
    const auto bf16_out = batched_result(bf16, c, a, b, out);
    double worst = 0, worst_bf16 = 0;
    for (std::size_t i = 0; i < buffer; ++i) {
      worst = std::max(worst, std::abs(float_out[i] - expected[i]));
      worst_bf16 = std::max(worst_bf16, std::abs(bf16_out[i] - expected[i]));
    }
    EXPECT_LT(worst, 1e-5 * (1 + std::sqrt(double(c.k)))) << c.what;
    // bf16 operands: each product off by up to 2^-8 relative, k of them of size <= 1.
    EXPECT_LT(worst_bf16, 2 * std::ldexp(1.0, -8) * c.k) << c.what;
    EXPECT_NE(float_out, bf16_out) << c.what << ": the bf16 device multiplied in float";
  }
}

}  // namespace
}  // namespace dlscale::kernels
