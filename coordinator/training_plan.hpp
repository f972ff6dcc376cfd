// What a training launch will do, checked and resolved from the user's options before any work
// starts: the workload, each sweep point, and the settings shared by all of them. The sweep
// takes nothing else, so nothing past the command line sees an option string.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator_factory.hpp"
#include "kernels/device.hpp"
#include "kernels/device_factory.hpp"
#include "results/run_record.hpp"
#include "worker/node_sharing_probe.hpp"
#include "worker/training_loop.hpp"
#include "workloads/workload.hpp"

namespace dlscale::coordinator {

// One point of the sweep: the first `ranks` ranks of the launch train at this batch per rank
// with this many threads each, computing in this precision; `repeat` counts the runs of the same
// point, each with its seed.
struct SweepPoint {
  int ranks = 1;
  int batch_per_rank = 1;
  kernels::Precision precision = kernels::Precision::fp32;
  results::Sharding sharding = results::Sharding::none;  // --sharding
  int threads = 1;
  int repeat = 0;
  std::uint64_t seed = 42;
};

// Training to a target: each point trains until a held-out evaluation meets `goal`, and fails
// where its ranks have trained on `max_samples` samples between them first.
struct TrainingTarget {
  results::Target goal;
  long long max_samples = 0;
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
  double shard_unit_mb = 25;  // --sharding full: the units gathered and reduce-scattered
  results::ShardingGroup sharding_group = results::ShardingGroup::all;  // --sharding-group
  bool overlap = true;
  results::OptimizerKind optimizer = results::OptimizerKind::sgd;
  double learning_rate = 0.01;  // at learning_rate_batch
  // How each point's rate follows its global batch; the schedule's warm-up ramps from
  // learning_rate to the point's rate.
  results::LearningRateScaling learning_rate_scaling = results::LearningRateScaling::none;
  int learning_rate_batch = 0;   // the global batch learning_rate is for; 0: the sweep's smallest
  int evaluation_samples = 512;  // the held-out set, over the ranks; schedule.evaluate_every
  std::optional<TrainingTarget> target;  // none: each point trains for the schedule's iterations
  results::Scaling scaling = results::Scaling::none;
  double sample_interval_seconds = 0.2;  // 0: resources are not sampled
  double point_timeout_seconds = 0;      // 0: no limit
  double stall_timeout_seconds = -1;     // see StallSettings: -1 automatic, 0 off
  // The node-sharing probe before each point of two or more ranks and beyond the sweep (--probe).
  worker::NodeSharingProbeSchedule probe_schedule;
  // The GEMM yardstick before and after each point (--no-yardstick: neither; the run records no
  // GEMM rate, so no MFU).
  bool gemm_yardstick = true;
  // A sweep keeps a point that does not fit as a failed point; a single run was refused instead.
  bool check_memory_per_point = false;
  std::filesystem::path output_path;  // rank 0 only, checked writable
  bool overwrite = false;
  // --quiet: one line per point (printers::format_point_line) instead of its whole summary.
  bool quiet = false;
};

// What each point of a plan works out to; training_plan.cpp holds the rules.

// How many distinct synthetic batches each rank cycles through: a few for timing, one per
// iteration when training to a target (fresh samples, as an epoch of real data), but no more
// than fit in the per-rank data budget (a fcn-s batch of 4096 is 438 MB).
int distinct_batches(const workloads::Workload& workload, int batch, bool to_target = false,
                     int iterations = 0);
// The distinct batches of `point` under `plan`.
int point_distinct_batches(const TrainingPlan& plan, const SweepPoint& point);

// The point's schedule: the plan's, with, when training to a target, as many iterations as
// --max-samples allows (at least one; the warm-up's count among them).
worker::TrainingSchedule point_schedule(const TrainingPlan& plan, const SweepPoint& point);

// The factor --lr-scaling applies to the rate of `reference_batch` at `global_batch`.
double learning_rate_factor(results::LearningRateScaling rule, long long global_batch,
                            long long reference_batch);

// The point's learning rate: the plan's, scaled to its global batch by --lr-scaling from
// --lr-batch, or from the sweep's smallest global batch where that is not given.
double point_learning_rate(const TrainingPlan& plan, const SweepPoint& point);

// How many ranks share one device, at `ranks_on_host` ranks on a host of `devices_per_host`
// devices, the ranks dealt to them in turn: all of them on a CPU, 1 with a GPU each.
int ranks_per_device(int ranks_on_host, int devices_per_host);

}  // namespace dlscale::coordinator
