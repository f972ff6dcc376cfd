#include "coordinator/performance_model.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "coordinator/ring_allreduce.hpp"

namespace dlscale::coordinator {

double allreduce_seconds(const NetworkModel& network, AllreduceAlgorithm algorithm, int ranks,
                         double bytes) {
  if (ranks <= 1) return 0;
  const double n = ranks;
  if (algorithm == AllreduceAlgorithm::ring)
    return ring_allreduce_steps(ranks) * network.alpha_seconds +
           allreduce_bus_factor(ranks) * bytes * network.beta_seconds_per_byte;
  return 2 * std::ceil(std::log2(n)) * network.alpha_seconds + 2 * bytes * network.beta_seconds_per_byte;
}

ComputeProfile profile_of(const results::RunRecord& run) {
  ComputeProfile profile;
  profile.ranks = run.ranks;
  profile.batch_per_rank = run.configuration.batch_per_rank;
  profile.buckets = run.buckets;
  profile.overlap = run.configuration.overlap;
  const int first = run.configuration.warmup_iterations;
  const std::size_t layers = run.layers.size();
  std::vector<double> forward, update, wait;
  std::vector<std::vector<double>> layer_samples(layers);
  for (int i = first; i < run.iterations; ++i) {
    double compute_max = 0, compute_sum = 0;
    for (int r = 0; r < run.ranks; ++r) {
      forward.push_back(run.seconds(i, r, Phase::forward));
      update.push_back(run.seconds(i, r, Phase::update));
      const double compute = run.seconds(i, r, Phase::forward) +
                             run.seconds(i, r, Phase::backward) + run.seconds(i, r, Phase::update);
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
  const auto mean = [](const std::vector<double>& samples) {
    return std::accumulate(samples.begin(), samples.end(), 0.0) / double(samples.size());
  };
  profile.forward_seconds = mean(forward);
  profile.update_seconds = mean(update);
  profile.straggler_wait_seconds = mean(wait);
  for (const auto& samples : layer_samples) profile.layer_backward_seconds.push_back(mean(samples));
  return profile;
}

Prediction predict_iteration(const ComputeProfile& profile, const NetworkModel& network,
                             AllreduceAlgorithm algorithm, bool overlap, int ranks,
                             double batch_per_rank) {
  const double scale = double(batch_per_rank) / profile.batch_per_rank;
  // When each layer's backward ends, measured from the start of backward (last layer first).
  const std::size_t layers = profile.layer_backward_seconds.size();
  std::vector<double> layer_done(layers);
  double clock = 0;
  for (std::size_t l = layers; l-- > 0;) {
    clock += profile.layer_backward_seconds[l] * scale;
    layer_done[l] = clock;
  }
  const double backward = clock;

  Prediction prediction;
  prediction.ranks = ranks;
  double link_free = overlap ? 0 : backward;  // without overlap nothing starts before the end
  for (const auto& bucket : profile.buckets) {
    const double ready = overlap ? layer_done.at(bucket.first_layer) : backward;
    const double duration = allreduce_seconds(network, algorithm, ranks, bucket.bytes);
    link_free = std::max(link_free, ready) + duration;
    prediction.communication_seconds += duration;
  }
  prediction.exposed_communication_seconds =
      profile.buckets.empty() ? 0 : std::max(0.0, link_free - backward);
  prediction.compute_seconds =
      (profile.forward_seconds + profile.update_seconds) * scale + backward;
  prediction.straggler_wait_seconds = ranks > 1 ? profile.straggler_wait_seconds * scale : 0;
  prediction.iteration_seconds = prediction.compute_seconds +
                                 prediction.exposed_communication_seconds +
                                 prediction.straggler_wait_seconds;
  return prediction;
}

}  // namespace dlscale::coordinator
