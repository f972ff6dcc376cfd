// Shared passes first, so that every rank's first touch of its buffers falls in the warm-up;
// then rank 0 alone. Ranks that sit a phase out wait in comm::quiet_barrier, asleep, as the
// ranks outside a sweep point do, so they leave the cores to the ranks being timed. In the shared
// phase a rank that has done its timed passes keeps computing (untimed) until every rank has,
// so that no timed pass runs beside fewer ranks than the point has.
#include "worker/node_sharing_probe.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_check.hpp"
#include "comm/rank_group.hpp"
#include "core/run_clock.hpp"
#include "kernels/device.hpp"
#include "model/network.hpp"
#include "results/study_record.hpp"
#include "worker/device_dataset.hpp"

namespace dlscale::worker {

namespace {

// Median seconds of one forward+backward pass over at least `iterations` passes, and as many more
// as make `seconds` in all but no more than `most_iterations`, after `warmup` untimed ones, timed
// with device events. The median, so
// that a moment when something else took the core moves it little. No update: the parameters
// stay as they are. With `group`, the rank then goes on with untimed passes until every rank of
// the group has finished its timed ones.
double median_pass_seconds(model::Network<float>& network, const DeviceDataset& data,
                           kernels::Device& device, int warmup, int iterations, int most_iterations,
                           double seconds, const std::function<void()>& after_each_pass,
                           MPI_Comm group = MPI_COMM_NULL) {
  const auto start = device.make_event(), end = device.make_event();
  // Only over the batches made before training: making one here would be timed with the pass.
  const std::size_t batches = data.made_batches();
  const auto pass = [&](int pass_index) {
    const int i = int(std::size_t(pass_index) % batches);
    device.record(*start);
    network.forward_loss(data.batch(), data.inputs(i), data.labels(i));
    network.backward(data.batch(), data.inputs(i));
    device.record(*end);
    const double pass_seconds = device.elapsed_seconds(*start, *end);
    if (after_each_pass) after_each_pass();
    return pass_seconds;
  };
  int i = 0;
  for (; i < warmup; ++i) pass(i);
  std::vector<double> timed;
  double total = 0;
  for (; int(timed.size()) < iterations || (total < seconds && int(timed.size()) < most_iterations);
       ++i) {
    timed.push_back(pass(i));
    total += timed.back();
  }
  if (group != MPI_COMM_NULL) {
    MPI_Request everyone_done = MPI_REQUEST_NULL;
    DLSCALE_MPI_CHECK(MPI_Ibarrier(group, &everyone_done));
    for (int done = 0;; ++i) {
      DLSCALE_MPI_CHECK(MPI_Test(&everyone_done, &done, MPI_STATUS_IGNORE));
      if (done) break;
      pass(i);
    }
  }
  std::sort(timed.begin(), timed.end());
  const std::size_t middle = timed.size() / 2;
  return timed.size() % 2 == 1 ? timed[middle] : (timed[middle - 1] + timed[middle]) / 2;
}

results::Measurement per_rank_seconds(const char* name, const char* description) {
  results::Measurement measurement;
  measurement.name = name;
  measurement.units = "seconds";
  measurement.description = description;
  measurement.shape = results::MeasurementShape::per_rank;
  measurement.headline = results::Headline::none;
  return measurement;
}

}  // namespace

int probe_pass_budget(const NodeSharingProbeSchedule& schedule, int point_iterations) {
  const int budget = point_iterations / schedule.iterations_per_pass;
  const int least = schedule.warmup_iterations + schedule.least_shared_iterations +
                    schedule.least_alone_iterations;
  return budget >= least ? budget : 0;
}

int least_probed_point_iterations(const NodeSharingProbeSchedule& schedule) {
  return (schedule.warmup_iterations + schedule.least_shared_iterations +
          schedule.least_alone_iterations) *
         schedule.iterations_per_pass;
}

std::vector<results::Measurement> probe_node_sharing(model::Network<float>& network,
                                                     const DeviceDataset& data,
                                                     kernels::Device& device, MPI_Comm group,
                                                     int point_iterations,
                                                     const std::function<void()>& after_each_pass,
                                                     const NodeSharingProbeSchedule& schedule) {
  int rank = 0, size = 1;
  DLSCALE_MPI_CHECK(MPI_Comm_rank(group, &rank));
  DLSCALE_MPI_CHECK(MPI_Comm_size(group, &size));
  if (size < 2) return {};
  const RunClock clock;

  auto shared = per_rank_seconds(
      results::node_sharing_shared_seconds,
      "node-sharing probe: median forward+backward seconds of one pass with every rank of the run "
      "computing at once (compute only, no gradient sums)");
  auto alone = per_rank_seconds(
      results::node_sharing_alone_seconds,
      "node-sharing probe: median forward+backward seconds of one pass on rank 0 while the other "
      "ranks of the run sleep");
  const int budget = probe_pass_budget(schedule, point_iterations);
  if (!schedule.enabled || budget == 0) {
    shared.absent_reason = alone.absent_reason =
        !schedule.enabled
            ? std::string("not probed: turned off (--probe no)")
            : fmt::format(
                  "not probed: a point of {} iterations is shorter than the {} that keep the "
                  "probe's passes to 1 in {} of the point's",
                  point_iterations, least_probed_point_iterations(schedule),
                  schedule.iterations_per_pass);
    return {std::move(shared), std::move(alone)};
  }
  // Two thirds of the timed passes for the shared phase, whose ranks vary more, at least its least;
  // the rest for rank 0 alone.
  const int timed = budget - schedule.warmup_iterations;
  const int most_shared =
      std::max(schedule.least_shared_iterations,
               std::min(timed - schedule.least_alone_iterations, 2 * timed / 3));
  const int most_alone = timed - most_shared;
  comm::quiet_barrier(group);
  shared.values = {median_pass_seconds(network, data, device, schedule.warmup_iterations,
                                       schedule.least_shared_iterations, most_shared,
                                       schedule.shared_seconds, after_each_pass, group)};
  comm::quiet_barrier(group);

  if (rank == 0)
    alone.values = {median_pass_seconds(network, data, device, 0, schedule.least_alone_iterations,
                                        most_alone, schedule.alone_seconds, after_each_pass)};
  else
    alone.absent_reason = "rank 0 alone measures the rate of an unshared node";
  comm::quiet_barrier(group);

  auto cost = per_rank_seconds(results::node_sharing_probe_seconds,
                               "node-sharing probe: wall-clock seconds this rank spent in it, "
                               "before training (its cost)");
  cost.values = {clock.seconds()};
  return {std::move(shared), std::move(alone), std::move(cost)};
}

}  // namespace dlscale::worker
