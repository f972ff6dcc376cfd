// The piecewise alpha-beta fit finds the ranges of a sweep that follow different lines (an eager
// and a rendezvous protocol, a collapse past a cache), keeps alpha and beta physical, and looks up
// the right piece for any size.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "analysis/alpha_beta_fit.hpp"

namespace dlscale::analysis {
namespace {

// 1 KiB, 2 KiB, ..., 64 MiB.
std::vector<double> sweep_bytes() {
  std::vector<double> bytes;
  for (double m = 1024; m <= 64.0 * 1024 * 1024; m *= 2) bytes.push_back(m);
  return bytes;
}

// Three regimes: latency-bound up to 4 KiB (1 us + m / 1 GB/s), rendezvous up to 8 MiB (8 us +
// m / 4 GB/s), and a collapse above (m / 0.5 GB/s).
double three_regimes(double m) {
  if (m <= 4096) return 1e-6 + m / 1e9;
  if (m <= 8.0 * 1024 * 1024) return 8e-6 + m / 4e9;
  return m / 0.5e9;
}

std::vector<double> times_of(const std::vector<double>& bytes) {
  std::vector<double> seconds;
  for (double m : bytes) seconds.push_back(three_regimes(m));
  return seconds;
}

TEST(PiecewiseAlphaBetaFit, FindsEachRegimeOfASweep) {
  const auto bytes = sweep_bytes();
  const auto fit = fit_piecewise_alpha_beta(bytes, times_of(bytes), ring_allreduce_hops(2));
  ASSERT_EQ(fit.pieces.size(), 3u);
  EXPECT_EQ(fit.pieces[0].max_bytes, 4096);
  EXPECT_EQ(fit.pieces[1].min_bytes, 8192);
  EXPECT_EQ(fit.pieces[2].min_bytes, 16.0 * 1024 * 1024);
  EXPECT_NEAR(fit.pieces[1].fit.line_intercept_seconds, 8e-6, 1e-9);
  EXPECT_NEAR(fit.pieces[1].fit.line_seconds_per_byte, 1 / 4e9, 1e-15);
  EXPECT_LT(fit.relative_rms_error, 1e-9);
  EXPECT_LT(fit.max_relative_error, 1e-9);
}

TEST(PiecewiseAlphaBetaFit, IsFarBetterThanOneLineAcrossRegimes) {
  const auto bytes = sweep_bytes();
  const auto seconds = times_of(bytes);
  const auto line = fit_alpha_beta(bytes, seconds, ring_allreduce_hops(2));
  const auto pieces = fit_piecewise_alpha_beta(bytes, seconds, ring_allreduce_hops(2));
  EXPECT_GT(line.relative_rms_error, 0.2);
  EXPECT_LT(pieces.relative_rms_error, 0.01 * line.relative_rms_error);
}

TEST(PiecewiseAlphaBetaFit, OneRegimeStaysOnePiece) {
  const auto bytes = sweep_bytes();
  std::vector<double> seconds;
  for (double m : bytes) seconds.push_back(5e-6 + m / 3e9);
  const auto fit = fit_piecewise_alpha_beta(bytes, seconds, ring_allreduce_hops(4));
  ASSERT_EQ(fit.pieces.size(), 1u);
  // Ring over 4 ranks: t = 6 alpha + 1.5 m beta.
  EXPECT_NEAR(fit.pieces[0].fit.alpha_seconds, 5e-6 / 6, 1e-12);
  EXPECT_NEAR(fit.pieces[0].fit.beta_seconds_per_byte, 1 / 3e9 / 1.5, 1e-18);
}

TEST(PiecewiseAlphaBetaFit, KeepsAlphaAndBetaNonNegative) {
  // A steep collapse: the best free line through it would have a negative intercept.
  const std::vector<double> bytes = {1e6, 2e6, 4e6, 8e6};
  const std::vector<double> seconds = {1e-4, 2e-4, 2e-3, 8e-3};
  const auto fit = fit_piecewise_alpha_beta(bytes, seconds, ring_allreduce_hops(2), 1);
  ASSERT_EQ(fit.pieces.size(), 1u);
  EXPECT_GE(fit.pieces[0].fit.line_intercept_seconds, 0);
  EXPECT_GE(fit.pieces[0].fit.line_seconds_per_byte, 0);
  EXPECT_LT(fit_alpha_beta(bytes, seconds, ring_allreduce_hops(2)).line_intercept_seconds,
            0);  // the free line's
}

TEST(PiecewiseAlphaBetaFit, EveryPieceHasAtLeastTheSizesAsked) {
  const auto bytes = sweep_bytes();
  const auto fit = fit_piecewise_alpha_beta(bytes, times_of(bytes), ring_allreduce_hops(2), 4, 5);
  for (const auto& piece : fit.pieces)
    EXPECT_GE(std::log2(piece.max_bytes / piece.min_bytes) + 1, 5) << piece.min_bytes;
}

TEST(PiecewiseAlphaBetaFit, LooksUpThePieceOfASize) {
  const auto bytes = sweep_bytes();
  const auto fit = fit_piecewise_alpha_beta(bytes, times_of(bytes), ring_allreduce_hops(2));
  EXPECT_EQ(&piece_for(fit, 100), &fit.pieces[0]);  // below the sweep
  EXPECT_EQ(&piece_for(fit, 4096), &fit.pieces[0]);
  EXPECT_EQ(&piece_for(fit, 5000), &fit.pieces[0]);  // nearer 4 KiB than 8 KiB
  EXPECT_EQ(&piece_for(fit, 7000), &fit.pieces[1]);
  EXPECT_EQ(&piece_for(fit, 1e6), &fit.pieces[1]);
  EXPECT_EQ(&piece_for(fit, 1e9), &fit.pieces[2]);  // above the sweep
  EXPECT_NEAR(fitted_seconds(fit, 1e6), three_regimes(1e6), 1e-12);
}

TEST(PiecewiseAlphaBetaFit, SaysSoWhenNothingCanBeFitted) {
  const std::vector<double> bytes = {1024, 1024}, seconds = {1e-5, 1.1e-5};
  const auto fit = fit_piecewise_alpha_beta(bytes, seconds, ring_allreduce_hops(2));
  EXPECT_TRUE(fit.pieces.empty());
  EXPECT_TRUE(std::isnan(fit.relative_rms_error));
  const std::vector<double> one_size = {8}, one_time = {1e-6};
  EXPECT_TRUE(fit_piecewise_alpha_beta(one_size, one_time, ring_allreduce_hops(2)).pieces.empty());
}

TEST(PiecewiseAlphaBetaFit, TwoSizesMakeOnePiece) {
  const std::vector<double> bytes = {1024, 2048}, seconds = {2e-6, 3e-6};
  const auto fit = fit_piecewise_alpha_beta(bytes, seconds, ring_allreduce_hops(2));
  ASSERT_EQ(fit.pieces.size(), 1u);
  EXPECT_NEAR(fit.pieces[0].fit.line_intercept_seconds, 1e-6, 1e-12);
}

}  // namespace
}  // namespace dlscale::analysis
