#include "analysis/scaling_prediction.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/gradient_noise_scale.hpp"
#include "analysis/scaling_study.hpp"
#include "analysis/statistics.hpp"
#include "core/errors.hpp"

namespace dlscale::analysis {

namespace {

constexpr double not_measured = std::numeric_limits<double>::quiet_NaN();

// The mean of the values the ranks measured (absent ones left out); NaN if none did.
double mean_measured(const results::MeasurementRecord& measurement) {
  double sum = 0;
  int count = 0;
  for (const auto& values : measurement.values)
    for (double value : values)
      if (std::isfinite(value)) {
        sum += value;
        ++count;
      }
  return count > 0 ? sum / count : not_measured;
}

// The measured run nearest to `ranks` in rank count (on a log scale; ties go to the larger).
const results::RunRecord& nearest_run(const std::vector<const results::RunRecord*>& runs,
                                      int ranks) {
  const results::RunRecord* best = runs.front();
  for (const auto* run : runs) {
    const double distance = std::abs(std::log2(double(run->ranks) / ranks));
    const double best_distance = std::abs(std::log2(double(best->ranks) / ranks));
    if (distance < best_distance || (distance == best_distance && run->ranks > best->ranks))
      best = run;
  }
  return *best;
}

template <typename T>
bool contains(const std::vector<T>& values, const T& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

std::string runs_text(const std::vector<std::string>& runs) {
  return fmt::format("{} ({} run{})", fmt::join(runs, ", "), runs.size(),
                     runs.size() == 1 ? "" : "s, their mean");
}

// Why `point` scales better than linearly against `baseline`, in words: the model never makes a
// sample cheaper as ranks are added, so it has carried a measured difference, which is noise
// unless it repeats (a smaller per-rank batch that fits in cache).
std::string above_linear_reason(const PredictedPoint& point, double batch_per_rank,
                                const PredictedPoint& baseline, double baseline_batch_per_rank) {
  const double per_sample = point.iteration.compute_seconds / batch_per_rank;
  const double baseline_per_sample = baseline.iteration.compute_seconds / baseline_batch_per_rank;
  std::vector<std::string> causes;
  if (per_sample < baseline_per_sample) {
    if (point.reference_ranks != baseline.reference_ranks)
      causes.push_back(
          fmt::format("its compute comes from {} at {} ranks, which computed {:.1f}% "
                      "faster per sample than the {}-rank baseline",
                      runs_text(point.reference_runs), point.reference_ranks,
                      (1 - per_sample / point.compute_slowdown / baseline_per_sample) * 100,
                      baseline.reference_ranks));
    if (point.compute_slowdown < 1)
      causes.push_back(
          fmt::format("the node-sharing probes put compute at {} ranks at {:.3f}x "
                      "that at {} ranks",
                      point.ranks, point.compute_slowdown, point.reference_ranks));
  } else {
    causes.push_back(fmt::format(
        "the baseline's predicted communication and straggler wait ({:.3g} ms) exceed those at "
        "{} ranks ({:.3g} ms)",
        (baseline.iteration.exposed_communication_seconds +
         baseline.iteration.straggler_wait_seconds) *
            1e3,
        point.ranks,
        (point.iteration.exposed_communication_seconds + point.iteration.straggler_wait_seconds) *
            1e3));
  }
  return fmt::format(
      "{} ranks: efficiency {:.1f}%, above 100%: {}; the model gains nothing per "
      "sample from more ranks itself, so this carries a measured difference: "
      "noise, unless every repeat shows it (a cache effect){}",
      point.ranks, point.efficiency * 100, fmt::join(causes, "; and "),
      point.efficiency_low <= 1
          ? fmt::format(" (the repeats alone give {:.1f}% to {:.1f}%)", point.efficiency_low * 100,
                        point.efficiency_high * 100)
          : "");
}

// The B_noise and the baseline's samples to target that predict carries to every rank count,
// from the runs it predicts from (held-out runs left out), as the study computes them.
void carry_noise_scale(const std::vector<const results::RunRecord*>& usable,
                       ScalingPrediction& result) {
  std::vector<results::RunRecord> runs;
  for (const auto* run : usable) runs.push_back(*run);
  const results::StudySummary study = analyze_study(runs);
  std::vector<double> baseline_samples;
  for (const auto& point : study.points) {
    if (std::isfinite(point.noise_scale_used)) result.noise_scale = point.noise_scale_used;
    if (point.ranks == study.baseline_ranks && std::isfinite(point.samples_to_target))
      baseline_samples.push_back(point.samples_to_target);
  }
  const auto& config = runs.front().configuration;
  if (!baseline_samples.empty() && config.target) {
    result.baseline_samples_to_target = mean(baseline_samples);
    result.target = fmt::format("{} {}", config.target->metric_name(), config.target->value);
  }
  if (std::isfinite(result.noise_scale))
    result.notes.push_back(fmt::format(
        "B_noise {:.4g} samples (the runs at the smallest global batch that measured one) is "
        "carried to every rank count: statistical efficiency (B_noise + B0) / (B_noise + B)",
        result.noise_scale));
  else
    result.notes.push_back(
        "no gradient noise scale (it needs a run on two or more ranks): no goodput or time to "
        "target");
}

// The model's error, from the measured rank counts it predicts without their own runs: those the
// user held out, and (settings.measure_model_error) each other one above the baseline, left out
// in turn. Only where the network model is the one the runs ran on: a prediction for another
// network differs from the measurement by design, not by error. Sets result.model_error, its
// source and a warning for each miss beyond model_miss_warning, or a note saying why there is none.
void measure_model_error(const std::vector<results::RunRecord>& all_runs,
                         const std::vector<results::NodeSharingProbe>& launch_probes,
                         const NetworkModel& network, const PredictionSettings& settings,
                         const std::map<int, std::vector<const results::RunRecord*>>& repeats_at,
                         ScalingPrediction& result) {
  if (!settings.network_describes_runs) {
    result.notes.push_back(
        "the measured points ran on their own network, not the one predicted for: they are "
        "shown beside the prediction but not compared with it, and the model's error is not "
        "measured (intervals: the repeats' range and the estimate; use --comm with a sweep of "
        "the runs' network to measure it)");
    return;
  }
  std::map<int, double> misses;  // ranks -> predicted / measured iteration time - 1
  for (const auto& point : result.points)
    if (point.held_out && std::isfinite(point.measured_iteration_seconds))
      misses[point.ranks] =
          point.iteration.iteration_seconds / point.measured_iteration_seconds - 1;
  if (settings.measure_model_error)
    for (const auto& [ranks, runs] : repeats_at) {
      if (ranks == result.baseline_ranks || misses.count(ranks)) continue;
      PredictionSettings without = settings;
      without.held_out.push_back(ranks);
      without.measure_model_error = false;
      try {
        const auto check = predict_scaling(all_runs, launch_probes, network, {ranks}, without);
        const auto& point = check.points.front();
        if (std::isfinite(point.measured_iteration_seconds))
          misses[ranks] = point.iteration.iteration_seconds / point.measured_iteration_seconds - 1;
      } catch (const UserError&) {
        // A rank count that cannot be left out (nothing else of its kind to predict from) does
        // not check the model.
      }
    }
  if (misses.empty()) {
    result.notes.push_back(
        "the model's error is not measured: no measured rank count besides the baseline to "
        "predict without its own runs (intervals: the repeats' range and the estimate)");
    return;
  }
  std::vector<std::string> checks;
  int worst = misses.begin()->first;
  for (const auto& [ranks, miss] : misses) {
    checks.push_back(fmt::format("{} ranks {:+.1f}%", ranks, miss * 100));
    if (std::abs(miss) > std::abs(misses.at(worst))) worst = ranks;
    if (std::abs(miss) > model_miss_warning)
      result.warnings.push_back(fmt::format(
          "the model missed the measured {} ranks by {:+.1f}% in iteration time, predicting it "
          "without its own runs (more than {:.0f}%): read every prediction with that error",
          ranks, miss * 100, model_miss_warning * 100));
  }
  result.model_error = std::abs(misses.at(worst));
  result.model_error_source = fmt::format(
      "the largest miss of the measured rank counts predicted without their own runs ({})",
      fmt::join(checks, ", "));
}

// A prediction's interval: the repeats' range and the point estimate, widened so that a
// measurement the model misses by up to `model_error` (predicted / measured - 1, either sign)
// still falls inside; the range alone where the error is not measured (NaN).
void set_interval(double model_error, PredictedPoint& point) {
  const double t = point.iteration.iteration_seconds;
  double low = std::min(t, point.iteration_seconds_low);
  double high = std::max(t, point.iteration_seconds_high);
  if (std::isfinite(model_error)) {
    low /= 1 + model_error;
    high = model_error < 1 ? high / (1 - model_error) : std::numeric_limits<double>::infinity();
  }
  point.interval_seconds_low = low;
  point.interval_seconds_high = high;
  // Efficiency at a rank count goes as 1 / iteration time.
  point.interval_efficiency_low = point.efficiency * t / high;
  point.interval_efficiency_high = point.efficiency * t / low;
}

}  // namespace

std::optional<results::NodeSharingProbe> node_sharing_probe_of(const results::RunRecord& run) {
  const auto* shared = run.measurement(results::node_sharing_shared_seconds);
  const auto* alone = run.measurement(results::node_sharing_alone_seconds);
  if (shared == nullptr || alone == nullptr) return std::nullopt;
  results::NodeSharingProbe probe{.ranks = run.ranks,
                                  .precision = run.configuration.precision,
                                  .threads = run.configuration.threads_per_rank,
                                  .batch_per_rank = run.configuration.batch_per_rank,
                                  .ranks_per_node = run.environment.ranks_per_node,
                                  .shared_seconds = mean_measured(*shared),
                                  .alone_seconds = mean_measured(*alone)};
  if (!(probe.shared_seconds > 0) || !(probe.alone_seconds > 0) || probe.batch_per_rank < 1)
    return std::nullopt;
  return probe;
}

NodeSharingCurve node_sharing_curve(const std::vector<results::NodeSharingProbe>& probes) {
  // One pass time per sample per rank count (the mean of its probes), all against one unshared
  // time: the mean of every probe's alone phase. Ratios between two rank counts are then ratios
  // of their own pass times, whatever the alone phases measured.
  std::map<int, std::pair<double, int>> shared_sums;  // ranks -> (sum of pass times, probes)
  double alone_sum = 0;
  int alone_probes = 0;
  for (const auto& probe : probes) {
    shared_sums[probe.ranks].first += probe.shared_seconds / probe.batch_per_rank;
    shared_sums[probe.ranks].second += 1;
    alone_sum += probe.alone_seconds / probe.batch_per_rank;
    ++alone_probes;
  }
  NodeSharingCurve curve;
  curve.slowdown.emplace_back(1, 1.0);
  for (const auto& [ranks, sum] : shared_sums)
    if (ranks > 1)
      curve.slowdown.emplace_back(ranks, sum.first / sum.second / (alone_sum / alone_probes));
  return curve;
}

double slowdown_at(const NodeSharingCurve& curve, int ranks, int ranks_per_node, std::string& how) {
  const auto& points = curve.slowdown;
  if (ranks <= 1) {
    how = "alone";
    return 1;
  }
  if (points.size() < 2) {
    how = "none";
    return 1;
  }
  for (std::size_t k = 0; k < points.size(); ++k) {
    if (points[k].first == ranks) {
      how = "probed";
      return points[k].second;
    }
    if (points[k].first > ranks) {  // between k-1 and k
      const auto& [n0, s0] = points[k - 1];
      const auto& [n1, s1] = points[k];
      how = "interpolated";
      return s0 + (s1 - s0) * double(ranks - n0) / double(n1 - n0);
    }
  }
  const auto& [largest, at_largest] = points.back();
  const int on_a_node = std::min(ranks, std::max(largest, ranks_per_node));
  if (on_a_node <= largest) {
    how = "held";
    return at_largest;
  }
  const auto& [before, at_before] = points[points.size() - 2];
  const double per_rank = (at_largest - at_before) / double(largest - before);
  how = "extrapolated";
  return std::max(at_largest, at_largest + per_rank * double(on_a_node - largest));
}

ScalingPrediction predict_scaling(const std::vector<results::RunRecord>& all_runs,
                                  const std::vector<results::NodeSharingProbe>& launch_probes,
                                  const NetworkModel& network, const std::vector<int>& ranks,
                                  const PredictionSettings& settings) {
  if (all_runs.empty()) throw UserError("predict: no training runs to predict from");
  ScalingPrediction result;
  // One precision, each predicted from its own runs, and in it one thread count: the one of the
  // run with the fewest ranks (and of the study's baseline).
  result.precision =
      settings.precision.empty() ? all_runs.front().configuration.precision : settings.precision;
  const auto in_precision = [&](const auto& measured) {
    return measured.precision == result.precision;
  };
  // One strategy too: each costs its own collectives, from its own runs' compute.
  result.sharding = settings.sharding.value_or(all_runs.front().configuration.sharding);
  std::vector<const results::RunRecord*> of_precision;
  for (const auto& run : all_runs)
    if (in_precision(run.configuration) && run.configuration.sharding == result.sharding)
      of_precision.push_back(&run);
  if (of_precision.empty())
    throw UserError(
        fmt::format("--precision {} --sharding {}: no run was measured in {} with "
                    "--sharding {}",
                    result.precision, results::sharding_names(result.sharding), result.precision,
                    results::sharding_names(result.sharding)));
  const auto& first = **std::min_element(
      of_precision.begin(), of_precision.end(), [](const auto* a, const auto* b) {
        return std::tuple(a->ranks, a->configuration.threads_per_rank) <
               std::tuple(b->ranks, b->configuration.threads_per_rank);
      });
  result.threads_per_rank = first.configuration.threads_per_rank;
  const auto same_configuration = [&](const results::RunRecord& run) {
    return in_precision(run.configuration) && run.configuration.sharding == result.sharding &&
           run.configuration.threads_per_rank == result.threads_per_rank;
  };
  std::vector<results::RunRecord> same_threads;
  std::vector<const results::RunRecord*> usable;  // into all_runs, so that each has its name
  std::vector<results::NodeSharingProbe> probes;
  for (const auto* run : of_precision)
    if (same_configuration(*run)) same_threads.push_back(*run);
  const auto name_of = [&](const results::RunRecord* run) {
    return results::run_group_name(std::size_t(run - all_runs.data()));
  };
  if (of_precision.size() < all_runs.size())
    result.notes.push_back(fmt::format(
        "only the runs in {} with --sharding {} are used: each precision and strategy is "
        "predicted from its own runs (--precision, --sharding)",
        result.precision, results::sharding_names(result.sharding)));
  if (result.sharding != results::Sharding::none)
    result.notes.push_back(fmt::format(
        "--sharding {}: {}; reduce-scatter and all-gather at {}",
        results::sharding_names(result.sharding),
        result.sharding == results::Sharding::full
            ? "each unit all-gathered before its forward and its backward, reduce-scattered after "
              "its backward; the update covers 1/N of the parameters"
            : "each bucket reduce-scattered during backward, all all-gathered after the update; "
              "the update covers 1/N of the parameters",
        network.reduce_scatter && network.all_gather
            ? "the sweep's own alpha and beta"
            : "the allreduce's alpha and beta (the sweep did not measure them: `dlscale comm "
              "--collective allreduce,reduce_scatter,all_gather`)"));
  if (same_threads.size() < of_precision.size())
    result.notes.push_back(
        fmt::format("only the runs at {} thread(s) per rank are used", result.threads_per_rank));
  for (int held : settings.held_out)
    if (std::none_of(same_threads.begin(), same_threads.end(),
                     [&](const auto& run) { return run.ranks == held; }))
      throw UserError(fmt::format("--hold-out {}: no run was measured at {} ranks", held, held));
  for (const auto& run : all_runs) {
    if (!same_configuration(run)) continue;
    const bool held = contains(settings.held_out, run.ranks);
    if (!held) usable.push_back(&run);
    if (held && settings.hold_out_probes) continue;
    if (const auto probe = node_sharing_probe_of(run)) probes.push_back(*probe);
  }
  std::vector<int> probed_only;
  for (const auto& probe : launch_probes)
    if (in_precision(probe) && probe.threads == result.threads_per_rank) {
      probes.push_back(probe);
      probed_only.push_back(probe.ranks);
    }
  if (usable.empty()) throw UserError("--hold-out: no measured run is left to predict from");
  const auto& baseline_run =
      **std::min_element(usable.begin(), usable.end(),
                         [](const auto* a, const auto* b) { return a->ranks < b->ranks; });
  if (baseline_run.ranks != first.ranks)
    throw UserError(
        fmt::format("--hold-out: {} ranks is the study's efficiency baseline; hold "
                    "out larger rank counts only",
                    first.ranks));
  for (const auto* run : usable)
    if (run->layers.size() != baseline_run.layers.size())
      throw UserError(fmt::format(
          "predict: {} has {} layers and {} has {}: the runs are of "
          "different models",
          name_of(&baseline_run), baseline_run.layers.size(), name_of(run), run->layers.size()));
  const auto& config = baseline_run.configuration;
  result.model = config.model;
  result.scaling = study_scaling(config);
  result.baseline_ranks = baseline_run.ranks;
  const bool strong = results::scaling_names.named(result.scaling) == results::Scaling::strong;
  result.batch_per_rank = config.batch_per_rank;
  result.global_batch = double(config.batch_per_rank) * baseline_run.ranks;
  const auto batch_at = [&](int n) {
    return strong ? result.global_batch / n : double(config.batch_per_rank);
  };

  result.ranks_per_node = settings.ranks_per_node;
  if (result.ranks_per_node <= 0)
    for (const auto& run : same_threads)
      result.ranks_per_node = std::max(result.ranks_per_node, run.environment.ranks_per_node);
  if (settings.ranks_per_node <= 0)
    for (const auto& probe : launch_probes)
      if (in_precision(probe) && probe.threads == result.threads_per_rank)
        result.ranks_per_node = std::max(result.ranks_per_node, probe.ranks_per_node);
  result.ranks_per_node = std::max(1, result.ranks_per_node);

  result.node_sharing = node_sharing_curve(probes);
  if (result.node_sharing.slowdown.size() < 2) {
    // Why the runs of two or more ranks hold no probe, in their own words (--probe no, a point
    // too short); none of them: one-rank runs only, or a file written before probes.
    std::vector<std::string> reasons;
    for (const auto* run : usable)
      if (const auto* shared = run->measurement(results::node_sharing_shared_seconds))
        for (const auto& reason : shared->absent_reasons)
          if (!reason.empty() && !contains(reasons, reason)) reasons.push_back(reason);
    result.notes.push_back(fmt::format(
        "no node-sharing probe in the file ({}): compute per rank is held as measured, so "
        "predictions past the measured ranks leave out how compute slows as a node fills",
        reasons.empty() ? std::string("one-rank runs only, or written before probes")
                        : fmt::format("{}", fmt::join(reasons, "; "))));
  }
  if (!probed_only.empty())
    result.notes.push_back(fmt::format("node sharing probed without training at {} ranks",
                                       fmt::join(probed_only, ", ")));
  if (!settings.held_out.empty() && !settings.hold_out_probes)
    result.notes.push_back(
        "held-out runs: their training is not used; their node-sharing "
        "probes (compute only) are");

  // The straggler sample of a one-rank reference comes from the nearest run with several ranks.
  std::vector<const results::RunRecord*> multi_rank;
  for (const auto* run : usable)
    if (run->ranks > 1) multi_rank.push_back(run);
  if (multi_rank.empty())
    result.notes.push_back(
        "stragglers: no run with several ranks to predict from; the spread "
        "of one rank's iterations stands in for the spread across ranks");

  // Communication inside training against the sweep's model, where a run has the sweep's rank
  // count: the ratio then holds the same ranks' sums in both, and only the conditions differ.
  if (settings.calibrate_communication && network.measured_ranks > 1 &&
      result.sharding != results::Sharding::none) {
    result.notes.push_back(
        "communication: sharded runs are not held against the sweep (their exchange spans "
        "gathers and reduce-scatters); its model is used as it is");
  } else if (settings.calibrate_communication && network.measured_ranks > 1) {
    double scales = 0;
    int calibrating = 0;
    for (const auto* run : usable) {
      if (run->ranks != network.measured_ranks || run->buckets.empty()) continue;
      const Scaling own{.ranks = run->ranks,
                        .ranks_per_node = result.ranks_per_node,
                        .batch_per_rank = double(run->configuration.batch_per_rank),
                        .overlap = run->configuration.overlap};
      scales += communication_calibration(profile_of(*run), network, settings.algorithm, own,
                                          measured_communication_span_seconds(*run));
      ++calibrating;
    }
    if (calibrating > 0) {
      result.communication_scale = scales / calibrating;
      result.notes.push_back(fmt::format(
          "communication: inside the {}-rank run the sums took {:.2f}x the sweep's model (first "
          "bucket's start to last one's end); every predicted allreduce is scaled by that",
          network.measured_ranks, result.communication_scale));
    } else {
      result.notes.push_back(fmt::format(
          "communication: no run at the sweep's {} ranks to hold the sweep against training; "
          "its model is used as it is",
          network.measured_ranks));
    }
  }

  // Each measured rank count's runs: its repeats, all of which feed its prediction.
  std::map<int, std::vector<const results::RunRecord*>> repeats_at;
  for (const auto* run : usable) repeats_at[run->ranks].push_back(run);

  const auto predict = [&](int n, PredictedPoint& point) {
    const auto& repeats = repeats_at.at(nearest_run(usable, n).ranks);
    std::vector<ComputeProfile> profiles;
    for (const auto* run : repeats) {
      profiles.push_back(profile_of(*run));
      point.reference_runs.push_back(name_of(run));
    }
    if (repeats.front()->ranks == 1 && !multi_rank.empty()) {
      std::vector<double> deviations;  // of every repeat at the nearest several-rank count
      for (const auto* run : repeats_at.at(nearest_run(multi_rank, n).ranks)) {
        const auto own = compute_deviations_of(*run);
        deviations.insert(deviations.end(), own.begin(), own.end());
      }
      for (auto& profile : profiles) profile.compute_deviations = deviations;
    }
    std::string how_reference;
    const double at_n =
        slowdown_at(result.node_sharing, n, result.ranks_per_node, point.slowdown_how);
    const double at_reference = slowdown_at(result.node_sharing, repeats.front()->ranks,
                                            result.ranks_per_node, how_reference);
    point.ranks = n;
    point.reference_ranks = repeats.front()->ranks;
    point.compute_slowdown = at_n / at_reference;
    const Scaling scaling{
        .ranks = n,
        .ranks_per_node = result.ranks_per_node,
        .batch_per_rank = batch_at(n),
        .compute_slowdown = point.compute_slowdown,
        .communication_scale = result.communication_scale,
        .overlap = settings.overlap.value_or(repeats.front()->configuration.overlap)};
    point.iteration =
        predict_iteration(mean_profile(profiles), network, settings.algorithm, scaling);
    point.iteration_seconds_low = std::numeric_limits<double>::infinity();
    point.iteration_seconds_high = 0;
    for (const auto& profile : profiles) {
      const double t =
          predict_iteration(profile, network, settings.algorithm, scaling).iteration_seconds;
      point.iteration_seconds_low = std::min(point.iteration_seconds_low, t);
      point.iteration_seconds_high = std::max(point.iteration_seconds_high, t);
    }
  };

  PredictedPoint baseline;
  predict(result.baseline_ranks, baseline);
  const int p = result.baseline_ranks;
  const results::StudySummary study = analyze_study(same_threads);
  carry_noise_scale(usable, result);
  for (int n : ranks) {
    PredictedPoint point;
    predict(n, point);
    const double t = point.iteration.iteration_seconds;
    const auto efficiency_at = [&](double seconds) {
      return scaling_efficiency(batch_at(n) * n, seconds, n, batch_at(p) * p,
                                baseline.iteration.iteration_seconds, p);
    };
    point.efficiency = efficiency_at(t);
    point.efficiency_low = efficiency_at(point.iteration_seconds_high);
    point.efficiency_high = efficiency_at(point.iteration_seconds_low);
    point.speedup = point.efficiency * n;
    // Rounding alone must not flag the baseline itself.
    if (point.efficiency > 1 + 1e-9)
      point.above_linear_reason = above_linear_reason(point, batch_at(n), baseline, batch_at(p));
    point.gap =
        split_efficiency_gap(point.efficiency, t, point.iteration.exposed_communication_seconds,
                             point.iteration.straggler_wait_seconds);
    point.held_out = contains(settings.held_out, n);
    point.measured_iteration_seconds = point.measured_efficiency = not_measured;
    for (const auto& configuration : study.configurations)
      if (configuration.ranks == n) {
        point.measured_iteration_seconds = configuration.iteration_seconds_mean;
        point.measured_efficiency = configuration.efficiency_mean;
      }
    point.global_batch = batch_at(n) * n;
    point.statistical_efficiency =
        statistical_efficiency(result.noise_scale, batch_at(p) * p, point.global_batch);
    point.goodput_samples_per_second = point.global_batch / t * point.statistical_efficiency;
    point.samples_to_target = result.baseline_samples_to_target / point.statistical_efficiency;
    point.seconds_to_target = point.samples_to_target / (point.global_batch / t);
    std::vector<double> measured_seconds;
    for (const auto& measured : study.points)
      if (measured.ranks == n && std::isfinite(measured.seconds_to_target))
        measured_seconds.push_back(measured.seconds_to_target);
    if (!measured_seconds.empty()) point.measured_seconds_to_target = mean(measured_seconds);
    point.compared =
        settings.network_describes_runs && std::isfinite(point.measured_iteration_seconds);
    result.points.push_back(point);
  }
  measure_model_error(all_runs, launch_probes, network, settings, repeats_at, result);
  for (auto& point : result.points) set_interval(result.model_error, point);
  return result;
}

}  // namespace dlscale::analysis
