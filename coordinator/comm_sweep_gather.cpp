// Gathering is done once, after the sweep, so it never disturbs a measured call.
#include "coordinator/comm_sweep_gather.hpp"

#include <numeric>
#include <set>

namespace dlscale::coordinator {

namespace {

// One placement gathered: its sizes (wrong elements summed over ranks) and its raw seconds,
// gathered [rank][size][iteration] and stored [size][iteration][rank].
void gather_placement(comm::HostGroup& group, const worker::PlacementMeasurements& placement,
                      std::span<const std::uint64_t> row_counts, std::size_t element_bytes,
                      int measured_iterations, std::vector<results::CommSizeStatistics>& sizes,
                      std::vector<double>& seconds) {
  const std::vector<double> gathered = group.gather_to_root(placement.seconds);
  std::vector<std::vector<unsigned long long>> wrong_by_size;
  for (const std::uint64_t wrong : placement.wrong_elements)
    wrong_by_size.push_back(group.gather_to_root(static_cast<unsigned long long>(wrong)));
  if (group.rank() != 0) return;
  for (std::size_t s = 0; s < row_counts.size(); ++s) {
    results::CommSizeStatistics size;
    size.count = row_counts[s];
    size.bytes = row_counts[s] * element_bytes;
    size.wrong_elements =
        std::accumulate(wrong_by_size[s].begin(), wrong_by_size[s].end(), std::uint64_t{0});
    sizes.push_back(size);
  }
  const auto ranks = std::size_t(group.size());
  const std::size_t rows = row_counts.size();
  const auto iterations = std::size_t(measured_iterations);
  seconds.resize(gathered.size());
  for (std::size_t r = 0; r < ranks; ++r)
    for (std::size_t s = 0; s < rows; ++s)
      for (std::size_t i = 0; i < iterations; ++i)
        seconds[(s * iterations + i) * ranks + r] = gathered[(r * rows + s) * iterations + i];
}

}  // namespace

std::optional<results::CommRecord> gather_comm_launch(comm::HostGroup& group,
                                                      const worker::SweepSchedule& schedule,
                                                      const std::string& host,
                                                      const std::string& backend) {
  const std::vector<std::string> hosts = group.gather_strings_to_root(host);
  if (group.rank() != 0) return std::nullopt;
  results::CommRecord record;
  record.backend = backend;
  record.ranks = group.size();
  record.rank_hosts = hosts;
  record.node_count = int(std::set<std::string>(hosts.begin(), hosts.end()).size());
  record.warmup_iterations = schedule.warmup_iterations;
  record.measured_iterations = schedule.measured_iterations;
  return record;
}

std::optional<results::SweepTimes> gather_sweep_times(
    comm::HostGroup& group, const worker::CollectiveSweepMeasurements& measurements,
    std::span<const std::uint64_t> row_counts, std::size_t element_bytes, int measured_iterations) {
  results::SweepTimes times;
  gather_placement(group, measurements.out_of_place, row_counts, element_bytes, measured_iterations,
                   times.out_of_place_sizes, times.out_of_place_seconds);
  gather_placement(group, measurements.in_place, row_counts, element_bytes, measured_iterations,
                   times.sizes, times.seconds);
  if (group.rank() != 0) return std::nullopt;
  return times;
}

}  // namespace dlscale::coordinator
