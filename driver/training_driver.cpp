// The run driver: sweep points in turn, each on its group of ranks; gather, summary and the
// results file on rank 0. Failures in writing are agreed on, so every rank ends the same way.
#include "driver/training_driver.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "comm/collective_agreement.hpp"
#include "comm/communicator_factory.hpp"
#include "comm/mpi_host_group.hpp"
#include "comm/rank_group.hpp"
#include "coordinator/run_summary.hpp"
#include "coordinator/scaling_study.hpp"
#include "coordinator/summary_printer.hpp"
#include "coordinator/timing_gather.hpp"
#include "core/host_info.hpp"
#include "core/number_format.hpp"
#include "driver/progress_line.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "optimizer/sgd_momentum.hpp"
#include "results/writer.hpp"
#include "worker/device_dataset.hpp"
#include "worker/gemm_rate.hpp"
#include "worker/parameter_fingerprint.hpp"
#include "worker/slurm_allocation.hpp"

namespace dlscale::driver {

namespace {

constexpr double sgd_momentum = 0.9;           // the benchmark's optimizer, fixed
constexpr int distinct_batches_per_rank = 8;   // cycled through; made before training
constexpr std::uint64_t synthetic_data_bytes_per_rank = std::uint64_t(1) << 30;
constexpr int gpu_gemm_order = 8192;           // the yardstick GEMM: 1.1 TFLOP, long enough to time

// One sweep point on the ranks of `group`. Returns the run's record on the group's rank 0
// (world rank 0), nothing elsewhere.
std::optional<results::RunRecord> train_point(const TrainingPlan& plan, const SweepPoint& point,
                                              MPI_Comm group,
                                              const results::RunEnvironment& environment,
                                              ProgressLine& progress) {
  const workloads::Workload& workload = *plan.workload;
  kernels::Device& device = *plan.device;
  comm::MpiHostGroup host_group(group);
  auto communicator = comm::make_gradient_communicator(plan.comm_backend, group, device);
  const int rank = communicator->rank();
  const int batch = point.batch_per_rank;

  spdlog::info("{} ({} parameters) on {} rank(s), batch {}/rank, {} + {} iterations",
               workload.name(), with_thousands_separators(workload.parameter_count()),
               communicator->size(), batch, plan.schedule.warmup_iterations,
               plan.schedule.measured_iterations);
  auto network = workload.build_network(device, batch);
  network->initialize(plan.seed);
  kernels::SgdMomentum<float> optimizer(device, network->parameters().size(),
                                        float(plan.learning_rate), float(sgd_momentum));
  const worker::DeviceDataset data(device, workload, batch, distinct_batches(workload, batch),
                                   plan.seed, rank);
  const worker::GradientExchange exchange = worker::make_gradient_exchange(
      *network, std::size_t(plan.bucket_mb * (1 << 20)), plan.overlap);
  host_group.barrier();  // start the clock together

  coordinator::RankReport report;
  report.measurements =
      worker::train(*network, optimizer, data, *communicator, exchange, device, plan.schedule,
                    [&](int iteration, double step) { progress.iteration_done(iteration, step); });
  progress.end_point();
  report.parameter_fingerprint = worker::parameter_fingerprint(device, network->parameters());
  report.host = host_name();
  report.peak_resident_bytes = peak_resident_bytes();
  report.local_rank = comm::host_placement(group).local_rank;

  results::RunConfiguration configuration{
      workload.name(), workload.family(), workload.description(), workload.parameter_count(),
      workload.training_flops_per_sample(), batch, plan.schedule.warmup_iterations,
      plan.schedule.measured_iterations, plan.threads, communicator->backend_name(),
      device.name(), plan.seed, plan.learning_rate, sgd_momentum, plan.scaling, plan.bucket_mb,
      plan.overlap};
  results::RunEnvironment point_environment = environment;
  point_environment.cpu_model = device.description();
  auto record = coordinator::gather_run(host_group, report, configuration, point_environment);
  if (!record) return record;
  for (const auto& layer : network->layers())
    record->layers.push_back({layer->kind(), layer->parameter_count()});
  for (const auto& bucket : exchange.buckets)
    record->buckets.push_back(
        {bucket.first_layer, bucket.last_layer, double(bucket.count * sizeof(float))});
  record->summary = coordinator::summarize(*record);
  return record;
}

// What every run of this launch shares: provenance, libraries, the device and the job.
results::RunEnvironment launch_environment(const TrainingPlan& plan, const comm::MpiSession& mpi,
                                           const results::FileOrigin& origin) {
  results::RunEnvironment environment;
  environment.dlscale_version = origin.dlscale_version;
  environment.git_commit = origin.git_commit;
  environment.command_line = origin.command_line;
  environment.start_time_utc = origin.start_time_utc;
  environment.mpi_library_version = comm::mpi_library_version();
  environment.blas = kernels::cpu_blas_description();
  environment.device_properties = plan.device->properties();
  // GPUs are held against their own GEMM rate, measured here; the CPU's is measured by
  // dlscale-bench-step, since a long GEMM before every CPU run would cost more than the run.
  if (mpi.world_rank() == 0 && !plan.device->memory_is_host())
    environment.device_gemm_gflops = worker::measure_gemm_gflops(*plan.device, gpu_gemm_order);
  environment.launch_world_size = mpi.world_size();
  if (const auto slurm = worker::slurm_allocation()) environment.slurm = *slurm;
  return environment;
}

}  // namespace

int distinct_batches(const workloads::Workload& workload, int batch) {
  const std::uint64_t batch_bytes =
      std::uint64_t(batch) * (workload.input_size() * sizeof(float) + sizeof(std::int32_t));
  return int(std::clamp<std::uint64_t>(synthetic_data_bytes_per_rank / batch_bytes, 1,
                                       distinct_batches_per_rank));
}

int run_training_plan(const TrainingPlan& plan, const comm::MpiSession& mpi,
                      const results::FileOrigin& origin) {
  const bool coordinator_rank = mpi.world_rank() == 0;
  results::ResultsFile results;
  results.origin = origin;
  const results::RunEnvironment environment = launch_environment(plan, mpi, origin);

  ProgressLine progress(coordinator_rank);
  const auto points = int(plan.points.size());
  for (int index = 0; index < points; ++index) {
    const SweepPoint& point = plan.points[index];
    const comm::RankGroup group(mpi.world(), point.ranks);
    if (group.contains_this_rank()) {
      progress.begin_point(index + 1, points, point.ranks, plan.schedule.total_iterations());
      auto record = train_point(plan, point, group.comm(), environment, progress);
      if (record) {
        std::fputs(coordinator::format_summary(*record).c_str(), stdout);
        std::fputs("\n", stdout);
        std::fflush(stdout);
        results.runs.push_back(std::move(*record));
      }
    }
    comm::quiet_barrier(mpi.world());  // ranks outside this point wait here, asleep
  }

  // Writing is agreed on, so a refusal on rank 0 (say, the file appeared meanwhile) fails
  // every rank, not only rank 0.
  comm::agree_on_success(mpi.world(), [&] {
    if (!coordinator_rank) return;
    results.study = coordinator::analyze_study(results.runs);
    if (points > 1) std::fputs(coordinator::format_study(*results.study).c_str(), stdout);
    results::write_results(results, plan.output_path, plan.overwrite);
    fmt::print("results         {}\n", plan.output_path.string());
    std::fflush(stdout);
  });
  const bool diverged = std::any_of(results.runs.begin(), results.runs.end(), [](const auto& r) {
    return !r.summary.parameters_identical;
  });
  if (diverged) {
    spdlog::error("parameters differ between ranks after training: data-parallel replicas diverged");
    return 1;
  }
  return 0;
}

}  // namespace dlscale::driver
