// `dlscale run`: options -> a checked training plan on every rank -> the coordinator's sweep.
// Errors in the options end every rank with one line.
#include "cli/run_command.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/command_setup.hpp"
#include "cli/run_options.hpp"
#include "comm/collective_agreement.hpp"
#include "comm/communicator_factory.hpp"
#include "comm/mpi_session.hpp"
#include "coordinator/point.hpp"
#include "coordinator/sweep.hpp"
#include "core/build_info.hpp"
#include "core/errors.hpp"
#include "core/host_info.hpp"
#include "core/number_format.hpp"
#include "core/run_clock.hpp"
#include "kernels/device_factory.hpp"
#include "results/output_file.hpp"
#include "worker/memory_plan.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::cli {

namespace {

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
  for (char c : model)
    safe_model += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  return fmt::format("dlscale-{}-{}r-{:%Y%m%dT%H%M%S}.h5", safe_model, ranks,
                     fmt::gmtime(std::chrono::system_clock::to_time_t(start)));
}

void print_model_list() {
  fmt::print("{:<18} {:<6} {:>14} {:>16} {:>12} {:>10}  {}\n", "model", "family", "parameters",
             "GFLOP/sample", "GFLOP/token", "CPU batch", "layers");
  for (const auto& workload : workloads::builtin_workloads()) {
    const int tokens = workload->tokens_per_sample();
    const double flops = workload->training_flops_per_sample();
    fmt::print("{:<18} {:<6} {:>14} {:>16.4f} {:>12} {:>10}  {}\n", workload->name(),
               workload->family(), with_thousands_separators(workload->parameter_count()),
               flops / 1e9, tokens > 0 ? fmt::format("{:.4f}", flops / tokens / 1e9) : "-",
               workload->default_batch(), workload->description());
  }
  fmt::print(
      "\nGFLOP/sample counts one training step: 3x the forward FLOPs (forward, input and\n"
      "weight gradients), the convention of the reference benchmark study; for GPT models,\n"
      "6 N + 12 L W S per token (PaLM's count; docs/workloads.md). A language model's sample is\n"
      "one sequence; GFLOP/token divides by its tokens.\n"
      "Any fully connected net: --model fcn:INPUT,HIDDEN,...,CLASSES (sigmoid hidden layers).\n"
      "Any LSTM language model: --model lstm:SEQ,HIDDEN,LAYERS,VOCAB.\n"
      "Any GPT-style transformer: --model gpt:LAYERS,WIDTH,HEADS,SEQUENCE,VOCABULARY.\n");
}

// Resolves the options into a plan, checking on every rank, before any work starts, everything
// that can be wrong because of user input.
coordinator::TrainingPlan plan_training(const RunOptions& options, const comm::MpiSession& mpi,
                                        const comm::HostPlacement& placement,
                                        std::chrono::system_clock::time_point start) {
  coordinator::TrainingPlan plan;
  plan.workload = workloads::make_workload(options.model);
  const std::vector<int> rank_counts = sweep_rank_counts(options, mpi.world_size());
  const std::vector<int> batches =
      batches_per_rank(options, rank_counts, plan.workload->default_batch());
  // Precisions outermost, then strategies and thread counts, as the reference study's CPU tables
  // are laid out; each repeat has its own seed.
  for (const kernels::Precision precision : options.precisions)
    for (const results::Sharding sharding : options.shardings)
      for (int threads : options.threads)
        for (std::size_t k = 0; k < rank_counts.size(); ++k)
          for (int repeat = 0; repeat < options.repeats; ++repeat)
            plan.points.push_back({rank_counts[k], batches[k], precision, sharding, threads, repeat,
                                   options.seed + std::uint64_t(repeat)});
  plan.schedule.warmup_iterations = options.warmup_iterations;
  plan.schedule.measured_iterations = options.measured_iterations;
  plan.schedule.learning_rate_start = options.learning_rate;
  plan.schedule.learning_rate_warmup = options.learning_rate_warmup_steps;
  plan.schedule.evaluate_every = options.evaluate_every;
  plan.learning_rate_scaling = options.learning_rate_scaling;
  plan.learning_rate_batch = options.learning_rate_batch;
  plan.evaluation_samples = options.evaluation_samples;
  if (options.target)
    plan.target = coordinator::TrainingTarget{*options.target, options.max_samples};
  if (plan.target && plan.target->goal.metric == results::TargetMetric::accuracy) {
    const double best = plan.workload->best_accuracy(options.seed);
    if (plan.target->goal.value > best)
      throw UserError(fmt::format(
          "--target-accuracy {} cannot be reached on {}: no model does better than {:.4g} on "
          "its synthetic task (docs/workloads.md)",
          plan.target->goal.value, plan.workload->name(), best));
  }
  if (plan.target && plan.target->goal.metric == results::TargetMetric::loss) {
    const double best = plan.workload->best_loss(options.seed);
    if (plan.target->goal.value < best)
      throw UserError(fmt::format(
          "--target-loss {} cannot be reached on {}: no model's loss goes below {:.4f} nats, "
          "the entropy of its synthetic task (docs/workloads.md)",
          plan.target->goal.value, plan.workload->name(), best));
  }
  if (plan.workload->layers_share_parameters() &&
      std::find(options.shardings.begin(), options.shardings.end(), results::Sharding::full) !=
          options.shardings.end())
    throw UserError(fmt::format(
        "--sharding full cannot train {}: its output head uses the token embedding's table, "
        "which full sharding gathers only around the first layer; use --sharding none, "
        "optimizer or gradients",
        plan.workload->name()));
  // A point is checked against its target only at an evaluation: a budget that ends before the
  // first one would train in vain and only then fail, so it is refused here. The largest global
  // batch has the fewest iterations.
  if (plan.target)
    for (const auto& point : plan.points) {
      const int iterations = coordinator::point_schedule(plan, point).total_iterations();
      if (iterations < options.evaluate_every)
        throw UserError(fmt::format(
            "--max-samples {} allows {} iteration(s) at a global batch of {} ({} rank(s)), "
            "fewer than --eval-every {}: the target would never be checked; raise "
            "--max-samples or lower --eval-every",
            plan.target->max_samples, iterations, (long long)point.ranks * point.batch_per_rank,
            point.ranks, options.evaluate_every));
    }
  const kernels::DeviceRecord& device = kernels::find_device(options.device);
  const comm::BackendRecord& backend = comm::find_backend(options.comm);
  const comm::GradientDtype grad_dtype = *comm::gradient_dtype_names.named(options.grad_dtype);
  comm::check_backend(backend, device, grad_dtype);
  const int logical_cpus = logical_cpu_count();
  if (options.threads.back() > logical_cpus && !options.oversubscribe)
    throw UserError(
        fmt::format("--threads {}: more than the {} logical CPUs of {}; threads "
                    "beyond the cores only slow every rank down (add "
                    "--oversubscribe to measure it anyway)",
                    options.threads.back(), logical_cpus, host_name()));
  // A launcher that binds each rank to fewer CPUs than its threads (mpirun binds to one core by
  // default for one or two ranks; srun from Slurm 22.05 on does not take --cpus-per-task from
  // the job) runs them on shared cores, and every number, the GEMM yardstick's too, looks as if
  // the device were that slow.
  const int allowed_cpus = allowed_cpu_count();
  if (allowed_cpus > 0 && options.threads.back() > allowed_cpus && !options.oversubscribe)
    throw UserError(fmt::format(
        "--threads {} but rank {} on {} may run on only {} CPU(s) (its affinity): the launcher "
        "bound it, so its threads would share cores; give each rank {} CPUs (mpirun --map-by "
        "slot:PE={} or --bind-to none; srun --cpus-per-task={}) or lower --threads",
        options.threads.back(), mpi.world_rank(), host_name(), allowed_cpus, options.threads.back(),
        options.threads.back(), options.threads.back()));
  plan.device_kind = device.kind;
  plan.device_settings = {options.threads.front(), options.precisions.front(),
                          placement.local_rank};
  const RunClock device_clock;
  plan.device = device.make(plan.device_settings);
  // A GPU's context, cuBLAS and cuDNN take seconds to start: part of a short run's wall time.
  spdlog::debug("{} device made in {:.2f} s", device.name, device_clock.seconds());
  // A single run that cannot fit is the user's mistake; a sweep keeps such a point as a result.
  plan.check_memory_per_point = plan.points.size() > 1;
  if (!plan.check_memory_per_point) {
    worker::check_memory_fits(
        *plan.workload, batches.front(),
        coordinator::point_distinct_batches(plan, plan.points.front()), options.precisions.front(),
        coordinator::ranks_per_device(placement.ranks_on_host, device.devices_per_host()),
        plan.device->free_memory_bytes(), plan.device->description(),
        {options.optimizer, plan.points.front().sharding, plan.points.front().ranks});
  }
  if (options.overlap && !mpi.supports_progress_thread())
    throw UserError(
        "this MPI library cannot be called from a progress thread "
        "(MPI_THREAD_SERIALIZED), which overlapped gradient sums need; "
        "use --no-overlap");
  plan.comm_backend = backend.backend;
  plan.grad_dtype = grad_dtype;
  plan.bucket_mb = options.bucket_mb;
  plan.shard_unit_mb = options.shard_unit_mb;
  plan.sharding_group = options.sharding_group;
  plan.overlap = options.overlap;
  plan.learning_rate = options.learning_rate;
  plan.optimizer = options.optimizer;
  plan.scaling = recorded_scaling(options);
  plan.sample_interval_seconds = options.sample_interval_seconds;
  plan.point_timeout_seconds = options.point_timeout_seconds;
  plan.stall_timeout_seconds = options.stall_timeout_seconds;
  plan.probe_schedule.enabled = options.probe_node_sharing;
  plan.gemm_yardstick = options.gemm_yardstick;
  plan.overwrite = options.overwrite;
  plan.quiet = options.quiet;
  if (plan.check_memory_per_point) {
    const std::string shortfall =
        coordinator::shortfall_of_every_point(plan, *plan.device, mpi.world_rank());
    if (!shortfall.empty())
      throw UserError(fmt::format(
          "no point of the sweep fits on {} of {}: even the smallest is {}; lower --batch, "
          "choose a smaller model (a GPT spec's sequence is the largest term), or shard it",
          plan.device->description(), host_name(), shortfall));
  }
  if (mpi.world_rank() == 0) {
    plan.output_path = options.output_path.empty()
                           ? default_output_name(plan.workload->name(), mpi.world_size(), start)
                           : options.output_path;
    results::check_output_path(plan.output_path, options.overwrite);
    // Even with --overwrite: the results would replace the config file that asked for them.
    if (!options.config_path.empty())
      results::check_output_is_not_an_input(plan.output_path, {options.config_path}, "--out");
  }
  return plan;
}

// Oversubscribed BLAS threads ran several times slower in the reference study: say so, with the
// numbers, once per host.
void warn_if_cores_oversubscribed(const RunOptions& options, const coordinator::TrainingPlan& plan,
                                  const comm::HostPlacement& placement) {
  // A device whose memory is the host's computes on the host's cores (the CPU device).
  if (!kernels::device_record(plan.device_kind).memory_is_host || placement.local_rank != 0) return;
  const int threads = options.threads.back();
  const int cores = physical_core_count();
  if (placement.ranks_on_host * threads <= cores) return;
  spdlog::warn(
      "{}: {} rank(s) x {} thread(s) = {} compute threads on {} physical cores; "
      "oversubscribed threads can run several times slower",
      host_name(), placement.ranks_on_host, threads, placement.ranks_on_host * threads, cores);
}

}  // namespace

// Below this address-space limit (`ulimit -v`) Open MPI's initialisation, the BLAS threads or
// oneDNN's first primitive ran out of it on this project's machines (600 MB: a SIGSEGV in
// MPI_Init or in dnnl_primitive_create), before anything could be kept or said in one line.
constexpr std::uint64_t least_address_space_bytes = std::uint64_t(1) << 30;

int run_command(int argc, char** argv) {
  const auto start = std::chrono::system_clock::now();
  // Before MPI starts, on every rank: no rank can say it for the others yet.
  if (const std::uint64_t limit = address_space_limit_bytes();
      limit != 0 && limit < least_address_space_bytes) {
    fmt::print(stderr,
               "dlscale: error: the address-space limit (ulimit -v {} KiB) is below the {} MiB "
               "that MPI, the BLAS threads and oneDNN need to start; raise it\n",
               limit >> 10, least_address_space_bytes >> 20);
    return 2;
  }
  comm::MpiSession mpi(argc, argv);
  const int rank = mpi.world_rank();
  start_command_logging(rank);
  return exit_status_of(mpi, [&] {
    // Collective, so it runs before the agreed validation, which must not contain collectives.
    const comm::HostPlacement placement = comm::host_placement(mpi.world());
    RunOptions options;
    coordinator::TrainingPlan plan;
    comm::agree_on_success(mpi.world(), [&] {
      options = parse_run_options(std::vector<std::string>(argv + 1, argv + argc));
      configure_log_level(rank, options.log_level);  // before the plan: it makes the device
      if (options.action == RunOptions::Action::train)
        plan = plan_training(options, mpi, placement, start);
    });
    if (options.action == RunOptions::Action::train)
      warn_if_cores_oversubscribed(options, plan, placement);
    switch (options.action) {
      case RunOptions::Action::show_help:
        if (rank == 0) fmt::print("{}", run_help_text());
        return 0;
      case RunOptions::Action::show_version:
        if (rank == 0)
          fmt::print("dlscale {} (git {})\n", build_info::version, build_info::git_commit);
        return 0;
      case RunOptions::Action::list_models:
        if (rank == 0) print_model_list();
        return 0;
      case RunOptions::Action::train:
        return coordinator::run_training_plan(std::move(plan), mpi,
                                              file_origin("", argc, argv, start));
    }
    return 1;
  });
}

}  // namespace dlscale::cli
