// Statistics and summary metrics against values worked out by hand (and by NumPy for quantiles).
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/run_summary.hpp"
#include "analysis/statistics.hpp"

namespace dlscale::analysis {
namespace {

TEST(Statistics, QuantilesInterpolateLikeNumpy) {
  const std::vector<double> samples = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(quantile(samples, 0.05), 1.15);  // numpy.percentile([1,2,3,4], 5)
  EXPECT_DOUBLE_EQ(median(samples), 2.5);
  EXPECT_DOUBLE_EQ(quantile(samples, 0.95), 3.85);
}

TEST(Statistics, DescribeReportsEveryStatistic) {
  const std::vector<double> samples = {1, 2, 3, 4, 10};
  const auto statistics = describe(samples);
  EXPECT_DOUBLE_EQ(statistics.median, 3);
  EXPECT_DOUBLE_EQ(statistics.mean, 4);
  EXPECT_DOUBLE_EQ(statistics.min, 1);
  EXPECT_DOUBLE_EQ(statistics.max, 10);
}

TEST(Statistics, EmptySampleIsAnError) {
  EXPECT_THROW(median(std::vector<double>{}), std::invalid_argument);
}

// Two ranks, one warm-up and two measured iterations, with hand-picked phase times.
results::RunRecord two_rank_record() {
  results::RunRecord record;
  record.ranks = 2;
  record.iterations = 3;
  record.configuration.warmup_iterations = 1;
  record.configuration.measured_iterations = 2;
  record.configuration.batch_per_rank = 10;
  record.configuration.parameter_count = 250'000'000;  // 1 GB of float gradients
  record.configuration.training_flops_per_sample = 1e9;
  // forward, backward, allreduce, update per (iteration, rank); step is their sum.
  const double phases[3][2][4] = {{{9, 9, 9, 9}, {9, 9, 9, 9}},  // warm-up, ignored
                                  {{1, 2, 0.5, 0.5}, {2, 2, 0.25, 0.75}},
                                  {{1, 2, 1.0, 0.0}, {1, 1, 0.5, 0.0}}};
  for (auto& iteration : phases)
    for (auto& rank : iteration) {
      double step = 0;
      for (double seconds : rank) {
        record.phase_seconds.push_back(seconds);
        step += seconds;
      }
      record.phase_seconds.push_back(step);
    }
  record.parameter_fingerprints = {42, 42};
  return record;
}

TEST(RunSummary, ThroughputUsesTheSlowestRankOfEachIteration) {
  const auto summary = summarize(two_rank_record());
  // Steps: iteration 1 -> 4 and 5 s, iteration 2 -> 4 and 2.5 s; slowest sum 9 s for 40 samples.
  EXPECT_DOUBLE_EQ(summary.throughput_samples_per_second, 40.0 / 9.0);
}

TEST(RunSummary, CommunicationFractionIsAllreduceOverStepTime) {
  const auto summary = summarize(two_rank_record());
  EXPECT_DOUBLE_EQ(summary.communication_fraction, (0.5 + 0.25 + 1.0 + 0.5) / (4 + 5 + 4 + 2.5));
}

TEST(RunSummary, BusBandwidthFollowsNcclTests) {
  const auto summary = summarize(two_rank_record());
  // Fastest rank's allreduce per iteration: 0.25 and 0.5 s; median 0.375 s for 1e9 bytes.
  EXPECT_DOUBLE_EQ(summary.allreduce_seconds, 0.375);
  EXPECT_DOUBLE_EQ(summary.allreduce_algbw_gbps, 1.0 / 0.375);
  EXPECT_DOUBLE_EQ(summary.allreduce_busbw_gbps, 1.0 / 0.375 * 2 * (2 - 1) / 2);
}

// Under --grad-dtype bf16 the buckets hold half the parameters' float bytes, and the bandwidth is
// of what was sent.
TEST(RunSummary, BusBandwidthCountsTheBytesTheBucketsSent) {
  auto record = two_rank_record();
  record.buckets = {{0, 1, 0.2e9}, {2, 3, 0.3e9}};
  const auto summary = summarize(record);
  EXPECT_DOUBLE_EQ(summary.allreduce_bytes, 0.5e9);
  EXPECT_DOUBLE_EQ(summary.allreduce_algbw_gbps, 0.5 / 0.375);
}

TEST(RunSummary, LoadImbalanceIsComputeSpreadPerIteration) {
  const auto summary = summarize(two_rank_record());
  // Compute (forward + backward + update): iteration 1 -> 3.5 and 4.75; iteration 2 -> 3 and 2.
  ASSERT_EQ(summary.load_imbalance_seconds.size(), 2u);
  EXPECT_DOUBLE_EQ(summary.load_imbalance_seconds[0], 1.25);
  EXPECT_DOUBLE_EQ(summary.load_imbalance_seconds[1], 1.0);
}

TEST(RunSummary, AchievedGflopsUsesEachRanksMedianStep) {
  const auto summary = summarize(two_rank_record());
  ASSERT_EQ(summary.gflops_per_rank.size(), 2u);
  EXPECT_DOUBLE_EQ(summary.gflops_per_rank[0], 10 * 1e9 / 4.0 / 1e9);
  EXPECT_DOUBLE_EQ(summary.gflops_per_rank[1], 10 * 1e9 / 3.75 / 1e9);
}

// A language model's sample is a sequence: its users count the tokens in it.
TEST(RunSummary, TokensPerSecondIsTheJobsThroughputTimesTheTokensPerSample) {
  auto record = two_rank_record();
  record.configuration.tokens_per_sample = 128;
  EXPECT_DOUBLE_EQ(summarize(record).tokens_per_second, 40.0 / 9.0 * 128);
}

TEST(RunSummary, AModelWithoutTokensHasNoTokensPerSecond) {
  EXPECT_TRUE(std::isnan(summarize(two_rank_record()).tokens_per_second));
}

// MFU (PaLM, appendix B) against the GEMM measured on this device: the ranks' mean achieved
// GFLOP/s, 2.5 and 10/3.75, over the yardstick.
TEST(RunSummary, MfuIsTheMeanGflopsPerRankOverTheGemmMeasuredOnThisDevice) {
  auto record = two_rank_record();
  record.environment.device_gemm_gflops = 20;
  EXPECT_DOUBLE_EQ(summarize(record).model_flops_utilisation, (2.5 + 10 / 3.75) / 2 / 20);
}

TEST(RunSummary, NoMfuWithoutAYardstick) {
  EXPECT_TRUE(std::isnan(summarize(two_rank_record()).model_flops_utilisation));
}

TEST(RunSummary, WarmupIsLeftOutOfPhaseStatistics) {
  const auto summary = summarize(two_rank_record());
  EXPECT_DOUBLE_EQ(summary.phase_statistics[index_of(Phase::forward)].max, 2.0);
}

TEST(RunSummary, DifferingFingerprintsAreReported) {
  auto record = two_rank_record();
  EXPECT_TRUE(summarize(record).parameters_identical);
  record.parameter_fingerprints[1] = 43;
  EXPECT_FALSE(summarize(record).parameters_identical);
}

}  // namespace
}  // namespace dlscale::analysis
