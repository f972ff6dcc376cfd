// Times both float GEMM libraries once per shape and remembers the faster. A training step repeats
// the same few shapes, so the choice is made in the first (warm-up) step and costs nothing after.
#include "kernels/cpu/fastest_float_gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace dlscale::kernels {

namespace {

// OpenBLAS takes a shape only when it is clearly faster. Where the two are close (on the Zen 4
// this was measured on, every shape of every workload), the choice would otherwise flip from run
// to run with the noise, and with it the rounding of every step.
constexpr double openblas_margin = 0.9;

// The best seconds of each of two ways to compute the same GEMM(s). Each runs once untimed
// (oneDNN makes its primitive, OpenBLAS wakes its threads), then they run alternately, so that a
// scheduler blip cannot land on one of them only: three times, or once for a GEMM of a tenth of a
// second or more (a language model's vocabulary GEMM runs for seconds, and three trials of each of
// its shapes would add half a minute to the first step). Timing tiny GEMMs up to 64 times was
// tried and made the gpt-tiny step bimodal (docs/performance.md), so three it stays.
template <typename First, typename Second>
std::array<double, 2> best_of_alternating_runs(First&& first, Second&& second) {
  using Clock = std::chrono::steady_clock;
  const auto seconds_of = [](auto&& work) {
    const auto start = Clock::now();
    work();
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  std::array<double, 2> best = {seconds_of(first), seconds_of(second)};
  const double shorter = std::min(best[0], best[1]);
  const int timed_runs = shorter >= 0.1 ? 1 : 3;
  for (int run = 0; run < timed_runs; ++run) {
    const double first_seconds = seconds_of(first), second_seconds = seconds_of(second);
    best[0] = run == 0 ? first_seconds : std::min(best[0], first_seconds);
    best[1] = run == 0 ? second_seconds : std::min(best[1], second_seconds);
  }
  return best;
}

CBLAS_TRANSPOSE to_cblas(Transpose transpose) {
  return transpose == Transpose::yes ? CblasTrans : CblasNoTrans;
}

}  // namespace

FloatGemmPolicy float_gemm_policy() {
  const char* value = std::getenv("DLSCALE_CPU_GEMM");
  if (value == nullptr || *value == '\0') return FloatGemmPolicy::fastest;
  const auto policy = float_gemm_policy_names.named(value);
  if (!policy)
    throw UserError(fmt::format("DLSCALE_CPU_GEMM={}: want fastest, onednn or openblas", value));
  return *policy;
}

FastestFloatGemm::FastestFloatGemm(DnnlMatmul& matmul, FloatGemmPolicy policy)
    : matmul_(matmul), policy_(policy) {}

void FastestFloatGemm::run(FloatGemmLibrary library, Transpose transpose_a, Transpose transpose_b,
                           int m, int n, int k, float alpha, const float* a, int lda,
                           const float* b, int ldb, float beta, float* c, int ldc) {
  if (library == FloatGemmLibrary::onednn)
    matmul_.multiply(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_sgemm(CblasRowMajor, to_cblas(transpose_a), to_cblas(transpose_b), m, n, k, alpha, a, lda,
                b, ldb, beta, c, ldc);
}

FloatGemmLibrary FastestFloatGemm::choose(Transpose transpose_a, Transpose transpose_b, int m,
                                          int n, int k, const float* a, int lda, const float* b,
                                          int ldb, int ldc) {
  if (policy_ == FloatGemmPolicy::onednn) return FloatGemmLibrary::onednn;
  if (policy_ == FloatGemmPolicy::openblas) return FloatGemmLibrary::openblas;
  // The trials write a scratch output, never c: a GEMM that accumulates (beta != 0) must run on
  // its real output exactly once.
  scratch_output_.resize(std::size_t(m) * ldc);
  float* scratch = scratch_output_.data();
  const auto with = [&](FloatGemmLibrary library) {
    return [=, this] {
      run(library, transpose_a, transpose_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, scratch, ldc);
    };
  };
  const std::array<double, 2> best_seconds =
      best_of_alternating_runs(with(FloatGemmLibrary::onednn), with(FloatGemmLibrary::openblas));
  return best_seconds[1] < openblas_margin * best_seconds[0] ? FloatGemmLibrary::openblas
                                                             : FloatGemmLibrary::onednn;
}

void FastestFloatGemm::multiply(Transpose transpose_a, Transpose transpose_b, int m, int n, int k,
                                float alpha, const float* a, int lda, const float* b, int ldb,
                                float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  const Shape shape{
      transpose_a == Transpose::yes, transpose_b == Transpose::yes, m, n, k, lda, ldb, ldc};
  auto found = choices_.find(shape);
  if (found == choices_.end())
    found = choices_.emplace(shape, choose(transpose_a, transpose_b, m, n, k, a, lda, b, ldb, ldc))
                .first;
  run(found->second, transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void FastestFloatGemm::multiply_batched(Transpose transpose_a, Transpose transpose_b, int m, int n,
                                        int k, float alpha, const float* a, int lda,
                                        std::ptrdiff_t stride_a, const float* b, int ldb,
                                        std::ptrdiff_t stride_b, float beta, float* c, int ldc,
                                        std::ptrdiff_t stride_c, int count) {
  if (m == 0 || n == 0 || count <= 0) return;
  const auto one_at_a_time = [&](float* output, float output_alpha, float output_beta) {
    for (int i = 0; i < count; ++i)
      multiply(transpose_a, transpose_b, m, n, k, output_alpha, a + i * stride_a, lda,
               b + i * stride_b, ldb, output_beta, output + i * stride_c, ldc);
  };
  const auto batched = [&](float* output, float output_alpha, float output_beta) {
    matmul_.multiply_batched(transpose_a, transpose_b, m, n, k, output_alpha, a, lda, stride_a, b,
                             ldb, stride_b, output_beta, output, ldc, stride_c, count);
  };
  bool batch_wins = policy_ != FloatGemmPolicy::openblas;
  if (policy_ == FloatGemmPolicy::fastest && count > 1) {
    const BatchedShape shape{transpose_a == Transpose::yes,
                             transpose_b == Transpose::yes,
                             m,
                             n,
                             k,
                             lda,
                             ldb,
                             ldc,
                             stride_a,
                             stride_b,
                             stride_c,
                             count};
    auto found = batched_wins_.find(shape);
    if (found == batched_wins_.end()) {
      // As choose(): trials write a scratch output, best of alternating timed runs decides.
      batched_scratch_output_.resize(std::size_t(stride_c) * (count - 1) + std::size_t(m) * ldc);
      float* scratch = batched_scratch_output_.data();
      const std::array<double, 2> best_seconds = best_of_alternating_runs(
          [&] { batched(scratch, 1.0f, 0.0f); }, [&] { one_at_a_time(scratch, 1.0f, 0.0f); });
      found = batched_wins_.emplace(shape, best_seconds[0] <= best_seconds[1]).first;
    }
    batch_wins = found->second;
  }
  if (batch_wins)
    batched(c, alpha, beta);
  else
    one_at_a_time(c, alpha, beta);
}

}  // namespace dlscale::kernels
