// Sweep statistics against values worked out by hand: a call counts at its slowest rank,
// quantiles interpolate like NumPy, mean, min and max are the calls', busbw = algbw * the
// collective's factor in both placements, nccl-tests' average bus bandwidth, and the fits divide by
// the collective's own model.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/comm_sweep_summary.hpp"

namespace dlscale::analysis {
namespace {

// One size of 1 MB and three measured calls on `ranks` ranks, in place: rank 0's times are
// {1, 2, 3} ms, and every other rank is 1 ms slower in the second call only. Out of place, every
// call takes 4 ms on every rank.
results::SweepTimes three_calls(int ranks) {
  results::SweepTimes times;
  times.sizes.push_back({});
  times.sizes[0].count = 250'000;
  times.sizes[0].bytes = 1'000'000;
  times.out_of_place_sizes = times.sizes;
  for (int i = 0; i < 3; ++i)
    for (int r = 0; r < ranks; ++r) {
      times.seconds.push_back(1e-3 * (i + 1) + (r > 0 && i == 1 ? 1e-3 : 0));
      times.out_of_place_seconds.push_back(4e-3);
    }
  return times;
}

void summarize_allreduce(results::SweepTimes& times, int ranks) {
  summarize_sweep_times(times, ranks, 3, 2.0 * (ranks - 1) / ranks, ring_allreduce_hops(ranks));
}

TEST(CommSweepSummary, EachCallCountsAtItsSlowestRank) {
  auto times = three_calls(2);
  summarize_allreduce(times, 2);
  // Slowest-rank times {1, 3, 3} ms: p50 3 ms, p95 3 ms, mean 7/3 ms, min 1 ms, max 3 ms.
  const auto& size = times.sizes[0];
  EXPECT_DOUBLE_EQ(size.seconds_p50, 3e-3);
  EXPECT_DOUBLE_EQ(size.seconds_p95, 3e-3);
  EXPECT_DOUBLE_EQ(size.seconds_mean, 7e-3 / 3);
  EXPECT_DOUBLE_EQ(size.seconds_min, 1e-3);
  EXPECT_DOUBLE_EQ(size.seconds_max, 3e-3);
}

TEST(CommSweepSummary, QuantilesInterpolateBetweenCalls) {
  auto times = three_calls(1);
  summarize_allreduce(times, 1);
  // {1, 2, 3} ms: numpy.percentile(..., 95) = 2.9 ms.
  EXPECT_DOUBLE_EQ(times.sizes[0].seconds_p50, 2e-3);
  EXPECT_NEAR(times.sizes[0].seconds_p95, 2.9e-3, 1e-15);
}

TEST(CommSweepSummary, BandwidthsFollowNcclTestsDefinitionsInBothPlacements) {
  auto times = three_calls(4);
  summarize_allreduce(times, 4);
  const auto& size = times.sizes[0];
  EXPECT_DOUBLE_EQ(size.algbw_gbps_p50, 1e6 / 3e-3 / 1e9);
  EXPECT_DOUBLE_EQ(size.busbw_gbps_p50, size.algbw_gbps_p50 * 1.5);  // 2(4-1)/4
  EXPECT_DOUBLE_EQ(size.busbw_gbps_p95, size.algbw_gbps_p95 * 1.5);
  const auto& out_of_place = times.out_of_place_sizes[0];
  EXPECT_DOUBLE_EQ(out_of_place.seconds_p50, 4e-3);
  EXPECT_DOUBLE_EQ(out_of_place.busbw_gbps_p50, 1e6 / 4e-3 / 1e9 * 1.5);
}

TEST(CommSweepSummary, TheBusFactorIsTheCollectives) {
  auto times = three_calls(4);
  // A reduce-scatter on 4 ranks: (n-1)/n, 3 steps.
  summarize_sweep_times(times, 4, 3, 0.75, HopModel{3, 0.75});
  EXPECT_DOUBLE_EQ(times.sizes[0].busbw_gbps_p50, times.sizes[0].algbw_gbps_p50 * 0.75);
}

TEST(CommSweepSummary, AverageBusBandwidthIsOverBothPlacements) {
  auto times = three_calls(2);
  summarize_allreduce(times, 2);
  EXPECT_DOUBLE_EQ(
      average_busbw_gbps(times),
      (times.sizes[0].busbw_gbps_p50 + times.out_of_place_sizes[0].busbw_gbps_p50) / 2);
}

TEST(CommSweepSummary, OneRankMovesNoBusBytes) {
  auto times = three_calls(1);
  summarize_allreduce(times, 1);
  EXPECT_GT(times.sizes[0].algbw_gbps_p50, 0);
  EXPECT_EQ(times.sizes[0].busbw_gbps_p50, 0);
}

TEST(CommSweepSummary, TheFitGoesThroughTheInPlaceTimes) {
  // Two sizes on a line of 10 us + 1 ns per byte in place; out of place twice as slow.
  results::SweepTimes times;
  for (const std::uint64_t bytes : {1000, 100000}) {
    results::CommSizeStatistics size;
    size.bytes = bytes;
    size.count = bytes / 4;
    times.sizes.push_back(size);
    times.out_of_place_sizes.push_back(size);
    const double seconds = 1e-5 + 1e-9 * double(bytes);
    for (int i = 0; i < 3; ++i) {
      times.seconds.push_back(seconds);
      times.out_of_place_seconds.push_back(2 * seconds);
    }
  }
  summarize_sweep_times(times, 1, 3, 1, HopModel{3, 0.75});
  EXPECT_NEAR(times.fit.line_intercept_seconds, 1e-5, 1e-12);
  EXPECT_NEAR(times.fit.line_seconds_per_byte, 1e-9, 1e-15);
  EXPECT_NEAR(times.fit.alpha_seconds, 1e-5 / 3, 1e-12);
}

}  // namespace
}  // namespace dlscale::analysis
