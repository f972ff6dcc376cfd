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

}  // namespace
}  // namespace dlscale::kernels
