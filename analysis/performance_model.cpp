#include "analysis/performance_model.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "analysis/alpha_beta_fit.hpp"
#include "analysis/statistics.hpp"
#include "core/errors.hpp"

namespace dlscale::analysis {

namespace {

results::PiecewiseAlphaBetaFit single_piece(double alpha_seconds, double beta_seconds_per_byte) {
  const results::AlphaBetaFit fit{.alpha_seconds = alpha_seconds,
                                  .beta_seconds_per_byte = beta_seconds_per_byte};
  return {.pieces = {{.fit = fit}}};
}

// The sweep's piecewise fit as stored, or computed from its p50 times where it was not.
results::PiecewiseAlphaBetaFit piecewise_of(const results::PiecewiseAlphaBetaFit& stored,
                                            const std::vector<results::CommSizeStatistics>& sizes,
                                            int ranks) {
  if (!stored.pieces.empty()) return stored;
  std::vector<double> bytes, seconds;
  for (const auto& size : sizes) {
    bytes.push_back(double(size.bytes));
    seconds.push_back(size.seconds_p50);
  }
  return fit_piecewise_alpha_beta(bytes, seconds, ring_allreduce_hops(ranks));
}

bool usable(const results::PiecewiseAlphaBetaFit& fit) {
  return !fit.pieces.empty() &&
         std::all_of(fit.pieces.begin(), fit.pieces.end(), [](const auto& piece) {
           return std::isfinite(piece.fit.alpha_seconds) &&
                  std::isfinite(piece.fit.beta_seconds_per_byte);
         });
}

double compute_seconds(const results::RunRecord& run, int iteration, int rank) {
  return run.seconds(iteration, rank, Phase::forward) +
         run.seconds(iteration, rank, Phase::backward) +
         run.seconds(iteration, rank, Phase::update);
}

}  // namespace

NetworkModel uniform_network(double alpha_seconds, double beta_seconds_per_byte,
                             std::string source) {
  const auto link = single_piece(alpha_seconds, beta_seconds_per_byte);
  return {.intra_node = link, .inter_node = link, .source = std::move(source), .notes = {}};
}

namespace {

// The links of one table of the sweep (one collective in float): per-hop alpha and beta for
// intra-node and inter-node hops, under that collective's own model.
NetworkModel network_of_table(const results::CommRecord& sweep, const results::CommTable* allreduce,
                              const std::string& path) {
  const auto whole =
      piecewise_of(allreduce->times.piecewise_fit, allreduce->times.sizes, sweep.ranks);
  if (sweep.ranks < 2 || !usable(whole))
    throw UserError(
        fmt::format("--comm '{}': the sweep ran on {} rank(s) and has no per-step "
                    "alpha and beta; run `dlscale comm` on 2 or more ranks",
                    path, sweep.ranks));
  NetworkModel network{
      .intra_node = whole,
      .inter_node = whole,
      .source = fmt::format("--comm {} ({} ranks on {} host{}, {})", path, sweep.ranks,
                            sweep.node_count, sweep.node_count == 1 ? "" : "s", sweep.backend),
      .notes = {},
      .intra_node_ranks = sweep.ranks,
      .inter_node_ranks = sweep.ranks,
      .measured_ranks = sweep.ranks};
  bool intra = false, inter = false;
  for (const auto& link : allreduce->links) {
    const auto fit = piecewise_of(link.times.piecewise_fit, link.times.sizes, link.ranks);
    if (link.ranks < 2 || !usable(fit)) continue;
    if (link.link == "intra_node") {
      network.intra_node = fit;
      network.intra_node_ranks = link.ranks;
      intra = true;
    } else if (link.link == "inter_node") {
      network.inter_node = fit;
      network.inter_node_ranks = link.ranks;
      inter = true;
    }
  }
  if (sweep.node_count == 1) intra = true;
  if (sweep.node_count == sweep.ranks) inter = true;
  if (!intra && !inter)
    network.notes.push_back(
        "the sweep mixed intra-node and inter-node hops and its file holds no sweep of each "
        "alone (written before they were measured); its fit stands in for both links");
  else if (!intra)
    network.notes.push_back(
        "intra-node hops: not measured (the sweep had one rank per host); "
        "the inter-node fit stands in");
  else if (!inter)
    network.notes.push_back(
        "inter-node hops: not measured (the sweep ran on one host); the "
        "intra-node fit stands in: pass a sweep across hosts or --network");
  return network;
}

}  // namespace

NetworkModel network_of_sweep(const results::CommRecord& sweep, const std::string& path) {
  const results::CommTable* allreduce = results::float_allreduce_table(sweep);
  if (allreduce == nullptr)
    throw UserError(fmt::format(
        "--comm '{}': the sweep has no allreduce in float, which gradient sums are modelled "
        "with; run `dlscale comm` with --collective allreduce --dtype float",
        path));
  NetworkModel network = network_of_table(sweep, allreduce, path);
  // Sharded strategies' collectives, each from its own sweep where the file has a usable one.
  const auto own = [&](const char* collective) -> std::shared_ptr<const NetworkModel> {
    const results::CommTable* table = results::float_table(sweep, collective);
    if (table == nullptr || !usable(table->times.piecewise_fit)) return nullptr;
    return std::make_shared<const NetworkModel>(network_of_table(sweep, table, path));
  };
  network.reduce_scatter = own(results::schema::comm_file::reduce_scatter_collective);
  network.all_gather = own(results::schema::comm_file::all_gather_collective);
  return network;
}

HopCost hop_cost(const results::PiecewiseAlphaBetaFit& link, int sweep_ranks, double bytes) {
  const auto& latency = link.pieces.front().fit;
  const auto& piece = piece_for(link, bytes).fit;
  double beta = piece.beta_seconds_per_byte;
  if (bytes > 0 && sweep_ranks > 1)
    beta += (piece.alpha_seconds - latency.alpha_seconds) * sweep_ranks / bytes;
  return {latency.alpha_seconds, std::max(0.0, beta)};
}

double allreduce_seconds(const NetworkModel& network, AllreduceAlgorithm algorithm, int ranks,
                         int ranks_per_node, double bytes) {
  if (ranks <= 1) return 0;
  const int per_node = std::max(1, ranks_per_node);
  const bool intra_hops = per_node > 1;
  const bool inter_hops = ranks > per_node;
  const HopCost intra = hop_cost(network.intra_node, network.intra_node_ranks, bytes);
  const HopCost inter = hop_cost(network.inter_node, network.inter_node_ranks, bytes);
  // Each step of the collective moves `step_bytes` over every link at once, so it lasts as long
  // as the slowest kind of link it uses.
  const auto step_seconds = [&](double step_bytes) {
    double slowest = 0;
    if (intra_hops)
      slowest = std::max(slowest, intra.alpha_seconds + step_bytes * intra.beta_seconds_per_byte);
    if (inter_hops)
      slowest = std::max(slowest, inter.alpha_seconds + step_bytes * inter.beta_seconds_per_byte);
    return slowest;
  };
  const double n = ranks;
  if (algorithm == AllreduceAlgorithm::ring)  // 2(N-1) steps of m/N bytes
    return 2 * (n - 1) * step_seconds(bytes / n);
  // Tree: 2 ceil(log2 N) latencies and 2m bytes, at the slower link's alpha and beta.
  double alpha = 0, beta = 0;
  for (const auto* link : {intra_hops ? &intra : nullptr, inter_hops ? &inter : nullptr})
    if (link != nullptr) {
      alpha = std::max(alpha, link->alpha_seconds);
      beta = std::max(beta, link->beta_seconds_per_byte);
    }
  return 2 * std::ceil(std::log2(n)) * alpha + 2 * bytes * beta;
}

namespace {

// A ring reduce-scatter or all-gather: N-1 steps of m/N bytes on every link at once.
double half_ring_seconds(const NetworkModel& network, int ranks, int ranks_per_node, double bytes) {
  if (ranks <= 1) return 0;
  // Half of a ring allreduce's 2(N-1) steps, with this network's hop costs.
  return allreduce_seconds(network, AllreduceAlgorithm::ring, ranks, ranks_per_node, bytes) / 2;
}

}  // namespace

double reduce_scatter_seconds(const NetworkModel& network, int ranks, int ranks_per_node,
                              double bytes) {
  return half_ring_seconds(network.reduce_scatter ? *network.reduce_scatter : network, ranks,
                           ranks_per_node, bytes);
}

double all_gather_seconds(const NetworkModel& network, int ranks, int ranks_per_node,
                          double bytes) {
  return half_ring_seconds(network.all_gather ? *network.all_gather : network, ranks,
                           ranks_per_node, bytes);
}

double expected_excess_of_maximum(std::vector<double> sample, int ranks) {
  if (ranks <= 1 || sample.empty()) return 0;
  std::sort(sample.begin(), sample.end());
  const double size = double(sample.size());
  double expected_maximum = 0;
  for (std::size_t j = 1; j <= sample.size(); ++j)
    expected_maximum +=
        sample[j - 1] * (std::pow(double(j) / size, ranks) - std::pow(double(j - 1) / size, ranks));
  return expected_maximum - mean(sample);
}

std::vector<double> compute_deviations_of(const results::RunRecord& run) {
  const int first = run.configuration.warmup_iterations;
  std::vector<double> deviations;
  if (run.ranks == 1) {
    std::vector<double> compute;
    for (int i = first; i < run.iterations; ++i) compute.push_back(compute_seconds(run, i, 0));
    const double average = mean(compute);
    for (double c : compute) deviations.push_back(c - average);
    return deviations;
  }
  const double unbiased = std::sqrt(double(run.ranks) / (run.ranks - 1));
  for (int i = first; i < run.iterations; ++i) {
    double sum = 0;
    for (int r = 0; r < run.ranks; ++r) sum += compute_seconds(run, i, r);
    for (int r = 0; r < run.ranks; ++r)
      deviations.push_back((compute_seconds(run, i, r) - sum / run.ranks) * unbiased);
  }
  return deviations;
}

ComputeProfile profile_of(const results::RunRecord& run) {
  ComputeProfile profile;
  profile.ranks = run.ranks;
  profile.batch_per_rank = run.configuration.batch_per_rank;
  profile.buckets = run.buckets;
  profile.overlap = run.configuration.overlap;
  profile.sharding = run.configuration.sharding;
  const int first = run.configuration.warmup_iterations;
  const std::size_t layers = run.layers.size();
  std::vector<double> forward, update, wait;
  std::vector<std::vector<double>> layer_samples(layers);
  for (int i = first; i < run.iterations; ++i) {
    double compute_max = 0, compute_sum = 0;
    for (int r = 0; r < run.ranks; ++r) {
      forward.push_back(run.seconds(i, r, Phase::forward));
      update.push_back(run.seconds(i, r, Phase::update));
      const double compute = compute_seconds(run, i, r);
      compute_max = std::max(compute_max, compute);
      compute_sum += compute;
      for (std::size_t l = 0; l < layers; ++l)
        layer_samples[l].push_back(
            run.layer_backward_seconds[(std::size_t(i) * run.ranks + r) * layers + l]);
    }
    wait.push_back(compute_max - compute_sum / run.ranks);
  }
  // Means, not medians: the model predicts the mean iteration time T(n) the study reports, and
  // a slow iteration counts in that mean in full.
  profile.forward_seconds = mean(forward);
  profile.update_seconds = mean(update);
  profile.straggler_wait_seconds = mean(wait);
  for (const auto& samples : layer_samples) profile.layer_backward_seconds.push_back(mean(samples));
  profile.compute_deviations = compute_deviations_of(run);
  return profile;
}

ComputeProfile mean_profile(const std::vector<ComputeProfile>& repeats) {
  ComputeProfile mean = repeats.at(0);
  const double count = double(repeats.size());
  const auto average = [&](auto member) {
    double sum = 0;
    for (const auto& repeat : repeats) sum += repeat.*member;
    return sum / count;
  };
  mean.forward_seconds = average(&ComputeProfile::forward_seconds);
  mean.update_seconds = average(&ComputeProfile::update_seconds);
  mean.straggler_wait_seconds = average(&ComputeProfile::straggler_wait_seconds);
  for (std::size_t l = 0; l < mean.layer_backward_seconds.size(); ++l) {
    double sum = 0;
    for (const auto& repeat : repeats) sum += repeat.layer_backward_seconds.at(l);
    mean.layer_backward_seconds[l] = sum / count;
  }
  mean.compute_deviations.clear();
  for (const auto& repeat : repeats)
    mean.compute_deviations.insert(mean.compute_deviations.end(), repeat.compute_deviations.begin(),
                                   repeat.compute_deviations.end());
  return mean;
}

namespace {

// The share of the parameters a rank updates at `ranks` under the profile's strategy.
double updated_share(const ComputeProfile& profile, int ranks) {
  const bool sharded = profile.sharding != results::Sharding::none && ranks > 1;
  return sharded ? 1.0 / ranks : 1.0;
}

// ZeRO-3's step as the strategy runs it (worker/data_parallel_strategy.cpp): a discrete-event
// replay of one link and one compute stream. Units are numbered as the buckets, from the last
// layers down; forward runs them from the highest number to 0, backward from 0 up.
Prediction fully_sharded_iteration(const ComputeProfile& profile, const NetworkModel& network,
                                   const Scaling& scaling, double scale, double update_seconds) {
  const auto& units = profile.buckets;
  const std::size_t count = units.size();
  const int n = scaling.ranks, per_node = scaling.ranks_per_node;
  const auto gather = [&](std::size_t u) {
    return scaling.communication_scale * all_gather_seconds(network, n, per_node, units[u].bytes);
  };
  const auto scatter = [&](std::size_t u) {
    return scaling.communication_scale *
           reduce_scatter_seconds(network, n, per_node, units[u].bytes);
  };
  double backward_total = 0;
  for (double seconds : profile.layer_backward_seconds) backward_total += seconds * scale;
  std::vector<double> unit_backward(count, 0);
  double units_backward = 0;
  for (std::size_t u = 0; u < count; ++u) {
    for (int l = units[u].first_layer; l <= units[u].last_layer; ++l)
      unit_backward[u] += profile.layer_backward_seconds.at(std::size_t(l)) * scale;
    units_backward += unit_backward[u];
  }
  // Forward has no per-layer times: each unit takes its backward's share of forward.
  const double forward_total = profile.forward_seconds * scale;
  const auto unit_forward = [&](std::size_t u) {
    return backward_total > 0 ? forward_total * unit_backward[u] / backward_total
                              : forward_total / double(count);
  };
  Prediction prediction;
  prediction.ranks = n;
  prediction.compute_seconds = forward_total + backward_total + update_seconds;
  std::vector<double> gathered(count, 0);  // when unit u's latest gather ends
  double clock = forward_total - [&] {
    double in_units = 0;
    for (std::size_t u = 0; u < count; ++u) in_units += unit_forward(u);
    return in_units;
  }();
  double communication = 0;
  gathered[count - 1] = gather(count - 1);
  communication += gathered[count - 1];
  for (std::size_t u = count; u-- > 0;) {
    const double start = std::max(clock, gathered[u]);
    if (u > 0) {
      gathered[u - 1] = start + gather(u - 1);
      communication += gather(u - 1);
    }
    clock = start + unit_forward(u);
  }
  const double forward_end = clock;
  clock += backward_total - units_backward;  // layers outside every unit
  double link = clock, scattered = 0;
  for (std::size_t u = 0; u < count; ++u) {
    // The gate joins every collective in flight: this unit's gather and the last reduce-scatter.
    const double start = std::max({clock, u < 2 ? 0.0 : gathered[u], scattered});
    if (u + 1 < count && u + 1 >= 2) {
      gathered[u + 1] = start + gather(u + 1);
      communication += gather(u + 1);
      link = gathered[u + 1];
    }
    clock = start + unit_backward[u];
    scattered = std::max(clock, link) + scatter(u);
    communication += scatter(u);
    link = scattered;
  }
  const double end = std::max(clock, scattered);
  prediction.communication_seconds = communication;
  prediction.communication_span_seconds = communication;
  prediction.exposed_communication_seconds =
      (forward_end - forward_total) + (end - forward_end - backward_total);
  prediction.straggler_wait_seconds = 0;
  return prediction;
}

}  // namespace

Prediction predict_iteration(const ComputeProfile& profile, const NetworkModel& network,
                             AllreduceAlgorithm algorithm, const Scaling& scaling) {
  const double scale = scaling.batch_per_rank / profile.batch_per_rank * scaling.compute_slowdown;
  // A sharded update covers 1/N of the parameters: carried from the profile's own share.
  const double update_seconds = profile.update_seconds * scale *
                                updated_share(profile, scaling.ranks) /
                                updated_share(profile, profile.ranks);
  const bool sharded = profile.sharding != results::Sharding::none && scaling.ranks > 1;
  Prediction prediction;
  if (sharded && profile.sharding == results::Sharding::full && !profile.buckets.empty()) {
    prediction = fully_sharded_iteration(profile, network, scaling, scale, update_seconds);
  } else {
    // When each layer's backward ends, measured from the start of backward (last layer first).
    const std::size_t layers = profile.layer_backward_seconds.size();
    std::vector<double> layer_done(layers);
    double clock = 0;
    for (std::size_t l = layers; l-- > 0;) {
      clock += profile.layer_backward_seconds[l] * scale;
      layer_done[l] = clock;
    }
    const double backward = clock;
    prediction.ranks = scaling.ranks;
    // Without overlap nothing starts before the end of backward. Replicated, each bucket is
    // allreduced; sharded (ZeRO-1, 2), reduce-scattered, and all-gathered after the update.
    double link_free = scaling.overlap ? 0 : backward;
    double first_start = -1, gathers = 0;
    for (const auto& bucket : profile.buckets) {
      const double ready = scaling.overlap ? layer_done.at(bucket.first_layer) : backward;
      const double duration =
          scaling.communication_scale *
          (sharded ? reduce_scatter_seconds(network, scaling.ranks, scaling.ranks_per_node,
                                            bucket.bytes)
                   : allreduce_seconds(network, algorithm, scaling.ranks, scaling.ranks_per_node,
                                       bucket.bytes));
      if (sharded)
        gathers += scaling.communication_scale *
                   all_gather_seconds(network, scaling.ranks, scaling.ranks_per_node, bucket.bytes);
      const double start = std::max(link_free, ready);
      if (first_start < 0) first_start = start;
      link_free = start + duration;
      prediction.communication_seconds += duration;
    }
    prediction.communication_seconds += gathers;
    prediction.communication_span_seconds =
        profile.buckets.empty() || scaling.ranks <= 1 ? 0 : link_free - first_start + gathers;
    prediction.exposed_communication_seconds =
        profile.buckets.empty() ? 0 : std::max(0.0, link_free - backward) + gathers;
    prediction.compute_seconds = profile.forward_seconds * scale + update_seconds + backward;
  }
  // The slowest of N ranks, each departing from the mean as the measured ranks did.
  prediction.straggler_wait_seconds =
      expected_excess_of_maximum(profile.compute_deviations, scaling.ranks) * scale;
  prediction.iteration_seconds = prediction.compute_seconds +
                                 prediction.exposed_communication_seconds +
                                 prediction.straggler_wait_seconds;
  return prediction;
}

double measured_communication_span_seconds(const results::RunRecord& run) {
  if (run.ranks < 2 || run.communication_seconds.empty()) return 0;
  std::vector<double> spans;
  for (int i = run.configuration.warmup_iterations; i < run.iterations; ++i) {
    double shortest = run.communication_seconds[std::size_t(i) * run.ranks];
    for (int r = 1; r < run.ranks; ++r)
      shortest = std::min(shortest, run.communication_seconds[std::size_t(i) * run.ranks + r]);
    spans.push_back(shortest);
  }
  return mean(spans);
}

double communication_calibration(const ComputeProfile& profile, const NetworkModel& network,
                                 AllreduceAlgorithm algorithm, Scaling scaling,
                                 double measured_span_seconds) {
  const auto span = [&](double scale) {
    scaling.communication_scale = scale;
    return predict_iteration(profile, network, algorithm, scaling).communication_span_seconds;
  };
  if (!(measured_span_seconds > 0) || !(span(1) > 0)) return 1;
  // The span grows with the scale (a gap between buckets waiting for backward may shrink, but the
  // sums themselves grow), so bisect on a log scale between 1/1000 and 1000.
  double low = std::log(1e-3), high = std::log(1e3);
  for (int step = 0; step < 60; ++step) {
    const double middle = (low + high) / 2;
    (span(std::exp(middle)) < measured_span_seconds ? low : high) = middle;
  }
  return std::exp((low + high) / 2);
}

}  // namespace dlscale::analysis
