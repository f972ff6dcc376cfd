// Allreduce sweep statistics against values worked out by hand: a call counts at its slowest
// rank, quantiles interpolate like NumPy, busbw = algbw * 2(n-1)/n.
#include <gtest/gtest.h>

#include "analysis/comm_sweep_summary.hpp"

namespace dlscale::analysis {
namespace {

// One size of 1 MB (250,000 floats) and three measured calls on `ranks` ranks; rank 0's times are
// {1, 2, 3} ms, and every other rank is 1 ms slower in the second call only.
results::CommRecord three_calls(int ranks) {
  results::CommRecord record;
  record.ranks = ranks;
  record.measured_iterations = 3;
  record.sizes.push_back({});
  record.sizes[0].count = 250'000;
  record.sizes[0].bytes = 1'000'000;
  for (int i = 0; i < 3; ++i)
    for (int r = 0; r < ranks; ++r)
      record.seconds.push_back(1e-3 * (i + 1) + (r > 0 && i == 1 ? 1e-3 : 0));
  return record;
}

TEST(CommSweepSummary, EachCallCountsAtItsSlowestRank) {
  auto record = three_calls(2);
  summarize_comm_sweep(record);
  // Slowest-rank times {1, 3, 3} ms: p50 3 ms, p95 3 ms.
  EXPECT_DOUBLE_EQ(record.sizes[0].seconds_p50, 3e-3);
  EXPECT_DOUBLE_EQ(record.sizes[0].seconds_p95, 3e-3);
}

TEST(CommSweepSummary, QuantilesInterpolateBetweenCalls) {
  auto record = three_calls(1);
  summarize_comm_sweep(record);
  // {1, 2, 3} ms: numpy.percentile(..., 95) = 2.9 ms.
  EXPECT_DOUBLE_EQ(record.sizes[0].seconds_p50, 2e-3);
  EXPECT_NEAR(record.sizes[0].seconds_p95, 2.9e-3, 1e-15);
}

TEST(CommSweepSummary, BandwidthsFollowNcclTestsDefinitions) {
  auto record = three_calls(4);
  summarize_comm_sweep(record);
  const auto& size = record.sizes[0];
  EXPECT_DOUBLE_EQ(size.algbw_gbps_p50, 1e6 / 3e-3 / 1e9);
  EXPECT_DOUBLE_EQ(size.busbw_gbps_p50, size.algbw_gbps_p50 * 1.5);  // 2(4-1)/4
  EXPECT_DOUBLE_EQ(size.busbw_gbps_p95, size.algbw_gbps_p95 * 1.5);
}

TEST(CommSweepSummary, OneRankMovesNoBusBytes) {
  auto record = three_calls(1);
  summarize_comm_sweep(record);
  EXPECT_GT(record.sizes[0].algbw_gbps_p50, 0);
  EXPECT_EQ(record.sizes[0].busbw_gbps_p50, 0);
}

}  // namespace
}  // namespace dlscale::analysis
