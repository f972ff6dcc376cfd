// What a training launch will do, checked and resolved from the user's options before any work
// starts: the workload, each sweep point, and the settings shared by all of them. The run driver
// takes nothing else, so nothing past the command line sees an option string.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator_factory.hpp"
#include "kernels/device.hpp"
#include "kernels/device_factory.hpp"
#include "results/run_record.hpp"
#include "worker/node_sharing_probe.hpp"
#include "worker/training_loop.hpp"
#include "workloads/workload.hpp"

namespace dlscale::driver {

// One point of the sweep: the first `ranks` ranks of the launch train at this batch per rank
// with this many threads each, computing in this precision; `repeat` counts the runs of the same
// point, each with its seed.
struct SweepPoint {
  int ranks = 1;
  int batch_per_rank = 1;
  kernels::Precision precision = kernels::Precision::fp32;
  int threads = 1;
  int repeat = 0;
  std::uint64_t seed = 42;
};

struct TrainingPlan {
  std::unique_ptr<workloads::Workload> workload;
  std::vector<SweepPoint> points;  // in the order they run
  worker::TrainingSchedule schedule;
  kernels::DeviceKind device_kind = kernels::DeviceKind::cpu;
  kernels::DeviceSettings device_settings;  // its threads and precision are each point's
  std::unique_ptr<kernels::Device> device;  // made and checked with the first point's settings
  comm::Backend comm_backend = comm::Backend::mpi;             // checked against the device
  comm::GradientDtype grad_dtype = comm::GradientDtype::fp32;  // checked against the backend
  double bucket_mb = 25;
  bool overlap = true;
  double learning_rate = 0.01;  // at learning_rate_batch
  // How each point's rate follows its global batch: none, linear or sqrt (Goyal et al. 2017);
  // the schedule's warm-up ramps from learning_rate to the point's rate.
  std::string learning_rate_scaling = "none";
  int learning_rate_batch = 0;   // the global batch learning_rate is for; 0: the sweep's smallest
  int evaluation_samples = 512;  // the held-out set, over the ranks; schedule.evaluate_every
  // Training to a target: "accuracy" or "loss" (empty: the schedule's iterations), and the
  // samples over all ranks that a point may train on before it fails.
  std::string target_metric;
  double target_value = 0;
  long long max_samples = 0;
  results::Scaling scaling = results::Scaling::none;
  double sample_interval_seconds = 0.2;  // 0: resources are not sampled
  double point_timeout_seconds = 0;      // 0: no limit
  double stall_timeout_seconds = -1;     // see StallSettings: -1 automatic, 0 off
  // The node-sharing probe before each point of two or more ranks and beyond the sweep (--probe).
  worker::NodeSharingProbeSchedule probe_schedule;
  // A sweep keeps a point that does not fit as a failed point; a single run was refused instead.
  bool check_memory_per_point = false;
  std::filesystem::path output_path;  // rank 0 only, checked writable
  bool overwrite = false;
  // --quiet: one line per point (printers::format_point_line) instead of its whole summary.
  bool quiet = false;
};

// How many distinct synthetic batches each rank cycles through: a few for timing, one per
// iteration when training to a target (fresh samples, as an epoch of real data), but no more
// than fit in the per-rank data budget (a fcn-s batch of 4096 is 438 MB).
int distinct_batches(const workloads::Workload& workload, int batch, bool to_target = false,
                     int iterations = 0);

// The point's schedule: the plan's, with, when training to a target, as many iterations as
// --max-samples allows.
worker::TrainingSchedule point_schedule(const TrainingPlan& plan, const SweepPoint& point);

// The point's learning rate: the plan's, scaled to its global batch by --lr-scaling.
double point_learning_rate(const TrainingPlan& plan, const SweepPoint& point);

}  // namespace dlscale::driver
