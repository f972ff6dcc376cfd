// The study metrics on hand-made runs whose answers are known: efficiency for weak and strong
// scaling, speedup, Karp-Flatt, the gap split, the straggler, and the bootstrap interval.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/scaling_study.hpp"

namespace dlscale::analysis {
namespace {

// A run where every rank spends `compute[r]` in forward+backward+update (split 1:2:1) and
// `allreduce` seconds exposed, the same in every iteration; rank steps end together.
results::RunRecord run_of(const std::vector<double>& compute, double allreduce, int batch,
                          const std::string& scaling, int iterations = 4) {
  results::RunRecord run;
  run.ranks = int(compute.size());
  run.iterations = iterations;
  run.configuration.batch_per_rank = batch;
  run.configuration.scaling = scaling;
  for (int r = 0; r < run.ranks; ++r)
    run.environment.rank_hosts.push_back("host" + std::to_string(r));
  for (int i = 0; i < iterations; ++i)
    for (double c : compute) {
      const double step = c + allreduce;
      run.phase_seconds.insert(run.phase_seconds.end(), {c / 4, c / 2, allreduce, c / 4, step});
    }
  return run;
}

TEST(ScalingStudy, WeakScalingEfficiencyIsBaselineTimeOverTime) {
  const auto study =
      analyze_study({run_of({1.0, 1.0}, 0.25, 32, "weak"), run_of({1.0}, 0, 32, "weak")});
  ASSERT_EQ(study.points.size(), 2u);
  EXPECT_EQ(study.baseline_ranks, 1);
  EXPECT_EQ(study.points[0].ranks, 1);
  EXPECT_EQ(study.points[0].run, "run_001");
  EXPECT_DOUBLE_EQ(study.points[0].efficiency, 1.0);
  EXPECT_TRUE(std::isnan(study.points[0].karp_flatt));
  const auto& two = study.points[1];
  EXPECT_DOUBLE_EQ(two.iteration_seconds, 1.25);
  EXPECT_DOUBLE_EQ(two.efficiency, 0.8);
  EXPECT_DOUBLE_EQ(two.speedup, 1.6);
  EXPECT_DOUBLE_EQ(two.throughput_samples_per_second, 64 / 1.25);
  // Karp-Flatt: (1/1.6 - 1/2) / (1 - 1/2) = 0.25.
  EXPECT_DOUBLE_EQ(two.karp_flatt, 0.25);
  EXPECT_DOUBLE_EQ(two.gap_communication, 0.2);
  EXPECT_DOUBLE_EQ(two.gap_load_imbalance, 0.0);
  EXPECT_NEAR(two.gap_other, 0.0, 1e-12);
  // Identical iterations leave no doubt: the interval collapses onto the value.
  EXPECT_DOUBLE_EQ(two.efficiency_ci_low, 0.8);
  EXPECT_DOUBLE_EQ(two.efficiency_ci_high, 0.8);
}

TEST(ScalingStudy, StrongScalingDividesByTheRankCount) {
  // 64 samples: 1 rank takes 2 s; 4 ranks of 16 samples take 0.625 s.
  const auto study = analyze_study(
      {run_of({2.0}, 0, 64, "strong"), run_of({0.5, 0.5, 0.5, 0.5}, 0.125, 16, "strong")});
  EXPECT_EQ(study.scaling, "strong");
  EXPECT_DOUBLE_EQ(study.points[1].speedup, 3.2);
  EXPECT_DOUBLE_EQ(study.points[1].efficiency, 0.8);
}

TEST(ScalingStudy, StragglersAreNamedAndTheirWaitCounted) {
  // Rank 1 computes 1.5 s, rank 0 1 s: the mean is 1.25, so 0.25 s is lost waiting.
  const auto study = analyze_study({run_of({1.0}, 0, 8, "weak"), run_of({1.0, 1.5}, 0, 8, "weak")});
  const auto& two = study.points[1];
  EXPECT_EQ(two.straggler_rank, 1);
  EXPECT_EQ(two.straggler_host, "host1");
  EXPECT_DOUBLE_EQ(two.gap_load_imbalance, 0.25 / 1.5);
  EXPECT_NEAR(two.gap_communication + two.gap_load_imbalance + two.gap_other, 1 - two.efficiency,
              1e-12);
}

TEST(ScalingStudy, NoisyIterationsGiveAnIntervalAroundTheEstimate) {
  auto noisy = run_of({1.0, 1.0}, 0.25, 32, "weak", 12);
  for (int i = 0; i < noisy.iterations; ++i)
    for (int r = 0; r < 2; ++r)
      noisy.phase_seconds[(i * 2 + r) * phase_count + 4] += 0.05 * (i % 4);
  const auto study = analyze_study({run_of({1.0}, 0, 32, "weak"), noisy});
  const auto& two = study.points[1];
  EXPECT_LT(two.efficiency_ci_low, two.efficiency);
  EXPECT_GT(two.efficiency_ci_high, two.efficiency);
  EXPECT_LT(two.iteration_seconds_ci_low, two.iteration_seconds);
  EXPECT_GT(two.iteration_seconds_ci_high, two.iteration_seconds);
}

}  // namespace
}  // namespace dlscale::analysis
