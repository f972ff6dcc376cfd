#include "analysis/scaling_study.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include "analysis/gradient_noise_scale.hpp"
#include "analysis/measurement_summary.hpp"
#include "analysis/run_summary.hpp"
#include "analysis/scaling_metrics.hpp"
#include "analysis/statistics.hpp"
#include "results/run_record.hpp"

namespace dlscale::analysis {

RunTimes times_of(const results::RunRecord& run) {
  RunTimes times;
  const int first = run.configuration.warmup_iterations;
  std::vector<double> compute_per_rank(run.ranks, 0.0);
  for (int i = first; i < run.iterations; ++i) {
    double slowest = 0, fastest_allreduce = std::numeric_limits<double>::infinity();
    double compute_max = 0, compute_sum = 0;
    for (int r = 0; r < run.ranks; ++r) {
      const double compute = run.seconds(i, r, Phase::forward) +
                             run.seconds(i, r, Phase::backward) + run.seconds(i, r, Phase::update);
      slowest = std::max(slowest, run.seconds(i, r, Phase::step));
      fastest_allreduce = std::min(fastest_allreduce, run.seconds(i, r, Phase::allreduce));
      compute_max = std::max(compute_max, compute);
      compute_sum += compute;
      compute_per_rank[r] += compute;
    }
    times.iteration_seconds.push_back(slowest);
    times.exposed_communication += fastest_allreduce;
    times.waiting_for_stragglers += compute_max - compute_sum / run.ranks;
  }
  const double measured = double(times.iteration_seconds.size());
  times.exposed_communication /= measured;
  times.waiting_for_stragglers /= measured;
  times.straggler_rank = int(std::max_element(compute_per_rank.begin(), compute_per_rank.end()) -
                             compute_per_rank.begin());
  times.global_batch = double(run.configuration.batch_per_rank) * run.ranks;
  return times;
}

namespace {

// The mean of a resample (with replacement) of `values`.
double resampled_mean(const std::vector<double>& values, std::mt19937_64& random) {
  std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
  double sum = 0;
  for (std::size_t k = 0; k < values.size(); ++k) sum += values[pick(random)];
  return sum / double(values.size());
}

// The ratio baseline / point of two quantities each known only to lie in (previous, seen]: the
// target was crossed somewhere between the evaluation before and the one that saw it. The
// baseline's own run against itself is exactly 1, wherever its crossing was. The high end is
// infinite where the point met its target at its first evaluation (previous 0).
std::pair<double, double> ratio_between_crossings(double baseline_previous, double baseline_seen,
                                                  double point_previous, double point_seen,
                                                  bool same_run) {
  if (same_run) return {1.0, 1.0};
  return {baseline_previous / point_seen, point_previous > 0
                                              ? baseline_seen / point_previous
                                              : std::numeric_limits<double>::infinity()};
}

}  // namespace

std::string study_scaling(const results::RunConfiguration& configuration) {
  return results::scaling_names.named(configuration.scaling) == results::Scaling::none
             ? results::scaling_name(results::Scaling::weak)
             : configuration.scaling;
}

namespace {

double sample_std(const std::vector<double>& values, double mean) {
  if (values.size() < 2) return 0;
  double sum = 0;
  for (double v : values) sum += (v - mean) * (v - mean);
  return std::sqrt(sum / double(values.size() - 1));
}

// Mean and spread of each (device, precision, sharding, threads, ranks) configuration over its
// repeats; points are sorted.
std::vector<results::RepeatSpread> spread_over_repeats(
    const std::vector<results::StudyPoint>& points) {
  std::vector<results::RepeatSpread> configurations;
  for (std::size_t first = 0; first < points.size();) {
    std::size_t last = first;
    while (last < points.size() && points[last].device == points[first].device &&
           points[last].precision == points[first].precision &&
           points[last].sharding == points[first].sharding &&
           points[last].threads == points[first].threads &&
           points[last].ranks == points[first].ranks)
      ++last;
    std::vector<double> times, efficiencies;
    double throughput = 0;
    for (std::size_t k = first; k < last; ++k) {
      times.push_back(points[k].iteration_seconds);
      efficiencies.push_back(points[k].efficiency);
      throughput += points[k].throughput_samples_per_second;
    }
    results::RepeatSpread spread;
    spread.device = points[first].device;
    spread.precision = points[first].precision;
    spread.sharding = points[first].sharding;
    spread.threads = points[first].threads;
    spread.ranks = points[first].ranks;
    spread.repeats = int(last - first);
    spread.iteration_seconds_mean = mean(times);
    spread.iteration_seconds_std = sample_std(times, spread.iteration_seconds_mean);
    spread.iteration_seconds_min = *std::min_element(times.begin(), times.end());
    spread.iteration_seconds_max = *std::max_element(times.begin(), times.end());
    spread.efficiency_mean = mean(efficiencies);
    spread.efficiency_std = sample_std(efficiencies, spread.efficiency_mean);
    spread.throughput_samples_per_second_mean = throughput / double(last - first);
    configurations.push_back(spread);
    first = last;
  }
  return configurations;
}

}  // namespace

namespace {

// The values `of` each run takes, in the order they first appear.
template <typename Of>
std::vector<std::string> in_run_order(const std::vector<results::RunRecord>& runs, Of of) {
  std::vector<std::string> values;
  for (const auto& run : runs)
    if (std::find(values.begin(), values.end(), of(run)) == values.end()) values.push_back(of(run));
  return values;
}

}  // namespace

std::vector<std::string> precisions_in_run_order(const std::vector<results::RunRecord>& runs) {
  return in_run_order(runs,
                      [](const results::RunRecord& run) { return run.configuration.precision; });
}

std::vector<std::string> shardings_in_run_order(const std::vector<results::RunRecord>& runs) {
  return in_run_order(runs, [](const results::RunRecord& run) {
    return std::string(results::sharding_names(run.configuration.sharding));
  });
}

std::vector<std::string> devices_in_run_order(const std::vector<results::RunRecord>& runs) {
  return in_run_order(runs, [](const results::RunRecord& run) { return run.configuration.device; });
}

results::StudySummary analyze_study(const std::vector<results::RunRecord>& runs) {
  results::StudySummary study;
  if (runs.empty()) return study;
  const std::vector<std::string> devices = devices_in_run_order(runs);
  const std::vector<std::string> precisions = precisions_in_run_order(runs);
  const std::vector<std::string> shardings = shardings_in_run_order(runs);
  const auto key = [&](std::size_t index) {
    const auto& c = runs[index].configuration;
    const auto order_in = [](const std::vector<std::string>& values, const std::string& value) {
      return std::find(values.begin(), values.end(), value) - values.begin();
    };
    return std::tuple(order_in(devices, c.device), order_in(precisions, c.precision),
                      order_in(shardings, std::string(results::sharding_names(c.sharding))),
                      c.threads_per_rank, runs[index].ranks, c.repeat);
  };
  std::vector<std::size_t> order(runs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  study.scaling = study_scaling(runs[order.front()].configuration);
  study.baseline_ranks = std::numeric_limits<int>::max();
  for (const auto& run : runs) study.baseline_ranks = std::min(study.baseline_ranks, run.ranks);

  // Each device, precision, sharding and thread count has its baseline: its runs with the fewest
  // ranks, every repeat's iterations pooled, so the spread across repeats is not hidden in the
  // baseline. (A GPU's points measured against a CPU baseline would mix the devices' speed into
  // the scaling; a sharded point against a replicated one, the strategies'.)
  struct Baseline {
    int ranks = std::numeric_limits<int>::max();
    RunTimes times;
  };
  using BaselineKey = std::tuple<std::string, std::string, results::Sharding, int>;
  const auto baseline_key = [](const results::RunRecord& run) {
    return BaselineKey(run.configuration.device, run.configuration.precision,
                       run.configuration.sharding, run.configuration.threads_per_rank);
  };
  std::map<BaselineKey, Baseline> baselines;
  for (std::size_t index : order) {
    auto& baseline = baselines[baseline_key(runs[index])];
    if (runs[index].ranks > baseline.ranks) continue;
    const RunTimes times = times_of(runs[index]);
    if (runs[index].ranks < baseline.ranks)
      baseline = {runs[index].ranks, times};
    else
      baseline.times.iteration_seconds.insert(baseline.times.iteration_seconds.end(),
                                              times.iteration_seconds.begin(),
                                              times.iteration_seconds.end());
  }

  // Per configuration: the baseline's mean samples and seconds to target, and the B_noise of the
  // run at the smallest global batch that has one (the cheapest to measure it at).
  struct ConvergenceBaseline {
    double samples_to_target = 0, seconds_to_target = 0;
    // The evaluations before the ones that saw the target: the other end of each crossing.
    double previous_samples = 0, previous_seconds = 0;
    int reached = 0;
    const results::RunRecord* only_run = nullptr;  // the baseline's run, where it has one
    double noise_scale = 0;
    int noise_scale_runs = 0;
    long long noise_scale_batch = std::numeric_limits<long long>::max();
  };
  std::map<BaselineKey, ConvergenceBaseline> convergence;
  for (std::size_t index : order) {
    const auto& run = runs[index];
    auto& reference = convergence[baseline_key(run)];
    const auto target = first_evaluation_at_target(run);
    if (run.ranks == baselines.at(baseline_key(run)).ranks && target) {
      reference.samples_to_target += target->samples;
      reference.seconds_to_target += target->training_seconds;
      reference.previous_samples += target->previous_samples;
      reference.previous_seconds += target->previous_training_seconds;
      reference.only_run = reference.reached == 0 ? &run : nullptr;
      ++reference.reached;
    }
    const long long global_batch = (long long)run.configuration.batch_per_rank * run.ranks;
    if (!std::isfinite(run.summary.noise_scale) || global_batch > reference.noise_scale_batch)
      continue;
    if (global_batch < reference.noise_scale_batch) {
      reference.noise_scale = 0;
      reference.noise_scale_runs = 0;
      reference.noise_scale_batch = global_batch;
    }
    reference.noise_scale += run.summary.noise_scale;
    ++reference.noise_scale_runs;
  }

  std::mt19937_64 random(bootstrap_seed);
  // The baseline's resampled means, drawn once per baseline and paired with each point's own:
  // drawn again for every point, they would cost each point the pooled baseline's size (every
  // repeat's iterations), and a study of many repeats quadratic time.
  std::map<BaselineKey, std::vector<double>> baseline_resampled;
  for (const auto& [configuration, baseline] : baselines)
    for (int k = 0; k < bootstrap_resamples; ++k)
      baseline_resampled[configuration].push_back(
          resampled_mean(baseline.times.iteration_seconds, random));
  for (std::size_t index : order) {
    const auto& run = runs[index];
    const Baseline& baseline_of_point = baselines.at(baseline_key(run));
    const RunTimes& baseline = baseline_of_point.times;
    const int p = baseline_of_point.ranks;
    const double baseline_mean = mean(baseline.iteration_seconds);
    // Efficiency from mean iteration times: E = X(n)/X(p) * p/n, with X = global batch / T.
    const auto efficiency_of = [&](const RunTimes& times, double t_n, double t_p, int n) {
      return scaling_efficiency(times.global_batch, t_n, n, baseline.global_batch, t_p, p);
    };
    const RunTimes times = times_of(run);
    const int n = run.ranks;
    results::StudyPoint point;
    point.ranks = n;
    point.device = run.configuration.device;
    point.precision = run.configuration.precision;
    point.sharding = results::sharding_names(run.configuration.sharding);
    point.threads = run.configuration.threads_per_rank;
    point.repeat = run.configuration.repeat;
    point.run = results::run_group_name(index);
    point.iteration_seconds = mean(times.iteration_seconds);
    point.throughput_samples_per_second = times.global_batch / point.iteration_seconds;
    point.tokens_per_second = results::tokens_per_second(point.throughput_samples_per_second,
                                                         run.configuration.tokens_per_sample);
    point.model_flops_utilisation = run.summary.model_flops_utilisation;
    point.efficiency = efficiency_of(times, point.iteration_seconds, baseline_mean, n);
    point.speedup = point.efficiency * n;

    std::vector<double> resampled_times, resampled_efficiency;
    for (int k = 0; k < bootstrap_resamples; ++k) {
      const double t_n = resampled_mean(times.iteration_seconds, random);
      const double t_p = baseline_resampled.at(baseline_key(run))[k];
      resampled_times.push_back(t_n);
      resampled_efficiency.push_back(efficiency_of(times, t_n, t_p, n));
    }
    point.iteration_seconds_ci_low = quantile(resampled_times, interval_low);
    point.iteration_seconds_ci_high = quantile(resampled_times, interval_high);
    point.efficiency_ci_low = quantile(resampled_efficiency, interval_low);
    point.efficiency_ci_high = quantile(resampled_efficiency, interval_high);

    // Karp-Flatt relative to the baseline: n' = n/p processors, speedup S' = S/p.
    const double relative_ranks = double(n) / p, relative_speedup = point.speedup / p;
    point.karp_flatt = n == p
                           ? std::numeric_limits<double>::quiet_NaN()
                           : (1 / relative_speedup - 1 / relative_ranks) / (1 - 1 / relative_ranks);

    const EfficiencyGap gap =
        split_efficiency_gap(point.efficiency, point.iteration_seconds, times.exposed_communication,
                             times.waiting_for_stragglers);
    point.gap_communication = gap.communication;
    point.gap_load_imbalance = gap.load_imbalance;
    point.gap_other = gap.other;
    point.straggler_rank = times.straggler_rank;
    point.straggler_host = run.environment.rank_hosts.at(times.straggler_rank);
    for (const auto& headline : summarize_measurements(run))
      if (headline.headline == results::Headline::energy && headline.sources > 0)
        point.energy_joules_per_sample.emplace_back(headline.name, headline.joules_per_sample);

    const ConvergenceBaseline& reference = convergence.at(baseline_key(run));
    point.global_batch = int(times.global_batch);
    point.noise_scale = run.summary.noise_scale;
    point.noise_scale_iterations = run.summary.noise_scale_iterations;
    point.measured_iterations = run.configuration.measured_iterations;
    if (reference.noise_scale_runs > 0) {
      point.noise_scale_used = reference.noise_scale / reference.noise_scale_runs;
      point.statistical_efficiency_model =
          statistical_efficiency(point.noise_scale_used, baseline.global_batch, times.global_batch);
      point.goodput_samples_per_second =
          point.throughput_samples_per_second * point.statistical_efficiency_model;
    }
    if (const auto target = first_evaluation_at_target(run)) {
      point.samples_to_target = target->samples;
      point.seconds_to_target = target->training_seconds;
      if (reference.reached > 0) {
        point.statistical_efficiency =
            reference.samples_to_target / reference.reached / target->samples;
        point.time_to_target_speedup =
            reference.seconds_to_target / reference.reached / target->training_seconds;
        const auto [efficiency_low, efficiency_high] = ratio_between_crossings(
            reference.previous_samples / reference.reached,
            reference.samples_to_target / reference.reached, target->previous_samples,
            target->samples, reference.only_run == &run);
        point.statistical_efficiency_low = efficiency_low;
        point.statistical_efficiency_high = efficiency_high;
        const auto [speedup_low, speedup_high] = ratio_between_crossings(
            reference.previous_seconds / reference.reached,
            reference.seconds_to_target / reference.reached, target->previous_training_seconds,
            target->training_seconds, reference.only_run == &run);
        point.time_to_target_speedup_low = speedup_low;
        point.time_to_target_speedup_high = speedup_high;
      }
    }
    study.points.push_back(point);
  }
  study.configurations = spread_over_repeats(study.points);
  return study;
}

}  // namespace dlscale::analysis
