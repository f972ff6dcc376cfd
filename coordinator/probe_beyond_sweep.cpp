// Node-sharing probes beyond the sweep: the network of the sweep's baseline point, as it would be
// at each rank count, made on every rank and measured by worker/node_sharing_probe.
#include "coordinator/probe_beyond_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <tuple>

#include "comm/mpi_check.hpp"
#include "comm/rank_group.hpp"
#include "coordinator/point.hpp"
#include "core/run_clock.hpp"
#include "worker/device_dataset.hpp"
#include "worker/node_sharing_probe.hpp"

namespace dlscale::coordinator {

// The rank counts beyond the sweep's largest point that the launch holds, for node-sharing
// probes without training: each doubling of that point, and the whole launch (full node
// occupancy, where compute per rank is slowest). Cheap beside training there, and it lets
// `dlscale predict` carry compute past the sweep from measurements (docs/scaling-model.md).
std::vector<int> probe_only_rank_counts(const std::vector<SweepPoint>& points, int world_size) {
  int largest = 1;
  for (const auto& point : points) largest = std::max(largest, point.ranks);
  std::vector<int> counts;
  for (long long k = 2LL * largest; k < world_size; k *= 2) counts.push_back(int(k));
  if (world_size > largest) counts.push_back(world_size);
  return counts;
}

// The point that `dlscale predict` measures efficiency against: the fewest ranks, then threads,
// at the first precision of the sweep.
const SweepPoint& baseline_point(const std::vector<SweepPoint>& points) {
  return *std::min_element(points.begin(), points.end(), [&](const auto& a, const auto& b) {
    return std::tuple(a.precision != points.front().precision, a.ranks, a.threads) <
           std::tuple(b.precision != points.front().precision, b.ranks, b.threads);
  });
}

// A node-sharing probe on the ranks of `group` (the first `ranks` of the launch), with the
// network of the sweep's baseline point as it would be at this rank count, and nothing trained.
// Returns the probe on the group's rank 0, nothing elsewhere. Throws PointFailure, on every rank
// of the group, where the network does not fit.
std::optional<results::NodeSharingProbe> probe_without_training(const TrainingPlan& plan,
                                                                kernels::Device& device,
                                                                MPI_Comm group,
                                                                ProgressLine& progress,
                                                                StallWatchdog& watchdog) {
  const RunClock clock;
  const SweepPoint& baseline = baseline_point(plan.points);
  results::NodeSharingProbe probe;
  DLSCALE_MPI_CHECK(MPI_Comm_size(group, &probe.ranks));
  watchdog.begin_point(probe.ranks);
  probe.precision = kernels::precision_name(baseline.precision);
  probe.threads = device.compute_threads();
  // Strong scaling splits the global batch further; the curve is per sample (see predict).
  probe.batch_per_rank =
      plan.scaling == results::Scaling::strong
          ? std::max(
                1, int(std::lround(double(baseline.batch_per_rank) * baseline.ranks / probe.ranks)))
          : baseline.batch_per_rank;
  const comm::HostPlacement placement = comm::host_placement(group);
  DLSCALE_MPI_CHECK(
      MPI_Allreduce(&placement.ranks_on_host, &probe.ranks_per_node, 1, MPI_INT, MPI_MAX, group));
  const workloads::Workload& workload = *plan.workload;
  const int batches = distinct_batches(workload, probe.batch_per_rank);
  // The probe only computes (no update): its memory is the baseline's at the probe's batch.
  SweepPoint probed = baseline;
  probed.ranks = probe.ranks;
  probed.batch_per_rank = probe.batch_per_rank;
  fail_unless_it_fits(group, workload, probe.batch_per_rank, batches, probed, device, plan,
                      placement);
  int group_rank = 0;
  DLSCALE_MPI_CHECK(MPI_Comm_rank(group, &group_rank));
  std::unique_ptr<model::Network<float>> network;
  std::unique_ptr<worker::DeviceDataset> data;
  set_up_or_fail_point(group, [&] {
    network = workload.build_network(device, probe.batch_per_rank);
    network->initialize(baseline.seed);
    data = std::make_unique<worker::DeviceDataset>(device, workload, probe.batch_per_rank, batches,
                                                   baseline.seed, group_rank);
  });
  announce_probe(plan, probe.ranks, progress);
  const auto measurements = worker::probe_node_sharing(
      *network, *data, device, group, plan.schedule.total_iterations(),
      [&] { watchdog.progressed(); }, plan.probe_schedule);
  const auto value = [&](const char* name) {
    for (const auto& measurement : measurements)
      if (measurement.name == name && !measurement.values.empty())
        return measurement.values.front();
    return 0.0;
  };
  double shared_sum = 0;
  const double shared = value(results::node_sharing_shared_seconds);
  DLSCALE_MPI_CHECK(MPI_Reduce(&shared, &shared_sum, 1, MPI_DOUBLE, MPI_SUM, 0, group));
  if (group_rank != 0) return std::nullopt;
  probe.shared_seconds = shared_sum / probe.ranks;
  probe.alone_seconds = value(results::node_sharing_alone_seconds);
  probe.probe_seconds = clock.seconds();
  return probe;
}

}  // namespace dlscale::coordinator
