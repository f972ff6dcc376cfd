// Gathering is done once, after the sweep, so it never disturbs a measured call.
#include "coordinator/comm_sweep_gather.hpp"

#include <numeric>
#include <set>

namespace dlscale::coordinator {

std::optional<results::CommRecord> gather_comm_sweep(
    comm::HostGroup& group, const worker::AllreduceSweepMeasurements& measurements,
    std::span<const std::uint64_t> element_counts, const worker::AllreduceSchedule& schedule,
    const std::string& host, const std::string& backend) {
  const std::vector<double> seconds = group.gather_to_root(measurements.seconds);
  std::vector<std::vector<unsigned long long>> wrong_by_size;
  for (const std::uint64_t wrong : measurements.wrong_elements)
    wrong_by_size.push_back(group.gather_to_root(static_cast<unsigned long long>(wrong)));
  const std::vector<std::string> hosts = group.gather_strings_to_root(host);
  if (group.rank() != 0) return std::nullopt;

  results::CommRecord record;
  record.backend = backend;
  record.ranks = group.size();
  record.rank_hosts = hosts;
  record.node_count = int(std::set<std::string>(hosts.begin(), hosts.end()).size());
  record.warmup_iterations = schedule.warmup_iterations;
  record.measured_iterations = schedule.measured_iterations;
  for (std::size_t s = 0; s < element_counts.size(); ++s) {
    results::CommSizeStatistics size;
    size.count = element_counts[s];
    size.bytes = element_counts[s] * sizeof(float);
    size.wrong_elements =
        std::accumulate(wrong_by_size[s].begin(), wrong_by_size[s].end(), std::uint64_t{0});
    record.sizes.push_back(size);
  }
  // Gathered [rank][size][iteration]; stored [size][iteration][rank].
  const std::size_t ranks = std::size_t(record.ranks);
  const std::size_t sizes = element_counts.size();
  const auto iterations = std::size_t(schedule.measured_iterations);
  record.seconds.resize(seconds.size());
  for (std::size_t r = 0; r < ranks; ++r)
    for (std::size_t s = 0; s < sizes; ++s)
      for (std::size_t i = 0; i < iterations; ++i)
        record.seconds[(s * iterations + i) * ranks + r] =
            seconds[(r * sizes + s) * iterations + i];
  return record;
}

}  // namespace dlscale::coordinator
