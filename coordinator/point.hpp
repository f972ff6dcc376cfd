// One sweep point on its group of ranks: set up (the memory check, the communicator, the network,
// its data and the instruments), measured (the loop, with the ranks agreeing after every iteration
// whether to go on) and recorded (the yardstick again, the gather to rank 0, the summary). The
// helpers a point and a node-sharing probe share live here too.
#pragma once

#include <mpi.h>

#include <functional>
#include <optional>

#include "comm/mpi_session.hpp"
#include "coordinator/progress_line.hpp"
#include "coordinator/stall_watchdog.hpp"
#include "coordinator/stop_signals.hpp"
#include "coordinator/training_plan.hpp"
#include "results/run_record.hpp"

namespace dlscale::coordinator {

// Runs a point's set-up on every rank of the group; running out of memory on any rank fails the
// point on all of them.
void set_up_or_fail_point(MPI_Comm group, const std::function<void()>& set_up);

// Throws PointFailure, on every rank of the group, where any rank's estimate of the network, its
// data and its buffers exceeds its device's free memory (shared by the ranks on one device).
// The point's precision, strategy and rank count, with the plan's optimizer, decide its update's
// share (worker::update_bytes).
void fail_unless_it_fits(MPI_Comm group, const workloads::Workload& workload, int batch,
                         int batches, const SweepPoint& point, kernels::Device& device,
                         const TrainingPlan& plan, const comm::HostPlacement& placement);

// Where no point of the plan could fit this rank's device, the shortfall of the point that needs
// least; else empty. Each point is held to one rank alone on the device, the least it could
// need, so a sweep that could measure anything is never refused. A sweep that could measure
// nothing is the user's mistake, as a single run that cannot fit is.
std::string shortfall_of_every_point(const TrainingPlan& plan, kernels::Device& device,
                                     int world_rank);

// Says, before a node-sharing probe of `ranks` ranks runs, that it runs and what bounds it.
void announce_probe(const TrainingPlan& plan, int ranks, ProgressLine& progress);

// What a point's record says it was: the plan's settings and the point's own, with
// `measured_iterations` measured. A failed point's file keeps the launch's part of it.
results::RunConfiguration point_configuration(const TrainingPlan& plan, const SweepPoint& point,
                                              int measured_iterations);

// One sweep point on the ranks of `group`: set up, measured, recorded. Returns the run's record
// on the group's rank 0 (world rank 0), nothing elsewhere; a stop signal ends it early, as a
// partial run, or with nothing when no measured iteration had finished. Throws PointFailure, on
// every rank of the group, for a point that cannot be measured.
std::optional<results::RunRecord> train_point(const TrainingPlan& plan, const SweepPoint& point,
                                              kernels::Device& device, MPI_Comm group,
                                              const results::RunEnvironment& environment,
                                              ProgressLine& progress, StallWatchdog& watchdog,
                                              StopSignalRelay& relay);

}  // namespace dlscale::coordinator
