// Gathering is done once, after training, so it never disturbs the measured iterations.
#include "coordinator/timing_gather.hpp"

#include <algorithm>
#include <map>

#include "coordinator/measurement_gather.hpp"

namespace dlscale::coordinator {

std::optional<results::RunRecord> gather_run(comm::HostGroup& group, const RankReport& report,
                                             const results::RunConfiguration& configuration,
                                             const results::RunEnvironment& environment) {
  const std::vector<double> seconds = group.gather_to_root(report.measurements.phase_seconds);
  const std::vector<double> losses = group.gather_to_root(report.measurements.loss);
  const std::vector<double> communication =
      group.gather_to_root(report.measurements.communication_seconds);
  const std::vector<double> layer_seconds =
      group.gather_to_root(report.measurements.layer_backward_seconds);
  const auto fingerprints =
      group.gather_to_root(static_cast<unsigned long long>(report.parameter_fingerprint));
  const auto local_ranks = group.gather_to_root(static_cast<unsigned long long>(report.local_rank));
  const std::vector<std::string> hosts = group.gather_strings_to_root(report.host);
  auto measurements = gather_measurements(group, report.measurements.series);
  if (group.rank() != 0) return std::nullopt;

  results::RunRecord record;
  record.configuration = configuration;
  record.environment = environment;
  record.environment.rank_hosts = hosts;
  std::map<std::string, int> ranks_on_host;
  for (const auto& host : hosts) ++ranks_on_host[host];
  record.environment.node_count = int(ranks_on_host.size());
  for (const auto& [host, count] : ranks_on_host)
    record.environment.ranks_per_node = std::max(record.environment.ranks_per_node, count);
  record.ranks = group.size();
  record.environment.count_ring_hops();
  record.local_ranks.assign(local_ranks.begin(), local_ranks.end());
  record.iterations = int(report.measurements.loss.size());
  record.phase_seconds.resize(seconds.size());
  record.loss.resize(losses.size());
  record.communication_seconds.resize(communication.size());
  record.layer_backward_seconds.resize(layer_seconds.size());
  const auto ranks = std::size_t(record.ranks);
  const auto iterations = std::size_t(record.iterations);
  const std::size_t layers =
      iterations > 0 ? report.measurements.layer_backward_seconds.size() / iterations : 0;
  // Gathered rank-major; stored iteration-major.
  for (std::size_t r = 0; r < ranks; ++r)
    for (std::size_t i = 0; i < iterations; ++i) {
      record.loss[i * ranks + r] = losses[r * iterations + i];
      record.communication_seconds[i * ranks + r] = communication[r * iterations + i];
      for (std::size_t l = 0; l < layers; ++l)
        record.layer_backward_seconds[(i * ranks + r) * layers + l] =
            layer_seconds[(r * iterations + i) * layers + l];
      for (std::size_t p = 0; p < phase_count; ++p)
        record.phase_seconds[(i * ranks + r) * phase_count + p] =
            seconds[(r * iterations + i) * phase_count + p];
    }
  record.parameter_fingerprints.assign(fingerprints.begin(), fingerprints.end());
  record.measurements = std::move(measurements);
  return record;
}

}  // namespace dlscale::coordinator
