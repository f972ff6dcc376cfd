// The run summary's yardstick: the compute line holds GFLOP/s against the faster of the GEMM
// measured before and after the point (the MFU), says on a line of its own when the two moved
// apart, and explains a fraction above 100% instead of printing it bare; a language model's
// throughput line adds tokens per second; the study's spread across repeats reads as "MEAN +- STD
// (MIN .. MAX)".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "printers/summary_printer.hpp"

namespace dlscale::printers {
namespace {

// One rank, two iterations, reaching `gflops` against a yardstick measured at `before` and
// `after` GFLOP/s (the faster of them is the yardstick, as the driver records it).
results::RunRecord run_at(double gflops, double before, double after) {
  results::RunRecord run;
  run.ranks = 1;
  run.iterations = 2;
  run.configuration.measured_iterations = 2;
  run.loss = {2.0, 1.5};
  run.summary.gflops_per_rank = {gflops};
  run.summary.load_imbalance_seconds = {0, 0};
  run.environment.device_gemm_gflops_before = before;
  run.environment.device_gemm_gflops_after = after;
  run.environment.device_gemm_gflops = std::max(before, after);
  run.summary.model_flops_utilisation =
      results::model_flops_utilisation(gflops, run.environment.device_gemm_gflops);
  return run;
}

// The summary's lines that start with `label`, and the unlabelled lines that continue them.
std::string lines_labelled(const std::string& summary, const std::string& label) {
  std::istringstream lines(summary);
  std::string line, found;
  bool inside = false;
  while (std::getline(lines, line)) {
    if (line.rfind(label, 0) == 0)
      inside = true;
    else if (line.empty() || line[0] != ' ')
      inside = false;
    if (inside) found += line + "\n";
  }
  return found;
}

TEST(SummaryYardstick, ComputeIsAFractionOfTheFasterMeasurement) {
  const std::string summary = format_summary(run_at(118, 215, 236));
  EXPECT_NE(lines_labelled(summary, "compute")
                .find(": MFU 50.0% against the 236 GFLOP/s fp32 GEMM measured on this device"),
            std::string::npos)
      << summary;
}

// The device line names the settings a device ran other than its defaults (the GPU's bf16 images
// and fused attention), where it records any.
TEST(SummaryDevice, NamesTheSettingsThatDifferFromTheDefaults) {
  auto run = run_at(118, 215, 236);
  run.environment.device_properties = {{"cudnn_api", "graph"}, {"image_activations", "float"}};
  const std::string defaults = lines_labelled(format_summary(run), "device");
  EXPECT_NE(defaults.find(", cudnn_api graph\n"), std::string::npos) << defaults;
  run.environment.device_properties.emplace_back("changed_settings",
                                                 "image_activations bf16, attention sdpa");
  const std::string changed = lines_labelled(format_summary(run), "device");
  EXPECT_NE(changed.find(", cudnn_api graph, image_activations bf16, attention sdpa\n"),
            std::string::npos)
      << changed;
}

// Under --precision bf16 the yardstick is a bf16 GEMM, and the line says so.
TEST(SummaryYardstick, NamesTheYardsticksPrecision) {
  auto run = run_at(118, 215, 236);
  run.configuration.precision = "bf16";
  const std::string summary = format_summary(run);
  EXPECT_NE(lines_labelled(summary, "compute")
                .find(": MFU 50.0% against the 236 GFLOP/s bf16 GEMM measured on this device"),
            std::string::npos)
      << summary;
}

TEST(SummaryYardstick, SaysNothingMoreWhenTheMeasurementsAgreeWithin10Percent) {
  const std::string summary = format_summary(run_at(118, 215, 236));
  EXPECT_EQ(lines_labelled(summary, "yardstick"), "") << summary;
}

TEST(SummaryYardstick, SaysWhenTheMeasurementsMovedApartDuringThePoint) {
  const std::string summary = format_summary(run_at(118, 158, 236));
  EXPECT_EQ(lines_labelled(summary, "yardstick"),
            "yardstick       moved 158 -> 236 GFLOP/s from before the point to after it (+49%): "
            "the machine was shared or its clock changed; the faster is the yardstick\n")
      << summary;
}

TEST(SummaryYardstick, ExplainsAFractionAbove100Percent) {
  const std::string summary = format_summary(run_at(184, 156, 158));
  EXPECT_NE(lines_labelled(summary, "compute").find("MFU 116.5% against the 158 GFLOP/s"),
            std::string::npos)
      << summary;
  EXPECT_EQ(lines_labelled(summary, "yardstick"),
            "yardstick       above 100%: this workload's GEMMs ran faster here than the square "
            "one, or its FLOP count credits work it skips (docs/performance.md)\n")
      << summary;
}

TEST(SummaryYardstick, AMovedYardstickBelowTheTrainingRateGetsBothLines) {
  const std::string summary = format_summary(run_at(184, 120, 158));
  EXPECT_EQ(lines_labelled(summary, "yardstick"),
            "yardstick       moved 120 -> 158 GFLOP/s from before the point to after it (+32%): "
            "the machine was shared or its clock changed; the faster is the yardstick\n"
            "                above 100%: other work held back even the faster GEMM measurement, "
            "or this workload's GEMMs ran faster here than the square one\n")
      << summary;
}

// Files from before the two measurements were kept, and runs stopped by a signal (no measurement
// after), have nothing to compare: the yardstick alone is printed.
TEST(SummaryYardstick, OneMeasurementAloneIsNeverCalledMoved) {
  results::RunRecord older = run_at(118, 0, 0);
  older.environment.device_gemm_gflops = 236;
  EXPECT_EQ(lines_labelled(format_summary(older), "yardstick"), "");
  EXPECT_EQ(lines_labelled(format_summary(run_at(118, 158, 0)), "yardstick"), "");
}

// A language model's users count tokens: the throughput line gives the job's tokens per second
// and each rank's share, beside samples per second.
TEST(SummaryThroughput, ALanguageModelGetsTokensPerSecondForTheJobAndPerRank) {
  auto run = run_at(118, 236, 236);
  run.ranks = 2;
  run.loss = {2.0, 2.0, 1.5, 1.5};
  run.configuration.tokens_per_sample = 256;
  run.summary.throughput_samples_per_second = 12.5;
  run.summary.tokens_per_second = 3200;
  const std::string summary = format_summary(run);
  EXPECT_EQ(lines_labelled(summary, "throughput"),
            "throughput      12.5 samples/s (job); 3,200 tokens/s (job), 1,600 tokens/s per rank "
            "(256 tokens per sample)\n")
      << summary;
}

TEST(SummaryThroughput, AModelWithoutTokensGetsSamplesPerSecondAlone) {
  auto run = run_at(118, 236, 236);
  run.summary.throughput_samples_per_second = 12.5;
  const std::string summary = format_summary(run);
  EXPECT_EQ(lines_labelled(summary, "throughput"), "throughput      12.5 samples/s (job)\n")
      << summary;
}

TEST(SummaryThroughput, TheQuietLineGivesALanguageModelsTokensPerSecond) {
  auto run = run_at(118, 236, 236);
  run.configuration.batch_per_rank = 4;
  run.summary.throughput_samples_per_second = 2.5;
  run.summary.tokens_per_second = 640;
  EXPECT_EQ(format_point_line(run).rfind("1 rank x0 threads fp32, batch 4/rank: 2.5 samples/s "
                                         "(640.0 tokens/s), compute-bound",
                                         0),
            0u)
      << format_point_line(run);
}

TEST(SummaryYardstick, NoYardstickNoFraction) {
  const std::string summary = format_summary(run_at(118, 0, 0));
  EXPECT_EQ(lines_labelled(summary, "compute").find(" GEMM measured"), std::string::npos)
      << summary;
  EXPECT_EQ(lines_labelled(summary, "yardstick"), "") << summary;
}

// A spread as wide as its column still leaves a space between "+- STD" and "(min .. max)".
TEST(StudyRepeats, EverySpreadIsSetOffBySpaces) {
  results::StudySummary study;
  study.scaling = "weak";
  study.baseline_ranks = 1;
  for (int repeat : {0, 1}) {
    results::StudyPoint point;
    point.ranks = 1;
    point.repeat = repeat;
    point.run = "run_00" + std::to_string(repeat);
    study.points.push_back(point);
  }
  results::RepeatSpread spread;
  spread.ranks = 1;
  spread.repeats = 2;
  spread.iteration_seconds_mean = 1.5;
  spread.iteration_seconds_std = 0.123456;  // 123.46 ms: six characters, its column's width
  spread.iteration_seconds_min = 1.4;
  spread.iteration_seconds_max = 1.6;
  study.configurations = {spread};
  const std::string table = format_study(study);
  EXPECT_NE(table.find("+- 123.46 (1400.00 .. 1600.00)"), std::string::npos) << table;
}

// A study of a 1-rank baseline and 4 ranks measured at efficiency `efficiency` in [low, high],
// with Karp-Flatt `karp_flatt`.
results::StudySummary study_of(double efficiency, double low, double high, double karp_flatt) {
  results::StudySummary study;
  study.scaling = "weak";
  study.baseline_ranks = 1;
  results::StudyPoint baseline;
  baseline.ranks = 1;
  baseline.efficiency = baseline.efficiency_ci_low = baseline.efficiency_ci_high = 1;
  baseline.karp_flatt = std::nan("");
  results::StudyPoint four = baseline;
  four.ranks = 4;
  four.efficiency = efficiency;
  four.efficiency_ci_low = low;
  four.efficiency_ci_high = high;
  four.karp_flatt = karp_flatt;
  four.straggler_host = "vm";
  study.points = {baseline, four};
  return study;
}

TEST(StudyTable, AKarpFlattAbove1OrBelow0IsMarkedWithWhy) {
  const std::string above = format_study(study_of(0.2, 0.19, 0.21, 3.9));
  EXPECT_NE(above.find("3.900!"), std::string::npos) << above;
  EXPECT_NE(above.find("! Karp-Flatt above 1: the point is slower than its baseline outright"),
            std::string::npos)
      << above;
  const std::string below = format_study(study_of(1.2, 1.19, 1.21, -0.05));
  EXPECT_NE(below.find("-0.050!"), std::string::npos) << below;
  EXPECT_NE(below.find("! Karp-Flatt below 0: the point scaled superlinearly"), std::string::npos)
      << below;
  const std::string inside = format_study(study_of(0.8, 0.79, 0.81, 0.083));
  EXPECT_EQ(inside.find("Karp-Flatt above"), std::string::npos) << inside;
  EXPECT_NE(inside.find("0.083 "), std::string::npos) << inside;
}

TEST(StudyTable, AnEfficiencyIntervalWiderThanHalfItsValueIsFlaggedTooNoisy) {
  const std::string noisy = format_study(study_of(0.6, 0.29, 3.76, 0.2));
  EXPECT_NE(noisy.find("[  29, 376]?"), std::string::npos) << noisy;
  EXPECT_NE(noisy.find("? the efficiency's 95% interval is wider than 50% of its value: too noisy"),
            std::string::npos)
      << noisy;
  const std::string quiet = format_study(study_of(0.6, 0.55, 0.65, 0.2));
  EXPECT_EQ(quiet.find("too noisy"), std::string::npos) << quiet;
}

TEST(StudyTable, NoStragglerAtOneRank) {
  const std::string table = format_study(study_of(0.8, 0.79, 0.81, 0.083));
  std::istringstream lines(table);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind("     1 ", 0) == 0) EXPECT_EQ(line.back(), '-') << line;
}

// A language model's study reads in tokens and MFU; an image model's table has neither column.
TEST(StudyTable, LanguageModelPointsShowTokensAndMfu) {
  EXPECT_EQ(format_study(study_of(0.8, 0.79, 0.81, 0.083)).find("tokens/s"), std::string::npos);
  results::StudySummary study = study_of(0.8, 0.79, 0.81, 0.083);
  study.points[0].tokens_per_second = 1843.5;
  study.points[0].model_flops_utilisation = 0.4123;
  study.points[1].tokens_per_second = 5899.2;  // its MFU unmeasured: a dash, not a number
  const std::string table = format_study(study);
  EXPECT_NE(table.find("tokens/s    MFU"), std::string::npos) << table;
  EXPECT_NE(table.find("     1,844  41.2%"), std::string::npos) << table;
  EXPECT_NE(table.find("     5,899      -"), std::string::npos) << table;
}

TEST(StudyTable, OneRankCountGetsNoScalingTable) {
  results::StudySummary study = study_of(1, 1, 1, std::nan(""));
  study.points.pop_back();
  const std::string table = format_study(study);
  EXPECT_NE(table.find("every point has 1 rank: no scaling table"), std::string::npos) << table;
  EXPECT_EQ(table.find("Karp-Flatt"), std::string::npos) << "a table header:\n" << table;
}

// A study whose 4-rank point reached its target between two evaluations and measured B_noise
// from 4 of its 20 measured iterations.
results::StudySummary converged_study() {
  results::StudySummary study = study_of(0.8, 0.79, 0.81, 0.083);
  for (auto& point : study.points) {
    point.global_batch = 32 * point.ranks;
    point.noise_scale_used = 242.4;
    point.statistical_efficiency_model = 0.9;
    point.samples_to_target = 1280;
    point.seconds_to_target = 40;
    point.statistical_efficiency = point.statistical_efficiency_low =
        point.statistical_efficiency_high = 1;
    point.time_to_target_speedup = point.time_to_target_speedup_low =
        point.time_to_target_speedup_high = 1;
    point.measured_iterations = 20;
  }
  auto& four = study.points[1];
  four.noise_scale = 50.5;
  four.noise_scale_iterations = 4;
  four.statistical_efficiency = 2.0 / 3;
  four.statistical_efficiency_low = 0.5;
  four.statistical_efficiency_high = 1;
  four.time_to_target_speedup = 2;
  four.time_to_target_speedup_low = 1.5;
  four.time_to_target_speedup_high = std::numeric_limits<double>::infinity();
  return study;
}

// The row of `table` that starts with `start`.
std::string row_starting(const std::string& table, const std::string& start, int which = 0) {
  std::istringstream lines(table);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind(start, 0) == 0 && which-- == 0) return line;
  return "";
}

// A CPU job and a GPU job of one rank each, merged: no scaling table, but the two side by side,
// each device's samples/s beside the first's and its MFU against its own GEMM (issue 30, item 5).
TEST(StudyTable, OneRankCountOfTwoDevicesShowsThemSideBySide) {
  results::StudySummary study = study_of(1, 1, 1, std::nan(""));
  study.points.pop_back();
  study.points[0].iteration_seconds = 0.4;
  study.points[0].throughput_samples_per_second = 80;
  study.points[0].model_flops_utilisation = 0.5;
  study.points[0].energy_joules_per_sample = {{"cpu_package", 2.5}};
  results::StudyPoint gpu = study.points[0];
  gpu.device = "cuda";
  gpu.iteration_seconds = 0.1;
  gpu.throughput_samples_per_second = 320;
  gpu.model_flops_utilisation = 0.25;
  gpu.energy_joules_per_sample = {{"gpu_board", 0.625}};
  study.points.push_back(gpu);
  const std::string table = format_study(study);
  EXPECT_NE(table.find("every point has 1 rank: no scaling table"), std::string::npos) << table;
  EXPECT_NE(row_starting(table, "device").find("relative"), std::string::npos) << table;
  const std::string cpu = row_starting(table, "cpu fp32");
  const std::string cuda = row_starting(table, "cuda fp32");
  EXPECT_NE(cpu.find("400.00"), std::string::npos) << table;
  EXPECT_NE(cpu.find("1.00x"), std::string::npos) << table;
  EXPECT_NE(cuda.find("100.00"), std::string::npos) << table;
  EXPECT_NE(cuda.find("320.0"), std::string::npos) << table;
  EXPECT_NE(cuda.find("25.0%"), std::string::npos) << table;
  EXPECT_NE(cuda.find("4.00x"), std::string::npos) << table;
  // Each device's energy in its own column: the CPU's package, the GPU's board, a dash where a
  // device did not measure one.
  const std::string header = row_starting(table, "device");
  ASSERT_NE(header.find("cpu J/sample"), std::string::npos) << table;
  ASSERT_NE(header.find("gpu J/sample"), std::string::npos) << table;
  EXPECT_LT(header.find("cpu J/sample"), header.find("gpu J/sample")) << table;
  EXPECT_NE(cpu.find("2.5            -"), std::string::npos) << table;
  EXPECT_NE(cuda.find("-        0.625"), std::string::npos) << table;
  EXPECT_EQ(table.find("Karp-Flatt"), std::string::npos) << "a scaling header:\n" << table;
}

TEST(StudyConvergence, MeasuredRatiosShowTheIntervalTheEvaluationSpacingAllows) {
  const std::string table = format_study(converged_study());
  const std::string four = row_starting(table, "     4", 1);  // the convergence table's row
  EXPECT_NE(four.find("67% [50, 100]"), std::string::npos) << table;
  EXPECT_NE(four.find("2 [1.5, inf]"), std::string::npos) << table;
  EXPECT_NE(table.find("crossed its target somewhere after the evaluation before"),
            std::string::npos)
      << table;
}

TEST(StudyConvergence, ShowsTheNoiseScaleUsedAndHowManyIterationsEachEstimateUsedAndWhy) {
  const std::string table = format_study(converged_study());
  const std::string four = row_starting(table, "     4", 1);
  EXPECT_NE(four.find("50.5    4/20     242.4"), std::string::npos) << table;
  EXPECT_NE(table.find("its: B_noise from 4 of 20 measured iterations (norms read about every 5th "
                       "iteration, to keep their cost small)"),
            std::string::npos)
      << table;
}

TEST(SummaryNoiseScale, SaysHowManyIterationsTheEstimateUsedAndWhy) {
  auto run = run_at(118, 215, 236);
  run.ranks = 2;
  run.loss = {2.0, 2.0, 1.5, 1.5};
  run.summary.gflops_per_rank = {118, 118};
  run.configuration.measured_iterations = 20;
  run.configuration.batch_per_rank = 32;
  run.summary.noise_scale = 50.5;
  run.summary.noise_scale_ci_low = 39.7;
  run.summary.noise_scale_ci_high = 67.4;
  run.summary.noise_scale_iterations = 4;
  const std::string summary = format_summary(run);
  EXPECT_NE(lines_labelled(summary, "noise scale")
                .find("from 4 of 20 measured iterations (norms read about every 5th iteration, "
                      "to keep their cost small)"),
            std::string::npos)
      << summary;
}

// Two ranks over two measured iterations whose steps take 10 ms: each rank computes
// `compute_ms` (rank 1 `straggler_ms` more) and the fastest rank's allreduce takes
// `allreduce_ms`, against a 100 GFLOP/s yardstick of which it reaches `gflops`.
results::RunRecord two_ranks(double compute_ms, double straggler_ms, double allreduce_ms,
                             double gflops = 50) {
  results::RunRecord run = run_at(gflops, 100, 100);
  run.ranks = 2;
  run.configuration.threads_per_rank = 1;
  run.configuration.device = "cpu";
  run.loss = {2.0, 2.0, 1.5, 1.5};
  run.summary.gflops_per_rank = {gflops, gflops};
  for (int iteration = 0; iteration < run.iterations; ++iteration)
    for (int rank = 0; rank < run.ranks; ++rank) {
      const double compute = (compute_ms + (rank == 1 ? straggler_ms : 0)) * 1e-3;
      // forward, backward, allreduce, update, step
      run.phase_seconds.insert(run.phase_seconds.end(),
                               {compute / 2, compute / 2, allreduce_ms * 1e-3, 0, 10e-3});
    }
  return run;
}

// A measurement that every rank took, with `value` as each sample.
results::MeasurementRecord measured(const std::string& name, const std::string& units, double value,
                                    int ranks) {
  results::MeasurementRecord m;
  m.name = name;
  m.units = units;
  m.shape = results::MeasurementShape::time_series;
  m.headline = results::Headline::mean;
  for (int rank = 0; rank < ranks; ++rank) {
    m.shared_by.push_back("");
    m.absent_reasons.push_back("");
    m.seconds.push_back({0.0, 1.0});
    m.values.push_back({value, value});
  }
  return m;
}

TEST(SummaryVerdict, ComputeBoundSaysTheSharesAndTheYardstickFraction) {
  const std::string verdict = lines_labelled(format_summary(two_ranks(8, 0, 2)), "verdict");
  EXPECT_EQ(verdict,
            "verdict         compute-bound: compute 80%, exposed communication 20%, waiting for "
            "stragglers 0% of the iteration; MFU 50% against the 100 GFLOP/s fp32 GEMM "
            "measured on this device; not oversubscribed\n");
}

TEST(SummaryVerdict, CommunicationBoundWhenExposedCommunicationIsTheLargestShare) {
  const std::string verdict = format_verdict(two_ranks(3, 0, 7));
  EXPECT_EQ(verdict.rfind("verdict         communication-bound: compute 30%, exposed "
                          "communication 70%, waiting for stragglers 0%",
                          0),
            0u)
      << verdict;
}

// Rank 1 computes 16 ms more than rank 0's 1 ms: the mean rank waits 8 ms of the 10 ms step.
TEST(SummaryVerdict, StragglerBoundWhenWaitingForTheSlowestRankIsTheLargestShare) {
  const std::string verdict = format_verdict(two_ranks(1, 16, 0));
  EXPECT_EQ(verdict.rfind("verdict         straggler-bound: compute 20%, exposed communication "
                          "0%, waiting for stragglers 80%",
                          0),
            0u)
      << verdict;
}

TEST(SummaryVerdict, OneRankIsComputeBoundWithNothingToWaitFor) {
  EXPECT_EQ(format_verdict(run_at(118, 236, 236)),
            "verdict         compute-bound: one rank, no communication or stragglers; MFU 50% "
            "against the 236 GFLOP/s fp32 GEMM measured on this device; not oversubscribed\n");
}

TEST(SummaryVerdict, SaysWhenNoYardstickWasMeasured) {
  EXPECT_NE(format_verdict(run_at(118, 0, 0)).find("; no GEMM yardstick measured;"),
            std::string::npos);
}

TEST(SummaryVerdict, OversubscribedWhenARankIsAllowedFewerCpusThanThreads) {
  auto run = two_ranks(8, 0, 2);
  run.configuration.threads_per_rank = 2;
  run.measurements.push_back(measured("process_allowed_cpus", "cpus", 1, 2));
  const std::string verdict = format_verdict(run);
  EXPECT_NE(verdict.find("; OVERSUBSCRIBED: 2 threads per rank on 1 allowed CPU"),
            std::string::npos)
      << verdict;
}

// The quickstart: 4 ranks on 2 cores, 0.09 cores per rank.
TEST(SummaryVerdict, OversubscribedWhenThreadsGotUnderHalfACoreEach) {
  auto run = two_ranks(8, 0, 2);
  run.measurements.push_back(measured("process_cpu_cores", "cores", 0.09, 2));
  const std::string verdict = format_verdict(run);
  EXPECT_NE(verdict.find("; OVERSUBSCRIBED: 1 thread per rank, 0.09 cores used"), std::string::npos)
      << verdict;
  run.measurements.back() = measured("process_cpu_cores", "cores", 0.95, 2);
  EXPECT_NE(format_verdict(run).find("; not oversubscribed"), std::string::npos);
}

// A GPU run's host thread sleeps while the device computes: its cores used say nothing.
TEST(SummaryVerdict, AGpuRunIsNotJudgedByTheHostCoresItUsed) {
  auto run = two_ranks(8, 0, 2);
  run.environment.device_properties.emplace_back("gpu_name", "NVIDIA H200");
  run.measurements.push_back(measured("process_cpu_cores", "cores", 0.09, 2));
  const std::string verdict = format_verdict(run);
  EXPECT_NE(verdict.find("; not oversubscribed"), std::string::npos) << verdict;
}

TEST(SummaryVerdict, SaysWhenTheYardstickMovedDuringThePoint) {
  const std::string verdict = format_verdict(run_at(118, 158, 236));
  EXPECT_NE(verdict.find("; the yardstick MOVED +49% during the point\n"), std::string::npos)
      << verdict;
  EXPECT_EQ(format_verdict(run_at(118, 215, 236)).find("MOVED"), std::string::npos);
}

TEST(SummaryVerdict, QuietLineNamesThePointAndEndsInItsVerdict) {
  auto run = two_ranks(8, 0, 2);
  run.configuration.batch_per_rank = 32;
  run.summary.throughput_samples_per_second = 6400;
  EXPECT_EQ(format_point_line(run).rfind("2 ranks x1 thread fp32, batch 32/rank: 6400.0 "
                                         "samples/s, compute-bound: compute 80%",
                                         0),
            0u)
      << format_point_line(run);
}

TEST(SummaryVerdict, StudyVerdictIsThatOfThePointWithTheMostRanks) {
  const std::string verdict =
      format_study_verdict({run_at(118, 236, 236), two_ranks(3, 0, 7), run_at(118, 158, 236)});
  EXPECT_EQ(verdict.rfind("study verdict   at 2 ranks, the most: communication-bound:", 0), 0u)
      << verdict;
  EXPECT_NE(verdict.find("; 0 of 3 points oversubscribed, the yardstick moved in 1\n"),
            std::string::npos)
      << verdict;
}

// The same absent reason in two points' summaries: the first says it, the second names the
// measurement on one line without repeating it.
TEST(SummaryAbsentReasons, EachReasonOncePerLaunch) {
  auto run = run_at(118, 236, 236);
  run.summary.noise_scale_absent_reason = "one rank has no other to compare with";
  results::MeasurementRecord absent;
  absent.name = "gpu_power_watts";
  absent.units = "W";
  absent.headline = results::Headline::mean;
  absent.shared_by = {""};
  absent.absent_reasons = {"no NVIDIA GPU"};
  absent.values = {{}};
  run.measurements = {absent};
  std::vector<std::string> said;
  const std::string first = format_summary(run, &said);
  const std::string second = format_summary(run, &said);
  EXPECT_NE(first.find("gpu_power_watts absent: no NVIDIA GPU"), std::string::npos) << first;
  EXPECT_NE(first.find("noise scale     absent: one rank"), std::string::npos) << first;
  EXPECT_EQ(second.find("no NVIDIA GPU"), std::string::npos) << second;
  EXPECT_EQ(second.find("one rank has no other"), std::string::npos) << second;
  EXPECT_NE(second.find("measured        absent, for the reasons given above: gpu_power_watts\n"),
            std::string::npos)
      << second;
  EXPECT_NE(second.find("noise scale     absent, as above\n"), std::string::npos) << second;
}

// The memory estimate is of where the training's tensors live: a CPU run's beside its process's
// resident peak, a GPU run's beside what NVML saw in use on the GPU (its host process holds
// 1.7 GiB where the GPU held 8.6: mobilenet-v2 in bf16 on an H200).
TEST(SummaryMemory, TheEstimateStandsBesideThePeakOfTheMemoryItEstimates) {
  auto run = run_at(118, 236, 236);
  run.environment.memory_estimate_bytes = 10.0 * (1 << 30);
  auto host = measured("peak_resident_bytes", "bytes", 1.7 * (1 << 30), 1);
  host.headline = results::Headline::peak;
  auto device = measured("gpu_memory_used_bytes", "bytes", 8.6 * (1 << 30), 1);
  device.headline = results::Headline::mean_and_peak;
  run.measurements = {host, device};
  const std::string cpu = lines_labelled(format_summary(run), "memory");
  EXPECT_NE(cpu.find("; the whole process peaked at 1.7 GiB\n"), std::string::npos) << cpu;
  EXPECT_EQ(cpu.find("GPU held"), std::string::npos) << cpu;
  run.environment.device_properties.emplace_back("gpu_name", "NVIDIA H200");
  const std::string gpu = lines_labelled(format_summary(run), "memory");
  EXPECT_NE(gpu.find("; the GPU held 8.6 GiB at its peak (NVML: every process on it"),
            std::string::npos)
      << gpu;
  EXPECT_EQ(gpu.find("process peaked"), std::string::npos) << gpu;
  run.measurements = {host};  // no NVML: the host's peak is not the GPU's
  const std::string unsampled = lines_labelled(format_summary(run), "memory");
  EXPECT_NE(unsampled.find("; the GPU's peak was not sampled (NVML)\n"), std::string::npos)
      << unsampled;
  EXPECT_EQ(unsampled.find("process peaked"), std::string::npos) << unsampled;
}

// Issue 31 item 9: each phase in a unit its longest time is at least one of, named on its row: a
// 330 ns allreduce reads 330.000 ns, not 0.000 in the step's milliseconds.
TEST(SummaryPhaseTable, EachPhaseInItsOwnUnit) {
  auto run = run_at(118, 236, 236);
  for (std::size_t p = 0; p < phase_count; ++p) {
    const double seconds = Phase(p) == Phase::allreduce ? 330e-9 : 12.5e-3;
    run.summary.phase_statistics[p] = {seconds, seconds, seconds, seconds, seconds, seconds};
  }
  const std::string summary = format_summary(run);
  EXPECT_NE(summary.find("allreduce    ns    330.000    330.000"), std::string::npos) << summary;
  EXPECT_NE(summary.find("step         ms     12.500     12.500"), std::string::npos) << summary;
}

}  // namespace
}  // namespace dlscale::printers
