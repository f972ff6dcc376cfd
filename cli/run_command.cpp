// Wires one training run together: options -> workload, device, communicator -> training loop
// on every rank -> gather, summary and results file on rank 0. Errors end every rank.
#include "cli/run_command.hpp"

#include <chrono>
#include <algorithm>
#include <cstdio>
#include <optional>
#include <filesystem>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/command_setup.hpp"
#include "cli/progress_line.hpp"
#include "cli/run_options.hpp"
#include "comm/collective_agreement.hpp"
#include "comm/communicator_factory.hpp"
#include "comm/mpi_session.hpp"
#include "comm/rank_group.hpp"
#include "coordinator/run_summary.hpp"
#include "coordinator/scaling_study.hpp"
#include "coordinator/summary_printer.hpp"
#include "coordinator/timing_gather.hpp"
#include "core/build_info.hpp"
#include "core/errors.hpp"
#include "core/number_format.hpp"
#include "comm/mpi_host_group.hpp"
#include "core/host_info.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "kernels/device_factory.hpp"
#include "results/output_file.hpp"
#include "results/writer.hpp"
#include "worker/gemm_rate.hpp"
#include "worker/memory_plan.hpp"
#include "worker/parameter_fingerprint.hpp"
#include "worker/slurm_allocation.hpp"
#include "worker/training_loop.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::cli {

namespace {

constexpr double sgd_momentum = 0.9;           // the benchmark's optimizer, fixed
constexpr int distinct_batches_per_rank = 8;   // cycled through; made before training
// ... but no more of them than fit in this many bytes: fcn-s at batch 4096 is 438 MB a batch,
// and making 8 of them on the host would take longer than the run.
constexpr std::uint64_t synthetic_data_bytes_per_rank = std::uint64_t(1) << 30;
constexpr int gpu_gemm_order = 8192;           // the yardstick GEMM: 1.1 TFLOP, long enough to time

void configure_log_level(int rank, const std::string& level) {
  auto logger = spdlog::default_logger();
  logger->set_level(spdlog::level::from_str(level));
  // Only rank 0 narrates; other ranks speak up for warnings and errors.
  if (rank != 0) logger->set_level(std::max(logger->level(), spdlog::level::warn));
  spdlog::set_default_logger(logger);
}

std::string default_output_name(const std::string& model, int ranks,
                                std::chrono::system_clock::time_point start) {
  std::string safe_model;
  for (char c : model) safe_model += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  return fmt::format("dlscale-{}-{}r-{:%Y%m%dT%H%M%S}.h5", safe_model, ranks,
                     fmt::gmtime(std::chrono::system_clock::to_time_t(start)));
}

void print_model_list() {
  fmt::print("{:<18} {:<6} {:>14} {:>16} {:>10}  {}\n", "model", "family", "parameters",
             "GFLOP/sample", "CPU batch", "layers");
  for (const auto& workload : workloads::builtin_workloads())
    fmt::print("{:<18} {:<6} {:>14} {:>16.4f} {:>10}  {}\n", workload->name(),
               workload->family(), with_thousands_separators(workload->parameter_count()),
               workload->training_flops_per_sample() / 1e9, workload->default_batch(),
               workload->description());
  fmt::print("\nGFLOP/sample counts one training step: 3x the forward FLOPs (forward, input and\n"
             "weight gradients), the convention of the reference benchmark study.\n"
             "Any fully connected net: --model fcn:INPUT,HIDDEN,...,CLASSES (sigmoid hidden layers).\n"
             "Any LSTM language model: --model lstm:SEQ,HIDDEN,LAYERS,VOCAB.\n");
}

int distinct_batches(const workloads::Workload& workload, int batch) {
  const std::uint64_t batch_bytes =
      std::uint64_t(batch) * (workload.input_size() * sizeof(float) + sizeof(std::int32_t));
  return int(std::clamp<std::uint64_t>(synthetic_data_bytes_per_rank / batch_bytes, 1,
                                       distinct_batches_per_rank));
}

// Everything a run needs that can be wrong because of user input, checked on every rank
// before any work starts.
struct ValidatedRun {
  RunOptions options;
  std::unique_ptr<workloads::Workload> workload;
  std::vector<int> rank_counts;  // one entry per sweep point
  std::vector<int> batches;      // per rank, at each point
  std::filesystem::path output_path;  // rank 0 only
  std::unique_ptr<kernels::Device> device;  // this rank's, for every point of the sweep
};

kernels::Precision precision_of(const std::string& name) {
  return name == "tf32" ? kernels::Precision::tf32 : kernels::Precision::fp32;
}

ValidatedRun validate(int argc, char** argv, const comm::MpiSession& mpi,
                      const comm::HostPlacement& placement,
                      std::chrono::system_clock::time_point start) {
  ValidatedRun run;
  run.options = parse_run_options(std::vector<std::string>(argv + 1, argv + argc));
  if (run.options.action != RunOptions::Action::train) return run;
  run.workload = workloads::make_workload(run.options.model);
  run.rank_counts = sweep_rank_counts(run.options, mpi.world_size());
  run.batches = batches_per_rank(run.options, run.rank_counts, run.workload->default_batch());
  kernels::check_device_name(run.options.device);
  comm::check_backend(run.options.comm, run.options.device);
  run.device = kernels::make_device(
      run.options.device,
      {run.options.threads, precision_of(run.options.precision), placement.local_rank});
  // Every rank may be busy at the largest point, each with the largest batch of the sweep. Host
  // memory is shared by all of the host's ranks; a GPU by the ranks that drew it.
  const int devices = kernels::devices_per_host(run.options.device);
  const int ranks_on_device = (placement.ranks_on_host + devices - 1) / devices;
  const int largest_batch = *std::max_element(run.batches.begin(), run.batches.end());
  worker::check_memory_fits(*run.workload, largest_batch,
                            distinct_batches(*run.workload, largest_batch), ranks_on_device,
                            run.device->free_memory_bytes(), run.device->description());
  if (run.options.overlap && !mpi.supports_progress_thread())
    throw UserError("this MPI library cannot be called from a progress thread "
                    "(MPI_THREAD_SERIALIZED), which overlapped gradient sums need; "
                    "use --no-overlap");
  if (mpi.world_rank() == 0) {
    run.output_path = run.options.output_path.empty()
                          ? default_output_name(run.workload->name(), mpi.world_size(), start)
                          : run.options.output_path;
    results::check_output_path(run.output_path, run.options.overwrite);
  }
  return run;
}

// One sweep point on the ranks of `group`. Returns the run's record on the group's rank 0
// (world rank 0), nothing elsewhere.
std::optional<results::RunRecord> train_point(const ValidatedRun& run, int batch, MPI_Comm group,
                                              const results::RunEnvironment& environment,
                                              ProgressLine& progress) {
  const RunOptions& options = run.options;
  const workloads::Workload& workload = *run.workload;
  kernels::Device* device = run.device.get();
  comm::MpiHostGroup host_group(group);
  auto communicator = comm::make_gradient_communicator(options.comm, group, *device);
  const int rank = communicator->rank();

  spdlog::info("{} ({} parameters) on {} rank(s), batch {}/rank, {} + {} iterations",
               workload.name(), with_thousands_separators(workload.parameter_count()),
               communicator->size(), batch, options.warmup_iterations,
               options.measured_iterations);
  auto network = workload.build_network(*device, batch);
  network->initialize(options.seed);
  kernels::SgdMomentum<float> optimizer(*device, network->parameters().size(),
                                        float(options.learning_rate), float(sgd_momentum));
  const worker::DeviceDataset data(*device, workload, batch, distinct_batches(workload, batch),
                                   options.seed, rank);
  const worker::GradientExchange exchange = worker::make_gradient_exchange(
      *network, std::size_t(options.bucket_mb * (1 << 20)), options.overlap);
  host_group.barrier();  // start the clock together

  const worker::TrainingSchedule schedule{options.warmup_iterations, options.measured_iterations};
  coordinator::RankReport report;
  report.measurements =
      worker::train(*network, optimizer, data, *communicator, exchange, *device, schedule,
                    [&](int iteration, double step) { progress.iteration_done(iteration, step); });
  progress.end_point();
  report.parameter_fingerprint = worker::parameter_fingerprint(*device, network->parameters());
  report.host = host_name();
  report.peak_resident_bytes = peak_resident_bytes();
  report.local_rank = comm::host_placement(group).local_rank;

  results::RunConfiguration configuration{
      workload.name(), workload.family(), workload.description(), workload.parameter_count(),
      workload.training_flops_per_sample(), batch, options.warmup_iterations,
      options.measured_iterations, options.threads, communicator->backend_name(), device->name(),
      options.seed, options.learning_rate, sgd_momentum, recorded_scaling(options),
      options.bucket_mb, options.overlap};
  results::RunEnvironment point_environment = environment;
  point_environment.cpu_model = device->description();
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

int train_and_report(const ValidatedRun& run, const comm::MpiSession& mpi, int argc, char** argv,
                     std::chrono::system_clock::time_point start) {
  const bool coordinator_rank = mpi.world_rank() == 0;
  results::ResultsFile results;
  results.origin = file_origin("", argc, argv, start);
  results::RunEnvironment environment;
  environment.dlscale_version = results.origin.dlscale_version;
  environment.git_commit = results.origin.git_commit;
  environment.command_line = results.origin.command_line;
  environment.start_time_utc = results.origin.start_time_utc;
  environment.mpi_library_version = comm::mpi_library_version();
  environment.blas = kernels::cpu_blas_description();
  environment.device_properties = run.device->properties();
  // GPUs are held against their own GEMM rate, measured here; the CPU's is measured by
  // dlscale-bench-step, since a long GEMM before every CPU run would cost more than the run.
  if (coordinator_rank && !run.device->memory_is_host())
    environment.device_gemm_gflops = worker::measure_gemm_gflops(*run.device, gpu_gemm_order);
  environment.launch_world_size = mpi.world_size();
  if (const auto slurm = worker::slurm_allocation()) environment.slurm = *slurm;

  ProgressLine progress(coordinator_rank);
  const auto points = int(run.rank_counts.size());
  for (int point = 0; point < points; ++point) {
    const int ranks = run.rank_counts[point];
    const comm::RankGroup group(mpi.world(), ranks);
    if (group.contains_this_rank()) {
      progress.begin_point(point + 1, points, ranks,
                           run.options.warmup_iterations + run.options.measured_iterations);
      auto record = train_point(run, run.batches[point], group.comm(), environment, progress);
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
    results::write_results(results, run.output_path, run.options.overwrite);
    fmt::print("results         {}\n", run.output_path.string());
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

}  // namespace

int run_command(int argc, char** argv) {
  const auto start = std::chrono::system_clock::now();
  comm::MpiSession mpi(argc, argv);
  const int rank = mpi.world_rank();
  start_command_logging(rank);
  return exit_status_of(mpi, [&] {
    // Collective, so it runs before the agreed validation, which must not contain collectives.
    const comm::HostPlacement placement = comm::host_placement(mpi.world());
    ValidatedRun run;
    comm::agree_on_success(mpi.world(),
                           [&] { run = validate(argc, argv, mpi, placement, start); });
    configure_log_level(rank, run.options.log_level);
    switch (run.options.action) {
      case RunOptions::Action::show_help:
        if (rank == 0) fmt::print("{}", run_help_text());
        return 0;
      case RunOptions::Action::show_version:
        if (rank == 0) fmt::print("dlscale {} (git {})\n", build_info::version, build_info::git_commit);
        return 0;
      case RunOptions::Action::list_models:
        if (rank == 0) print_model_list();
        return 0;
      case RunOptions::Action::train:
        return train_and_report(run, mpi, argc, argv, start);
    }
    return 1;
  });
}

}  // namespace dlscale::cli
