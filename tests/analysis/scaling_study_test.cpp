// The study metrics on hand-made runs whose answers are known: efficiency for weak and strong
// scaling, speedup, Karp-Flatt, the gap split, the straggler, and the bootstrap interval.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

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

// A merged study of a CPU job and a GPU job: each device scales against its own baseline (a GPU
// point measured against the CPU's one rank would count the GPU's speed as scaling), and the
// points are listed device by device, as the runs first name them.
TEST(ScalingStudy, EachDeviceScalesAgainstItsOwnBaseline) {
  const auto on = [](const std::string& device, results::RunRecord run) {
    run.configuration.device = device;
    return run;
  };
  const auto study = analyze_study(
      {on("cuda", run_of({0.1, 0.1}, 0.025, 32, "weak")), on("cpu", run_of({1.0}, 0, 32, "weak")),
       on("cuda", run_of({0.1}, 0, 32, "weak")), on("cpu", run_of({1.0, 1.0}, 0.5, 32, "weak"))});
  ASSERT_EQ(study.points.size(), 4u);
  const std::vector<std::pair<std::string, int>> expected_order = {
      {"cuda", 1}, {"cuda", 2}, {"cpu", 1}, {"cpu", 2}};
  for (std::size_t k = 0; k < expected_order.size(); ++k) {
    EXPECT_EQ(study.points[k].device, expected_order[k].first) << "point " << k;
    EXPECT_EQ(study.points[k].ranks, expected_order[k].second) << "point " << k;
  }
  EXPECT_DOUBLE_EQ(study.points[0].efficiency, 1.0);
  EXPECT_DOUBLE_EQ(study.points[1].efficiency, 0.8);  // 0.1 / 0.125
  EXPECT_DOUBLE_EQ(study.points[2].efficiency, 1.0);
  EXPECT_DOUBLE_EQ(study.points[3].efficiency, 2.0 / 3.0);  // 1 / 1.5
  ASSERT_EQ(study.configurations.size(), 4u);
  EXPECT_EQ(study.configurations[0].device, "cuda");
  EXPECT_EQ(study.configurations[3].device, "cpu");
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

// A language model's point counts its throughput in tokens too, and carries its run's MFU.
TEST(ScalingStudy, ALanguageModelsPointHasTokensPerSecondAndItsRunsMfu) {
  auto two = run_of({1.0, 1.0}, 0.25, 32, "weak");
  two.configuration.tokens_per_sample = 64;
  two.summary.model_flops_utilisation = 0.4;
  const auto study = analyze_study({two});
  ASSERT_EQ(study.points.size(), 1u);
  EXPECT_DOUBLE_EQ(study.points[0].tokens_per_second, 64 / 1.25 * 64);
  EXPECT_DOUBLE_EQ(study.points[0].model_flops_utilisation, 0.4);
}

TEST(ScalingStudy, AModelWithoutTokensOrAYardstickLeavesBothNaN) {
  const auto study = analyze_study({run_of({1.0}, 0, 32, "weak")});
  EXPECT_TRUE(std::isnan(study.points[0].tokens_per_second));
  EXPECT_TRUE(std::isnan(study.points[0].model_flops_utilisation));
}

}  // namespace
}  // namespace dlscale::analysis

namespace dlscale::analysis {
namespace {

// A run trained to held-out accuracy 0.8, evaluated every 10 steps, that first met it at
// evaluation `reached` (accuracy 0.5 before), with `noise_scale` as its summary measured.
results::RunRecord trained_to_target(std::vector<double> compute, int batch, int reached,
                                     double noise_scale) {
  results::RunRecord run = run_of(compute, 0, batch, "weak", 10 * (reached + 1));
  run.configuration.target = results::Target{results::TargetMetric::accuracy, 0.8};
  run.summary.noise_scale = noise_scale;
  for (int k = 0; k <= reached; ++k)
    run.evaluations.push_back({10 * k + 9, double(10 * (k + 1) * batch * run.ranks), 10.0 * (k + 1),
                               k == reached ? 0.85 : 0.5, 1.0});
  return run;
}

TEST(ScalingStudy, GoodputFromTheNoiseScaleOfTheSmallestBatchAndMeasuredSamplesToTarget) {
  // 1 rank reaches the target after 40 steps of 32 (1280 samples); 2 ranks after 30 steps of
  // 64 (1920); 4 ranks after 20 of 128 (2560). B_noise: 96 at global batch 64, 500 at 128: the
  // model uses the smallest batch's, 96.
  const auto study = analyze_study({trained_to_target({1.0}, 32, 3, std::nan("")),
                                    trained_to_target({1.0, 1.0}, 32, 2, 96),
                                    trained_to_target({1.0, 1.0, 1.0, 1.0}, 32, 1, 500)});
  ASSERT_EQ(study.points.size(), 3u);
  const auto& one = study.points[0];
  const auto& two = study.points[1];
  const auto& four = study.points[2];
  EXPECT_EQ(two.global_batch, 64);
  EXPECT_TRUE(std::isnan(one.noise_scale));
  EXPECT_DOUBLE_EQ(four.noise_scale, 500);
  for (const auto* point : {&one, &two, &four}) EXPECT_DOUBLE_EQ(point->noise_scale_used, 96);
  EXPECT_DOUBLE_EQ(one.statistical_efficiency_model, 1.0);
  EXPECT_DOUBLE_EQ(two.statistical_efficiency_model, (96.0 + 32) / (96 + 64));
  EXPECT_DOUBLE_EQ(four.statistical_efficiency_model, (96.0 + 32) / (96 + 128));
  EXPECT_DOUBLE_EQ(four.goodput_samples_per_second,
                   four.throughput_samples_per_second * four.statistical_efficiency_model);
  EXPECT_DOUBLE_EQ(one.samples_to_target, 1280);
  EXPECT_DOUBLE_EQ(two.samples_to_target, 1920);
  EXPECT_DOUBLE_EQ(two.statistical_efficiency, 1280.0 / 1920);
  EXPECT_DOUBLE_EQ(four.statistical_efficiency, 1280.0 / 2560);
  EXPECT_DOUBLE_EQ(four.seconds_to_target, 20);
  EXPECT_DOUBLE_EQ(four.time_to_target_speedup, 40.0 / 20);
}

// Evaluations every 10 steps: each run crossed its target somewhere after the evaluation before
// the one that saw it, so the measured ratios are known only to an interval.
TEST(ScalingStudy, MeasuredConvergenceRatiosCarryTheIntervalTheEvaluationSpacingAllows) {
  const auto study = analyze_study({trained_to_target({1.0}, 32, 3, std::nan("")),
                                    trained_to_target({1.0, 1.0}, 32, 2, 96),
                                    trained_to_target({1.0, 1.0, 1.0, 1.0}, 32, 0, 500)});
  const auto& one = study.points[0];
  const auto& two = study.points[1];
  const auto& four = study.points[2];
  // The baseline against itself is exactly 1, wherever it crossed.
  EXPECT_DOUBLE_EQ(one.statistical_efficiency_low, 1);
  EXPECT_DOUBLE_EQ(one.statistical_efficiency_high, 1);
  // Baseline in (960, 1280] samples, 2 ranks in (1280, 1920].
  EXPECT_DOUBLE_EQ(two.statistical_efficiency_low, 960.0 / 1920);
  EXPECT_DOUBLE_EQ(two.statistical_efficiency_high, 1280.0 / 1280);
  // Baseline in (30, 40] seconds, 2 ranks in (20, 30].
  EXPECT_DOUBLE_EQ(two.time_to_target_speedup_low, 30.0 / 30);
  EXPECT_DOUBLE_EQ(two.time_to_target_speedup_high, 40.0 / 20);
  // 4 ranks met the target at their first evaluation: anywhere from the start.
  EXPECT_DOUBLE_EQ(four.statistical_efficiency_low, 960.0 / 1280);
  EXPECT_TRUE(std::isinf(four.statistical_efficiency_high));
  EXPECT_TRUE(std::isinf(four.time_to_target_speedup_high));
  for (const auto* point : {&one, &two, &four}) {
    EXPECT_LE(point->statistical_efficiency_low, point->statistical_efficiency);
    EXPECT_GE(point->statistical_efficiency_high, point->statistical_efficiency);
  }
}

TEST(ScalingStudy, NoNoiseScaleOrTargetLeavesTheConvergenceColumnsNaN) {
  const auto study =
      analyze_study({run_of({1.0, 1.0}, 0.25, 32, "weak"), run_of({1.0}, 0, 32, "weak")});
  for (const auto& point : study.points) {
    EXPECT_TRUE(std::isnan(point.statistical_efficiency_model));
    EXPECT_TRUE(std::isnan(point.goodput_samples_per_second));
    EXPECT_TRUE(std::isnan(point.samples_to_target));
    EXPECT_TRUE(std::isnan(point.statistical_efficiency));
  }
}

}  // namespace
}  // namespace dlscale::analysis
