// The node-sharing probe: how much slower a rank computes while the other ranks of its sweep
// point compute beside it (memory bandwidth, shared caches, clocks, or cores shared by
// oversubscribed or emulated hosts). A few compute-only forward+backward passes of the point's own
// network, first on rank 0 alone while the others sleep, then on every rank at once; `dlscale
// predict` scales compute by the ratio (docs/scaling-model.md). No gradient is summed and no
// parameter changes, so the training that follows starts exactly where it would have.
#pragma once

#include <mpi.h>

#include <functional>
#include <vector>

#include "results/measurement.hpp"

namespace dlscale::kernels {
class Device;
}  // namespace dlscale::kernels
namespace dlscale::model {
template <typename T>
class Network;
}  // namespace dlscale::model

namespace dlscale::worker {

class DeviceDataset;

// Each phase times at least its least passes and goes on until its timed passes add up to its
// seconds, so that a small workload's probe averages over more than a moment of the node's life;
// but the probe's passes never outnumber one per `iterations_per_pass` of the point's iterations.
// A pass is the forward and backward of one training iteration, so the probe costs at most about
// that share of the point's training time (in the quickstart it once cost 60%), and a point too
// short for the probe's least passes gets none.
struct NodeSharingProbeSchedule {
  bool enabled = true;          // false: nothing runs, and the measurements say it was turned off
  int iterations_per_pass = 5;  // the probe's passes: at most a fifth of the point's iterations
  int warmup_iterations = 1;    // before the shared passes, on every rank (first touch, caches)
  int least_shared_iterations = 2;  // timed, at least, with every rank computing
  int least_alone_iterations = 1;   // and on rank 0 alone (quiet: the other ranks sleep)
  double shared_seconds = 0.3;      // timed passes of the shared phase add up to at least this
  double alone_seconds = 0.15;      // and of the alone phase
};

// The passes a probe of a point of `point_iterations` iterations (warm-up included) may make; 0
// where that is fewer than the probe's least.
int probe_pass_budget(const NodeSharingProbeSchedule& schedule, int point_iterations);

// The fewest iterations a point needs to be probed.
int least_probed_point_iterations(const NodeSharingProbeSchedule& schedule);

// Collective over `group` (the point's ranks). Returns this rank's per_rank measurements:
//   node_sharing_shared_seconds  median forward+backward seconds, every rank of the group at once
//   node_sharing_alone_seconds   the same on rank 0 alone (absent on the other ranks)
//   node_sharing_probe_seconds   wall-clock seconds this rank spent in the probe: its cost
// Nothing on a group of one rank: there alone and shared are the same. For a point too short for
// the probe (`point_iterations`, warm-up included; see probe_pass_budget), or a probe turned off,
// the shared and alone measurements are absent with that reason, and nothing runs.
// `after_each_pass`, if given, is called after every pass (a heartbeat for a watchdog: a large
// model's probe is long).
std::vector<results::Measurement> probe_node_sharing(
    model::Network<float>& network, const DeviceDataset& data, kernels::Device& device,
    MPI_Comm group, int point_iterations, const std::function<void()>& after_each_pass = {},
    const NodeSharingProbeSchedule& schedule = {});

}  // namespace dlscale::worker
