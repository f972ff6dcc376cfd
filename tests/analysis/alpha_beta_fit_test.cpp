// The alpha-beta fit recovers a known latency and bandwidth from synthetic sweep times, derives
// the per-hop constants of a collective's model (the ring allreduce's, a reduce-scatter's) for n
// ranks, says so when it cannot fit, and tells a latency from an alpha that is none.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "analysis/alpha_beta_fit.hpp"

namespace dlscale::analysis {
namespace {

constexpr double intercept_seconds = 5e-6;    // 5 us
constexpr double seconds_per_byte = 1 / 4e9;  // 4 GB/s

// 8 B, 16 B, ..., 64 MiB, as `dlscale comm -b 8 -e 64M -f 2` sends.
std::vector<double> sweep_bytes() {
  std::vector<double> bytes;
  for (double m = 8; m <= 64.0 * 1024 * 1024; m *= 2) bytes.push_back(m);
  return bytes;
}

std::vector<double> line_times(const std::vector<double>& bytes) {
  std::vector<double> seconds;
  for (double m : bytes) seconds.push_back(intercept_seconds + seconds_per_byte * m);
  return seconds;
}

TEST(AlphaBetaFit, RecoversAnExactLine) {
  const auto bytes = sweep_bytes();
  const auto fit = fit_alpha_beta(bytes, line_times(bytes), ring_allreduce_hops(2));
  EXPECT_NEAR(fit.line_intercept_seconds, intercept_seconds, 1e-9 * intercept_seconds);
  EXPECT_NEAR(fit.line_seconds_per_byte, seconds_per_byte, 1e-9 * seconds_per_byte);
  EXPECT_LT(fit.relative_rms_error, 1e-9);
  EXPECT_LT(fit.max_relative_error, 1e-9);
}

TEST(AlphaBetaFit, DerivesPerHopAlphaAndBetaForTheRankCount) {
  const auto bytes = sweep_bytes();
  // Ring over n = 4: t = 2(n-1) alpha + 2(n-1)/n m beta = 6 alpha + 1.5 m beta.
  const auto fit = fit_alpha_beta(bytes, line_times(bytes), ring_allreduce_hops(4));
  EXPECT_NEAR(fit.alpha_seconds, intercept_seconds / 6, 1e-9 * intercept_seconds);
  EXPECT_NEAR(fit.beta_seconds_per_byte, seconds_per_byte / 1.5, 1e-9 * seconds_per_byte);
  // n = 2: 2 alpha + m beta.
  const auto pair = fit_alpha_beta(bytes, line_times(bytes), ring_allreduce_hops(2));
  EXPECT_NEAR(pair.alpha_seconds, intercept_seconds / 2, 1e-9 * intercept_seconds);
  EXPECT_NEAR(pair.beta_seconds_per_byte, seconds_per_byte, 1e-9 * seconds_per_byte);
}

TEST(AlphaBetaFit, DividesTheLineByTheCollectivesOwnModel) {
  const auto bytes = sweep_bytes();
  // A ring reduce-scatter over n = 4: t = (n-1) alpha + (n-1)/n m beta = 3 alpha + 0.75 m beta.
  const auto fit = fit_alpha_beta(bytes, line_times(bytes), HopModel{3, 0.75});
  EXPECT_NEAR(fit.alpha_seconds, intercept_seconds / 3, 1e-9 * intercept_seconds);
  EXPECT_NEAR(fit.beta_seconds_per_byte, seconds_per_byte / 0.75, 1e-9 * seconds_per_byte);
}

TEST(AlphaMeaning, AnAlphaBetweenZeroAndTheSmallestTimeIsALatency) {
  const auto bytes = sweep_bytes();
  const auto seconds = line_times(bytes);
  EXPECT_EQ(alpha_meaning(fit_alpha_beta(bytes, seconds, ring_allreduce_hops(4)), seconds),
            AlphaMeaning::latency);
}

TEST(AlphaMeaning, ANegativeAlphaIsNoLatency) {
  // 10 GB/s up to 400 kB, then 2 GB/s at 800 kB: the line through them starts below zero.
  const std::vector<double> bytes = {1e5, 2e5, 4e5, 8e5}, seconds = {1e-5, 2e-5, 4e-5, 4e-4};
  const auto fit = fit_alpha_beta(bytes, seconds, ring_allreduce_hops(2));
  ASSERT_LT(fit.alpha_seconds, 0);
  EXPECT_EQ(alpha_meaning(fit, seconds), AlphaMeaning::negative);
}

TEST(AlphaMeaning, AnAlphaAboveTheSmallestTimeIsNoLatency) {
  const std::vector<double> seconds = {2e-6, 3e-6};
  results::AlphaBetaFit fit;
  fit.alpha_seconds = 2.5e-6;
  EXPECT_EQ(alpha_meaning(fit, seconds), AlphaMeaning::above_smallest_time);
  fit.alpha_seconds = 2e-6;
  EXPECT_EQ(alpha_meaning(fit, seconds), AlphaMeaning::latency) << "the smallest time itself";
}

TEST(AlphaMeaning, NoAlphaOnOneRank) {
  const auto bytes = sweep_bytes();
  const auto seconds = line_times(bytes);
  EXPECT_EQ(alpha_meaning(fit_alpha_beta(bytes, seconds, ring_allreduce_hops(1)), seconds),
            AlphaMeaning::no_alpha);
}

TEST(AlphaBetaFit, RelativeNoiseOfOnePercentMovesNeitherConstantMuch) {
  const auto bytes = sweep_bytes();
  auto seconds = line_times(bytes);
  for (std::size_t i = 0; i < seconds.size(); ++i) seconds[i] *= i % 2 == 0 ? 1.01 : 0.99;
  const auto fit = fit_alpha_beta(bytes, seconds, ring_allreduce_hops(2));
  EXPECT_NEAR(fit.line_intercept_seconds, intercept_seconds, 0.02 * intercept_seconds);
  EXPECT_NEAR(fit.line_seconds_per_byte, seconds_per_byte, 0.02 * seconds_per_byte);
  EXPECT_NEAR(fit.relative_rms_error, 0.01, 0.002);
}

TEST(AlphaBetaFit, SmallMessagesStillDecideTheLatency) {
  // Plain least squares would let one slow 64 MiB point drag the intercept far from 5 us; on
  // relative error it costs that one point, not the latency.
  const auto bytes = sweep_bytes();
  auto seconds = line_times(bytes);
  seconds.back() *= 1.3;
  const auto fit = fit_alpha_beta(bytes, seconds, ring_allreduce_hops(2));
  EXPECT_NEAR(fit.line_intercept_seconds, intercept_seconds, 0.05 * intercept_seconds);
}

TEST(AlphaBetaFit, OneRankHasALineButNoHops) {
  const auto bytes = sweep_bytes();
  const auto fit = fit_alpha_beta(bytes, line_times(bytes), ring_allreduce_hops(1));
  EXPECT_NEAR(fit.line_seconds_per_byte, seconds_per_byte, 1e-9 * seconds_per_byte);
  EXPECT_TRUE(std::isnan(fit.alpha_seconds));
  EXPECT_TRUE(std::isnan(fit.beta_seconds_per_byte));
}

TEST(AlphaBetaFit, OneSizeCannotBeFitted) {
  const std::vector<double> bytes = {1024, 1024}, seconds = {1e-5, 1.1e-5};
  const auto fit = fit_alpha_beta(bytes, seconds, ring_allreduce_hops(2));
  EXPECT_TRUE(std::isnan(fit.line_intercept_seconds));
  EXPECT_TRUE(std::isnan(fit.alpha_seconds));
}

TEST(AlphaBetaFit, MismatchedLengthsAreAnError) {
  const std::vector<double> bytes = {8, 16}, seconds = {1e-6};
  EXPECT_THROW(fit_alpha_beta(bytes, seconds, ring_allreduce_hops(2)), std::invalid_argument);
}

}  // namespace
}  // namespace dlscale::analysis
