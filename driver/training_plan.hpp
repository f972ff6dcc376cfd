// What a training launch will do, checked and resolved from the user's options before any work
// starts: the workload, each sweep point, and the settings shared by all of them. The run driver
// takes nothing else, so nothing past the command line sees an option string.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kernels/device.hpp"
#include "worker/training_loop.hpp"
#include "workloads/workload.hpp"

namespace dlscale::driver {

// One point of the sweep: the first `ranks` ranks of the launch train at this batch per rank.
struct SweepPoint {
  int ranks = 1;
  int batch_per_rank = 1;
};

struct TrainingPlan {
  std::unique_ptr<workloads::Workload> workload;
  std::vector<SweepPoint> points;  // in the order they run
  worker::TrainingSchedule schedule;
  std::unique_ptr<kernels::Device> device;  // this rank's, for every point
  std::string comm_backend;                 // a registered gradient communicator
  double bucket_mb = 25;
  bool overlap = true;
  std::uint64_t seed = 42;
  double learning_rate = 0.01;
  int threads = 1;
  std::string scaling = "none";        // recorded with the runs: weak, strong or none
  std::filesystem::path output_path;   // rank 0 only, checked writable
  bool overwrite = false;
};

// How many distinct synthetic batches each rank cycles through: a few, but no more than fit in
// the per-rank data budget (a fcn-s batch of 4096 is 438 MB).
int distinct_batches(const workloads::Workload& workload, int batch);

}  // namespace dlscale::driver
