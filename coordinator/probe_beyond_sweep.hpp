// Node-sharing probes beyond the sweep: on the rank counts past its largest point that the launch
// holds, how much slower one compute pass gets with that many ranks side by side, nothing trained
// (worker/node_sharing_probe.hpp measures it; `dlscale predict` carries compute past the sweep with
// it).
#pragma once

#include <mpi.h>

#include <optional>
#include <vector>

#include "coordinator/progress_line.hpp"
#include "coordinator/stall_watchdog.hpp"
#include "coordinator/training_plan.hpp"
#include "results/study_record.hpp"

namespace dlscale::coordinator {

// The rank counts beyond the sweep's largest point that the launch holds, for node-sharing
// probes without training: each doubling of that point, and the whole launch (full node
// occupancy, where compute per rank is slowest). Cheap beside training there, and it lets
// `dlscale predict` carry compute past the sweep from measurements (docs/scaling-model.md).
std::vector<int> probe_only_rank_counts(const std::vector<SweepPoint>& points, int world_size);

// The point that `dlscale predict` measures efficiency against: the fewest ranks, then threads,
// at the first precision of the sweep.
const SweepPoint& baseline_point(const std::vector<SweepPoint>& points);

// A node-sharing probe on the ranks of `group` (the first `ranks` of the launch), with the
// network of the sweep's baseline point as it would be at this rank count, and nothing trained.
// Returns the probe on the group's rank 0, nothing elsewhere. Throws PointFailure, on every rank
// of the group, where the network does not fit.
std::optional<results::NodeSharingProbe> probe_without_training(const TrainingPlan& plan,
                                                                kernels::Device& device,
                                                                MPI_Comm group,
                                                                ProgressLine& progress,
                                                                StallWatchdog& watchdog);

}  // namespace dlscale::coordinator
