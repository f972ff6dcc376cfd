// Metric definitions (see docs/workloads.md and docs/results-format.md):
//  - phase statistics: over all (measured iteration, rank) samples;
//  - throughput: global samples / sum over iterations of the slowest rank's step;
//  - communication fraction: total allreduce time / total step time, over all ranks;
//  - communication fraction counts the exposed allreduce phase only (overlapped sums are hidden);
//  - allreduce time: per iteration the fastest rank's communication time, first bucket start to
//    last done (the last rank to arrive waits least, so its time is closest to the transfer
//    itself), median over iterations;
//    algbw = bytes / time, busbw = algbw * 2(n-1)/n, as nccl-tests defines them;
//  - achieved GFLOP/s: training FLOPs per step / the rank's median step time;
//  - tokens per second (language models): throughput x tokens per sample;
//  - MFU: the mean achieved GFLOP/s per rank over the GEMM measured on this device (PaLM,
//    appendix B; results/run_record.hpp says why this yardstick);
//  - load imbalance: per iteration, max - min over ranks of compute (forward+backward+update);
//  - gradient noise scale: analysis/gradient_noise_scale.hpp, over the measured iterations.
#include "analysis/run_summary.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "analysis/gradient_noise_scale.hpp"
#include "analysis/ring_allreduce.hpp"
#include "analysis/statistics.hpp"

namespace dlscale::analysis {

namespace {

// B_noise over the measured iterations, from every rank's own gradient norm and the global one.
void summarize_noise_scale(const results::RunRecord& record, results::RunSummary& summary) {
  const auto* local = record.measurement(results::local_gradient_squared_norm);
  const auto* global = record.measurement(results::global_gradient_squared_norm);
  if (local == nullptr || global == nullptr) {
    summary.noise_scale_absent_reason = "not measured (a file from before schema 8)";
    return;
  }
  for (const auto& reason : local->absent_reasons)
    if (!reason.empty()) {
      summary.noise_scale_absent_reason = reason;
      return;
    }
  const int first = record.configuration.warmup_iterations;
  std::vector<GradientNormSample> samples;
  // The iterations that read the norms (every k-th, to keep their cost small): NaN elsewhere.
  for (int i = first; i < record.iterations; ++i) {
    GradientNormSample sample;
    for (int r = 0; r < record.ranks; ++r) sample.local_squared_norm += local->values[r].at(i);
    sample.local_squared_norm /= record.ranks;
    sample.global_squared_norm = global->values[0].at(i);  // the same sum on every rank
    if (std::isfinite(sample.local_squared_norm) && std::isfinite(sample.global_squared_norm))
      samples.push_back(sample);
  }
  const double small_batch = record.configuration.batch_per_rank;
  const auto estimate = estimate_noise_scale(samples, small_batch, small_batch * record.ranks,
                                             &summary.noise_scale_absent_reason);
  if (!estimate) return;
  summary.noise_scale = estimate->noise_scale;
  summary.noise_scale_ci_low = estimate->noise_scale_low;
  summary.noise_scale_ci_high = estimate->noise_scale_high;
  summary.gradient_squared_norm = estimate->gradient_squared_norm;
  summary.gradient_trace_covariance = estimate->trace_covariance;
  summary.noise_scale_iterations = estimate->iterations;
}

}  // namespace

std::optional<results::TargetReached> first_evaluation_at_target(const results::RunRecord& record) {
  const auto& target = record.configuration.target;
  if (!target) return std::nullopt;
  double previous_samples = 0, previous_training_seconds = 0;
  for (const auto& evaluation : record.evaluations) {
    if (target->met_by(evaluation))
      return results::TargetReached{evaluation.iteration + 1, evaluation.samples,
                                    evaluation.training_seconds, previous_samples,
                                    previous_training_seconds};
    previous_samples = evaluation.samples;
    previous_training_seconds = evaluation.training_seconds;
  }
  return std::nullopt;
}

results::RunSummary summarize(const results::RunRecord& record) {
  const auto& config = record.configuration;
  const int first = config.warmup_iterations;
  const int last = record.iterations;
  const int ranks = record.ranks;
  results::RunSummary summary;

  for (std::size_t p = 0; p < phase_count; ++p) {
    std::vector<double> samples;
    for (int i = first; i < last; ++i)
      for (int r = 0; r < ranks; ++r) samples.push_back(record.seconds(i, r, Phase(p)));
    summary.phase_statistics[p] = describe(samples);
  }

  double slowest_step_total = 0, step_total = 0, allreduce_total = 0;
  std::vector<double> fastest_allreduce;
  for (int i = first; i < last; ++i) {
    double slowest_step = 0, fastest = 1e300, compute_min = 1e300, compute_max = 0;
    for (int r = 0; r < ranks; ++r) {
      const double step = record.seconds(i, r, Phase::step);
      const double allreduce = record.seconds(i, r, Phase::allreduce);
      // The whole gradient communication, hidden or not; schema-1 files have only the phase.
      const double communication = record.communication_seconds.empty()
                                       ? allreduce
                                       : record.communication_seconds[std::size_t(i) * ranks + r];
      const double compute = record.seconds(i, r, Phase::forward) +
                             record.seconds(i, r, Phase::backward) +
                             record.seconds(i, r, Phase::update);
      slowest_step = std::max(slowest_step, step);
      fastest = std::min(fastest, communication);
      compute_min = std::min(compute_min, compute);
      compute_max = std::max(compute_max, compute);
      step_total += step;
      allreduce_total += allreduce;
    }
    slowest_step_total += slowest_step;
    fastest_allreduce.push_back(fastest);
    summary.load_imbalance_seconds.push_back(compute_max - compute_min);
  }

  const double samples_per_iteration = double(config.batch_per_rank) * ranks;
  summary.throughput_samples_per_second =
      samples_per_iteration * (last - first) / slowest_step_total;
  summary.communication_fraction = step_total > 0 ? allreduce_total / step_total : 0;

  // What the ranks sent: the buckets' bytes (half the parameters' under --grad-dtype bf16), or
  // every parameter as a float in files from before buckets were recorded.
  summary.allreduce_bytes = 0;
  for (const auto& bucket : record.buckets) summary.allreduce_bytes += bucket.bytes;
  if (record.buckets.empty())
    summary.allreduce_bytes = double(config.parameter_count) * sizeof(float);
  summary.allreduce_seconds = median(fastest_allreduce);
  if (summary.allreduce_seconds > 0) {
    summary.allreduce_algbw_gbps = summary.allreduce_bytes / summary.allreduce_seconds / 1e9;
    summary.allreduce_busbw_gbps = summary.allreduce_algbw_gbps * allreduce_bus_factor(ranks);
  }

  const double flops_per_step = config.training_flops_per_sample * config.batch_per_rank;
  for (int r = 0; r < ranks; ++r) {
    std::vector<double> steps;
    for (int i = first; i < last; ++i) steps.push_back(record.seconds(i, r, Phase::step));
    summary.gflops_per_rank.push_back(flops_per_step / median(steps) / 1e9);
  }
  summary.tokens_per_second =
      results::tokens_per_second(summary.throughput_samples_per_second, config.tokens_per_sample);
  summary.model_flops_utilisation =
      results::model_flops_utilisation(results::mean_gflops_per_rank(summary.gflops_per_rank),
                                       record.environment.device_gemm_gflops);

  const auto& fingerprints = record.parameter_fingerprints;
  summary.parameters_identical =
      !fingerprints.empty() &&
      std::all_of(fingerprints.begin(), fingerprints.end(),
                  [&](std::uint64_t f) { return f == fingerprints.front(); });
  summarize_noise_scale(record, summary);
  summary.target_reached = first_evaluation_at_target(record);
  return summary;
}

}  // namespace dlscale::analysis
