// The run driver: sweep points in turn, each on its group of ranks, then node-sharing probes on
// the rank counts beyond them; gather, summary and the results file on rank 0. Every decision that
// ends a point or the run is agreed on by the ranks concerned, so no rank waits in a collective
// that another has left.
#include "driver/training_driver.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "analysis/run_summary.hpp"
#include "analysis/scaling_study.hpp"
#include "comm/collective_agreement.hpp"
#include "comm/communicator_factory.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_host_group.hpp"
#include "comm/rank_group.hpp"
#include "core/errors.hpp"
#include "core/host_info.hpp"
#include "core/number_format.hpp"
#include "core/run_clock.hpp"
#include "driver/progress_line.hpp"
#include "driver/results_journal.hpp"
#include "driver/stall_watchdog.hpp"
#include "driver/stop_signals.hpp"
#include "driver/timing_gather.hpp"
#include "kernels/cpu/cpu_device.hpp"
#include "model/sgd_momentum.hpp"
#include "printers/summary_printer.hpp"
#include "results/schema.hpp"
#include "worker/device_dataset.hpp"
#include "worker/gemm_rate.hpp"
#include "worker/held_out_set.hpp"
#include "worker/memory_plan.hpp"
#include "worker/node_sharing_probe.hpp"
#include "worker/parameter_fingerprint.hpp"
#include "worker/sampling/sampler.hpp"
#include "worker/slurm_allocation.hpp"

namespace dlscale::driver {

namespace {

constexpr double sgd_momentum = 0.9;          // the benchmark's optimizer, fixed
constexpr int distinct_batches_per_rank = 8;  // cycled through; made before training
constexpr std::uint64_t synthetic_data_bytes_per_rank = std::uint64_t(1) << 30;
constexpr int gpu_gemm_order = 8192;  // the yardstick GEMM: 1.1 TFLOP, long enough to time
// On a CPU: 2.1 GFLOP, 8-20 ms at the 100-270 GFLOP/s that one core of this project's VMs has
// shown. Its best rate is that of order 2048 (107 and 106 GFLOP/s at one thread, side by side), and
// a measurement holds 25-60 of them: a finer sample of the quiet moments between other jobs' bursts
// than the 3-4 of order 2048, at two thirds of the cost (0.7-0.8 s; docs/performance.md).
constexpr int cpu_gemm_order = 1024;
// Each yardstick measurement times GEMMs for at least this long, twice per point: longer than a
// burst of another job, and about 1.1 s a point in all. Ten measurements in a row on this idle VM
// spanned 4-8% at 0.3 s, 5-6% at 0.5 s and 4% at 1 s (max - min over max, 1 and 2 threads).
constexpr double yardstick_least_seconds = 0.5;

// The stop signal any rank of `comm` received (the largest number), or 0: one decision for all.
int agreed_stop_signal(MPI_Comm comm) {
  const int mine = stop_signal_received();
  int agreed = 0;
  DLSCALE_MPI_CHECK(MPI_Allreduce(&mine, &agreed, 1, MPI_INT, MPI_MAX, comm));
  return agreed;
}

// The yardstick: the float GEMM rate of rank 0's device at its present thread count, measured by
// the group's rank 0 while the others wait asleep (so they leave it the cores, and the device
// where ranks share one). Returns 0 on the other ranks. Collective over `group`.
double measure_yardstick(kernels::Device& device, MPI_Comm group) {
  int group_rank = 0;
  DLSCALE_MPI_CHECK(MPI_Comm_rank(group, &group_rank));
  double gflops = 0;
  if (group_rank == 0)
    gflops = worker::measure_gemm_gflops(
        device, device.memory_is_host() ? cpu_gemm_order : gpu_gemm_order, yardstick_least_seconds);
  comm::quiet_barrier(group);
  return gflops;
}

// Runs a point's set-up on every rank of the group; running out of memory on any rank fails the
// point on all of them.
void set_up_or_fail_point(MPI_Comm group, const std::function<void()>& set_up) {
  comm::agree_on_success(group, [&] {
    try {
      set_up();
    } catch (const std::bad_alloc&) {
      throw PointFailure(FailureCause::out_of_memory, "failed to allocate host memory");
    } catch (const OutOfMemory& error) {
      throw PointFailure(FailureCause::out_of_memory,
                         std::string("failed to allocate: ") + error.what());
    }
  });
}

// Throws PointFailure, on every rank of the group, where any rank's estimate of the network, its
// data and its buffers exceeds its device's free memory (shared by the ranks on one device).
void fail_unless_it_fits(MPI_Comm group, const workloads::Workload& workload, int batch,
                         int batches, kernels::Precision precision, kernels::Device& device,
                         const TrainingPlan& plan, const comm::HostPlacement& placement) {
  comm::agree_on_success(group, [&] {
    const int devices = kernels::device_record(plan.device_kind).devices_per_host();
    const int ranks_on_device = (placement.ranks_on_host + devices - 1) / devices;
    const std::string shortfall = worker::memory_shortfall(
        workload, batch, batches, precision, ranks_on_device, device.free_memory_bytes());
    if (!shortfall.empty()) throw PointFailure(FailureCause::does_not_fit, shortfall);
  });
}

// Why a point trained to --max-samples without reaching its target, from its evaluations.
std::string short_of_target(const TrainingPlan& plan,
                            const std::vector<results::Evaluation>& evaluations) {
  const bool accuracy = plan.target_metric == "accuracy";
  const auto best =
      std::max_element(evaluations.begin(), evaluations.end(), [&](const auto& a, const auto& b) {
        return accuracy ? a.accuracy < b.accuracy : a.loss > b.loss;
      });
  if (best == evaluations.end())
    return fmt::format("no evaluation before the --max-samples limit of {} samples",
                       plan.max_samples);
  return fmt::format(
      "held-out {} {:.4g} at best (after {} samples), short of the target {} within the "
      "--max-samples limit of {} samples",
      plan.target_metric, accuracy ? best->accuracy : best->loss,
      with_thousands_separators(std::uint64_t(best->samples)), plan.target_value,
      with_thousands_separators(std::uint64_t(plan.max_samples)));
}

// Says, before a node-sharing probe of `ranks` ranks runs, that it runs and what bounds it.
void announce_probe(const TrainingPlan& plan, int ranks, ProgressLine& progress) {
  const int passes =
      worker::probe_pass_budget(plan.probe_schedule, plan.schedule.total_iterations());
  if (ranks < 2 || !plan.probe_schedule.enabled || passes == 0) return;
  progress.show_activity(fmt::format(
      "node-sharing probe on {} ranks: at most {} compute passes, 1 per {} iterations of the "
      "point (--probe no skips it)",
      ranks, passes, plan.probe_schedule.iterations_per_pass));
}

// Everything one point holds while it trains, made on every rank of its group.
struct PointSetUp {
  comm::HostPlacement placement;
  std::unique_ptr<comm::GradientCommunicator> communicator;
  std::unique_ptr<model::Network<float>> network;
  std::unique_ptr<model::SgdMomentum<float>> optimizer;
  std::unique_ptr<worker::DeviceDataset> data;
  worker::GradientExchange exchange;
  std::vector<std::unique_ptr<worker::Sampler>> samplers;
  std::vector<results::Measurement> node_sharing;  // the probe made before training
  double gemm_gflops_before = 0;                   // the yardstick, before the point's buffers
  worker::TrainingSchedule schedule;               // the plan's, for this point
  double learning_rate = 0;                        // scaled to the point's global batch
  std::unique_ptr<worker::HeldOutSet> held_out;    // with --eval-every
};

// What a point's training left on this rank.
struct PointMeasurement {
  RankReport report;
  int measured_iterations = 0;  // fewer than planned: cut short by a stop signal or its target
  int stop_signal = 0;          // the one the group agreed on, or 0
};

// A point's set-up on every rank of `group`: the memory check, the communicator, the yardstick,
// the network, optimizer and data, the gradient buckets, the samplers and the node-sharing
// probe. Throws PointFailure, on every rank of the group, where the point does not fit.
PointSetUp set_up_point(const TrainingPlan& plan, const SweepPoint& point, kernels::Device& device,
                        MPI_Comm group, ProgressLine& progress, StallWatchdog& watchdog) {
  watchdog.begin_point(point.ranks);
  const workloads::Workload& workload = *plan.workload;
  PointSetUp run;
  run.schedule = point_schedule(plan, point);
  run.learning_rate = point_learning_rate(plan, point);
  run.placement = comm::host_placement(group);
  const int batch = point.batch_per_rank;
  const int batches = distinct_batches(workload, batch, !plan.target_metric.empty(),
                                       run.schedule.total_iterations());
  if (plan.check_memory_per_point)
    fail_unless_it_fits(group, workload, batch, batches, point.precision, device, plan,
                        run.placement);

  run.communicator =
      comm::make_gradient_communicator(plan.comm_backend, group, device, plan.grad_dtype);
  spdlog::info(
      "{} ({} parameters) on {} rank(s) x {} thread(s), {}, batch {}/rank, {}{}{}", workload.name(),
      with_thousands_separators(workload.parameter_count()), run.communicator->size(),
      point.threads, kernels::precision_name(point.precision), batch,
      plan.target_metric.empty()
          ? fmt::format("{} + {} iterations", run.schedule.warmup_iterations,
                        run.schedule.measured_iterations)
          : fmt::format("to held-out {} {} within {} iterations", plan.target_metric,
                        plan.target_value, run.schedule.total_iterations()),
      run.learning_rate != plan.learning_rate
          ? fmt::format(", learning rate {:.4g}", run.learning_rate)
          : "",
      point.repeat > 0 ? fmt::format(", repeat {} (seed {})", point.repeat, point.seed) : "");
  // Once before the point's network and data are allocated and once after they are freed, so
  // that its buffers never compete with the point's for device memory; the two show whether the
  // machine's rate moved during the point.
  run.gemm_gflops_before = measure_yardstick(device, group);
  set_up_or_fail_point(group, [&] {
    run.network = workload.build_network(device, batch);
    run.network->initialize(point.seed);
    run.optimizer = std::make_unique<model::SgdMomentum<float>>(
        device, run.network->parameters().size(), float(run.learning_rate), float(sgd_momentum));
    run.data = std::make_unique<worker::DeviceDataset>(device, workload, batch, batches, point.seed,
                                                       run.communicator->rank());
    if (run.schedule.evaluate_every > 0)
      run.held_out = std::make_unique<worker::HeldOutSet>(
          device, workload, batch, plan.evaluation_samples, point.seed, run.communicator->rank(),
          run.communicator->size());
  });
  run.exchange = worker::make_gradient_exchange(
      *run.network, std::size_t(plan.bucket_mb * (1 << 20)), plan.overlap);
  run.samplers = worker::make_samplers({plan.sample_interval_seconds, device.gpu_index()});
  // How much slower compute gets with the point's ranks side by side, for `dlscale predict`.
  announce_probe(plan, run.communicator->size(), progress);
  run.node_sharing = worker::probe_node_sharing(
      *run.network, *run.data, device, group, plan.schedule.total_iterations(),
      [&] { watchdog.progressed(); }, plan.probe_schedule);
  return run;
}

// Trains the set-up point on every rank of `group`, the ranks starting the clock together.
// Returns nothing where a stop signal came before any measured iteration had finished. Throws
// PointFailure, on every rank of the group, for a point that diverges or runs past its time limit.
std::optional<PointMeasurement> measure_point(const TrainingPlan& plan, PointSetUp& run,
                                              kernels::Device& device, MPI_Comm group,
                                              ProgressLine& progress, StallWatchdog& watchdog,
                                              StopSignalRelay& relay) {
  DLSCALE_MPI_CHECK(MPI_Barrier(group));  // start the clock together

  // After every iteration, outside the timed phases: the ranks agree whether to go on, so a
  // divergence seen by one rank, the time limit or a stop signal ends all of them at the same
  // iteration.
  PointMeasurement measured;
  watchdog.progressed();
  // Every rank holds the same evaluations, so all see the target met at the same one; training
  // stops there, or after the warm-up where it came sooner, so the timings have a measured step.
  bool reached_target = false;
  const auto after_iteration = [&](const worker::IterationReport& report) {
    progress.iteration_done(report.iteration, report.step_seconds);
    watchdog.progressed(report.step_seconds);
    comm::agree_on_success(group, [&] {
      if (!report.divergence.empty())
        throw PointFailure(
            FailureCause::diverged,
            fmt::format("diverged at iteration {} ({})", report.iteration, report.divergence));
      if (plan.point_timeout_seconds > 0 && report.clock_seconds > plan.point_timeout_seconds)
        throw PointFailure(FailureCause::timed_out,
                           fmt::format("exceeded --point-timeout {} s at iteration {}",
                                       plan.point_timeout_seconds, report.iteration));
    });
    relay.take_forwarded();  // a waiting rank's signal stops the point as one of its own would
    measured.stop_signal = agreed_stop_signal(group);
    if (report.evaluation != nullptr &&
        analysis::meets_target(plan.target_metric, plan.target_value, *report.evaluation))
      reached_target = true;
    return measured.stop_signal == 0 &&
           !(reached_target && report.iteration >= run.schedule.warmup_iterations);
  };
  const worker::Evaluator evaluate = [&] { return run.held_out->evaluate(*run.network, group); };
  const auto instruments = worker::make_step_instruments(
      {device, *run.communicator, run.schedule.warmup_iterations, run.schedule.evaluate_every,
       run.held_out ? evaluate : worker::Evaluator{}});
  measured.report.measurements =
      worker::train(*run.network, *run.optimizer, *run.data, *run.communicator, run.exchange,
                    device, run.schedule, run.samplers, after_iteration, instruments);
  if (!plan.target_metric.empty() && !reached_target && measured.stop_signal == 0)
    throw PointFailure(FailureCause::target_not_reached,
                       short_of_target(plan, measured.report.measurements.evaluations));
  for (auto& measurement : run.node_sharing)
    measured.report.measurements.series.push_back(std::move(measurement));
  progress.end_point();
  measured.measured_iterations =
      int(measured.report.measurements.loss.size()) - run.schedule.warmup_iterations;
  if (measured.measured_iterations <= 0) return std::nullopt;  // stopped during the warm-up
  measured.report.parameter_fingerprint =
      worker::parameter_fingerprint(device, run.network->parameters());
  measured.report.host = host_name();
  measured.report.local_rank = run.placement.local_rank;
  return measured;
}

// What a point's record says it was: the plan's settings and the point's own, with
// `measured_iterations` measured. A failed point's file keeps the launch's part of it.
results::RunConfiguration point_configuration(const TrainingPlan& plan, const SweepPoint& point,
                                              int measured_iterations) {
  const workloads::Workload& workload = *plan.workload;
  const worker::TrainingSchedule schedule = point_schedule(plan, point);
  return {workload.name(),
          workload.family(),
          workload.description(),
          workload.parameter_count(),
          workload.training_flops_per_sample(),
          point.batch_per_rank,
          plan.schedule.warmup_iterations,
          measured_iterations,
          point.threads,
          point.repeat,
          comm::backend_record(plan.comm_backend).name,
          comm::gradient_dtype_names(plan.grad_dtype),
          kernels::device_record(plan.device_kind).name,
          kernels::precision_name(point.precision),
          point.seed,
          point_learning_rate(plan, point),
          sgd_momentum,
          results::scaling_name(plan.scaling),
          plan.bucket_mb,
          plan.overlap,
          plan.learning_rate_scaling,
          plan.learning_rate,
          schedule.learning_rate_warmup,
          schedule.evaluate_every,
          plan.target_metric,
          plan.target_value};
}

// Frees the point's set-up, measures the yardstick again and gathers the run's record to the
// group's rank 0 (world rank 0), with its summary. Returns nothing on the other ranks.
std::optional<results::RunRecord> record_point(const TrainingPlan& plan, const SweepPoint& point,
                                               PointSetUp run, const PointMeasurement& measured,
                                               kernels::Device& device, MPI_Comm group,
                                               const results::RunEnvironment& environment) {
  const results::RunConfiguration configuration =
      point_configuration(plan, point, measured.measured_iterations);
  std::vector<results::LayerRecord> layers;
  for (const auto& layer : run.network->layers())
    layers.push_back({layer->kind(), layer->parameter_count()});
  std::vector<results::BucketRecord> buckets;
  for (const auto& bucket : run.exchange.buckets)
    buckets.push_back({bucket.first_layer, bucket.last_layer,
                       double(bucket.count * comm::sent_bytes_per_element(plan.grad_dtype))});
  const double gemm_gflops_before = run.gemm_gflops_before;
  const int planned_iterations = run.schedule.measured_iterations;
  {
    const PointSetUp finished = std::move(run);  // freed here, in reverse order of making
  }
  // A stop signal asks for a quick exit, so the run keeps the yardstick from before only.
  const double gemm_gflops_after = measured.stop_signal == 0 ? measure_yardstick(device, group) : 0;

  results::RunEnvironment point_environment = environment;
  point_environment.cpu_model = device.description();
  point_environment.device_properties = device.properties();  // this point's threads
  point_environment.device_gemm_gflops_before = gemm_gflops_before;
  point_environment.device_gemm_gflops_after = gemm_gflops_after;
  // The faster of the two: the slower one was held back (other work, or a lower clock).
  point_environment.device_gemm_gflops = std::max(gemm_gflops_before, gemm_gflops_after);
  comm::MpiHostGroup host_group(group);
  auto record = gather_run(host_group, measured.report, configuration, point_environment);
  if (!record) return record;
  record->layers = std::move(layers);
  record->buckets = std::move(buckets);
  record->evaluations = measured.report.measurements.evaluations;  // the same on every rank
  record->summary = analysis::summarize(*record);
  if (measured.stop_signal != 0)
    record->partial_reason = fmt::format("interrupted by {} after {} of {} measured iterations",
                                         stop_signal_name(measured.stop_signal),
                                         measured.measured_iterations, planned_iterations);
  return record;
}

// One sweep point on the ranks of `group`: set up, measured, recorded. Returns the run's record
// on the group's rank 0 (world rank 0), nothing elsewhere; a stop signal ends it early, as a
// partial run, or with nothing when no measured iteration had finished. Throws PointFailure, on
// every rank of the group, for a point that cannot be measured.
std::optional<results::RunRecord> train_point(const TrainingPlan& plan, const SweepPoint& point,
                                              kernels::Device& device, MPI_Comm group,
                                              const results::RunEnvironment& environment,
                                              ProgressLine& progress, StallWatchdog& watchdog,
                                              StopSignalRelay& relay) {
  // Kernels make their primitives and workspaces when first called (the yardstick's GEMMs, the
  // first iteration), outside the set-up's agreed allocations: an allocation that fails there
  // fails the point too, which the file keeps. Every rank of the point runs the same kernels in
  // the same order, so all of them fail at the same call.
  try {
    PointSetUp run = set_up_point(plan, point, device, group, progress, watchdog);
    const auto measured = measure_point(plan, run, device, group, progress, watchdog, relay);
    if (!measured) return std::nullopt;
    return record_point(plan, point, std::move(run), *measured, device, group, environment);
  } catch (const std::bad_alloc&) {
    throw PointFailure(FailureCause::out_of_memory, "failed to allocate host memory");
  } catch (const OutOfMemory& error) {
    throw PointFailure(FailureCause::out_of_memory,
                       std::string("failed to allocate: ") + error.what());
  }
}

// The rank counts beyond the sweep's largest point that the launch holds, for node-sharing
// probes without training: each doubling of that point, and the whole launch (full node
// occupancy, where compute per rank is slowest). Cheap beside training there, and it lets
// `dlscale predict` carry compute past the sweep from measurements (docs/scaling-model.md).
std::vector<int> probe_only_rank_counts(const std::vector<SweepPoint>& points, int world_size) {
  int largest = 1;
  for (const auto& point : points) largest = std::max(largest, point.ranks);
  std::vector<int> counts;
  for (long long k = 2LL * largest; k < world_size; k *= 2) counts.push_back(int(k));
  if (world_size > largest) counts.push_back(world_size);
  return counts;
}

// The device that computes with `point`'s threads and precision: `device` itself, made with
// `made_with`, or a new one in its place.
void use_device_of(const SweepPoint& point, std::unique_ptr<kernels::Device>& device,
                   kernels::DeviceSettings& made_with, kernels::DeviceKind kind) {
  if (point.threads == made_with.compute_threads && point.precision == made_with.precision) return;
  device.reset();  // one device at a time: the CPU's threads are process-wide
  made_with.compute_threads = point.threads;
  made_with.precision = point.precision;
  device = kernels::device_record(kind).make(made_with);
}

// The point that `dlscale predict` measures efficiency against: the fewest ranks, then threads,
// at the first precision of the sweep.
const SweepPoint& baseline_point(const std::vector<SweepPoint>& points) {
  return *std::min_element(points.begin(), points.end(), [&](const auto& a, const auto& b) {
    return std::tuple(a.precision != points.front().precision, a.ranks, a.threads) <
           std::tuple(b.precision != points.front().precision, b.ranks, b.threads);
  });
}

// A node-sharing probe on the ranks of `group` (the first `ranks` of the launch), with the
// network of the sweep's baseline point as it would be at this rank count, and nothing trained.
// Returns the probe on the group's rank 0, nothing elsewhere. Throws PointFailure, on every rank
// of the group, where the network does not fit.
std::optional<results::NodeSharingProbe> probe_without_training(const TrainingPlan& plan,
                                                                kernels::Device& device,
                                                                MPI_Comm group,
                                                                ProgressLine& progress,
                                                                StallWatchdog& watchdog) {
  const RunClock clock;
  const SweepPoint& baseline = baseline_point(plan.points);
  results::NodeSharingProbe probe;
  DLSCALE_MPI_CHECK(MPI_Comm_size(group, &probe.ranks));
  watchdog.begin_point(probe.ranks);
  probe.precision = kernels::precision_name(baseline.precision);
  probe.threads = device.compute_threads();
  // Strong scaling splits the global batch further; the curve is per sample (see predict).
  probe.batch_per_rank =
      plan.scaling == results::Scaling::strong
          ? std::max(
                1, int(std::lround(double(baseline.batch_per_rank) * baseline.ranks / probe.ranks)))
          : baseline.batch_per_rank;
  const comm::HostPlacement placement = comm::host_placement(group);
  DLSCALE_MPI_CHECK(
      MPI_Allreduce(&placement.ranks_on_host, &probe.ranks_per_node, 1, MPI_INT, MPI_MAX, group));
  const workloads::Workload& workload = *plan.workload;
  const int batches = distinct_batches(workload, probe.batch_per_rank);
  fail_unless_it_fits(group, workload, probe.batch_per_rank, batches, baseline.precision, device,
                      plan, placement);
  int group_rank = 0;
  DLSCALE_MPI_CHECK(MPI_Comm_rank(group, &group_rank));
  std::unique_ptr<model::Network<float>> network;
  std::unique_ptr<worker::DeviceDataset> data;
  set_up_or_fail_point(group, [&] {
    network = workload.build_network(device, probe.batch_per_rank);
    network->initialize(baseline.seed);
    data = std::make_unique<worker::DeviceDataset>(device, workload, probe.batch_per_rank, batches,
                                                   baseline.seed, group_rank);
  });
  announce_probe(plan, probe.ranks, progress);
  const auto measurements = worker::probe_node_sharing(
      *network, *data, device, group, plan.schedule.total_iterations(),
      [&] { watchdog.progressed(); }, plan.probe_schedule);
  const auto value = [&](const char* name) {
    for (const auto& measurement : measurements)
      if (measurement.name == name && !measurement.values.empty())
        return measurement.values.front();
    return 0.0;
  };
  double shared_sum = 0;
  const double shared = value(results::node_sharing_shared_seconds);
  DLSCALE_MPI_CHECK(MPI_Reduce(&shared, &shared_sum, 1, MPI_DOUBLE, MPI_SUM, 0, group));
  if (group_rank != 0) return std::nullopt;
  probe.shared_seconds = shared_sum / probe.ranks;
  probe.alone_seconds = value(results::node_sharing_alone_seconds);
  probe.probe_seconds = clock.seconds();
  return probe;
}

// What every run of this launch shares: provenance, libraries, the device and the job.
results::RunEnvironment launch_environment(kernels::Device& device, const comm::MpiSession& mpi,
                                           const results::FileOrigin& origin) {
  results::RunEnvironment environment;
  environment.dlscale_version = origin.dlscale_version;
  environment.git_commit = origin.git_commit;
  environment.command_line = origin.command_line;
  environment.start_time_utc = origin.start_time_utc;
  environment.mpi_library_version = comm::mpi_library_version();
  environment.blas = kernels::cpu_blas_description();
  environment.device_properties = device.properties();
  environment.launch_world_size = mpi.world_size();
  if (const auto slurm = worker::slurm_allocation()) environment.slurm = *slurm;
  return environment;
}

}  // namespace

int distinct_batches(const workloads::Workload& workload, int batch, bool to_target,
                     int iterations) {
  const std::uint64_t batch_bytes =
      std::uint64_t(batch) * (workload.input_size() * sizeof(float) + sizeof(std::int32_t));
  const std::uint64_t wanted =
      to_target ? std::uint64_t(std::max(iterations, 1)) : distinct_batches_per_rank;
  return int(std::clamp<std::uint64_t>(synthetic_data_bytes_per_rank / batch_bytes, 1, wanted));
}

double point_learning_rate(const TrainingPlan& plan, const SweepPoint& point) {
  const long long global_batch = (long long)point.ranks * point.batch_per_rank;
  long long reference = plan.learning_rate_batch;
  if (reference == 0) {
    reference = global_batch;
    for (const auto& other : plan.points)
      reference = std::min(reference, (long long)other.ranks * other.batch_per_rank);
  }
  const double ratio = double(global_batch) / double(reference);
  const double factor = plan.learning_rate_scaling == "linear" ? ratio
                        : plan.learning_rate_scaling == "sqrt" ? std::sqrt(ratio)
                                                               : 1.0;
  return plan.learning_rate * factor;
}

worker::TrainingSchedule point_schedule(const TrainingPlan& plan, const SweepPoint& point) {
  worker::TrainingSchedule schedule = plan.schedule;
  const long long global_batch = (long long)point.ranks * point.batch_per_rank;
  if (!plan.target_metric.empty()) {
    const long long limit = std::clamp<long long>(
        (plan.max_samples + global_batch - 1) / global_batch, 1, std::numeric_limits<int>::max());
    schedule.measured_iterations = int(std::max<long long>(1, limit - schedule.warmup_iterations));
  }
  return schedule;
}

int run_training_plan(TrainingPlan plan, const comm::MpiSession& mpi,
                      const results::FileOrigin& origin) {
  const bool coordinator_rank = mpi.world_rank() == 0;
  install_stop_signal_handlers();
  StopSignalRelay relay(mpi.world());
  std::unique_ptr<kernels::Device> device = std::move(plan.device);
  kernels::DeviceSettings device_made_with = plan.device_settings;
  const auto points = int(plan.points.size());
  // The file's name is taken before any training: a clash, an unwritable directory or a full
  // disk costs seconds, not a run. From here on the file holds every finished point.
  std::optional<ResultsJournal> journal;
  comm::agree_on_success(mpi.world(), [&] {
    if (!coordinator_rank) return;
    int most_ranks = 0;
    for (const auto& point : plan.points) most_ranks = std::max(most_ranks, point.ranks);
    journal.emplace(plan.output_path, plan.overwrite, origin,
                    expected_results_bytes(points, most_ranks, plan.schedule.total_iterations()));
  });
  // A stalled rank ends the job from the watchdog's thread, after the file says so.
  StallWatchdog watchdog(
      mpi.world(), {.timeout_seconds = plan.stall_timeout_seconds, .exit_status = exit_stalled},
      [&](const std::string& diagnosis) {
        std::string kept;
        if (journal)
          kept = fmt::format("; the finished points are kept in {}",
                             journal->finish_for_exit("interrupted: " + diagnosis).string());
        spdlog::error("{}{}", diagnosis, kept);
      });
  const results::RunEnvironment environment = launch_environment(*device, mpi, origin);

  ProgressLine progress(coordinator_rank);
  // Each absent measurement's reason is said once per launch, by the first point it is absent in.
  std::vector<std::string> absent_reasons_said;
  int stop_signal = 0;
  int completed_points = 0;
  // A launch the backend cannot serve ends here, on every rank of the point, with one line; the
  // file keeps the points finished before it, or is removed where there are none.
  try {
    for (int index = 0; index < points && stop_signal == 0; ++index) {
      const SweepPoint& point = plan.points[index];
      const comm::RankGroup group(mpi.world(), point.ranks);
      if (group.contains_this_rank()) {
        use_device_of(point, device, device_made_with, plan.device_kind);
        progress.begin_point(index + 1, points, point.ranks,
                             point_schedule(plan, point).total_iterations());
        try {
          auto record = train_point(plan, point, *device, group.comm(), environment, progress,
                                    watchdog, relay);
          if (record) {
            if (plan.quiet) {
              std::fputs(printers::format_point_line(*record).c_str(), stdout);
            } else {
              std::fputs(printers::format_summary(*record, &absent_reasons_said).c_str(), stdout);
              std::fputs("\n", stdout);
            }
            std::fflush(stdout);
            if (record->partial_reason.empty()) ++completed_points;
            journal->add_run(std::move(*record));
          }
        } catch (const PointFailure& failure) {
          progress.end_point();
          if (coordinator_rank) {
            journal->add_failed_point(
                {point.ranks, kernels::precision_name(point.precision), point.threads, point.repeat,
                 point.batch_per_rank, point.seed, failure.cause(), failure.what()},
                point_configuration(plan, point, 0));
            spdlog::warn(
                "point {} of {} ({} rank(s) x {} thread(s), {}{}) failed: {}; going on", index + 1,
                points, point.ranks, point.threads, kernels::precision_name(point.precision),
                point.repeat > 0 ? fmt::format(", repeat {}", point.repeat) : "", failure.what());
          }
        }
      }
      // Ranks outside this point wait here, asleep, passing on a stop signal they receive.
      comm::quiet_barrier(mpi.world(), [&] { relay.forward(); });
      stop_signal = agreed_stop_signal(mpi.world());
    }

    // Beyond the sweep: how compute slows as the launch's nodes fill, without training there.
    if (plan.probe_schedule.enabled &&
        worker::probe_pass_budget(plan.probe_schedule, plan.schedule.total_iterations()) > 0)
      for (int ranks : probe_only_rank_counts(plan.points, mpi.world_size())) {
        if (stop_signal != 0) break;
        const comm::RankGroup group(mpi.world(), ranks);
        if (group.contains_this_rank()) {
          use_device_of(baseline_point(plan.points), device, device_made_with, plan.device_kind);
          try {
            progress.begin_point(0, 1, ranks, 0);
            const auto probe =
                probe_without_training(plan, *device, group.comm(), progress, watchdog);
            progress.end_point();
            if (probe) {
              spdlog::info(
                  "node-sharing probe on {} ranks ({} on a node), no training: one pass "
                  "takes {:.3g} s, {:.2f}x the {:.3g} s of one rank alone ({:.1f} s)",
                  probe->ranks, probe->ranks_per_node, probe->shared_seconds,
                  probe->shared_seconds / probe->alone_seconds, probe->alone_seconds,
                  probe->probe_seconds);
              journal->add_node_sharing_probe(*probe);
            }
          } catch (const PointFailure& failure) {
            if (coordinator_rank)
              spdlog::warn("no node-sharing probe on {} ranks: {}", ranks, failure.what());
          }
        }
        comm::quiet_barrier(mpi.world(), [&] { relay.forward(); });
        stop_signal = agreed_stop_signal(mpi.world());
      }
  } catch (const UserError& error) {
    if (coordinator_rank) {
      const std::filesystem::path kept = journal->abandon(error.what());
      if (!kept.empty()) spdlog::info("the finished points are kept in {}", kept.string());
    }
    throw;
  }

  relay.finish();
  // Only rank 0 holds the results; every rank leaves with its status.
  int status = 0;
  if (coordinator_rank) {
    const std::string file_status = stop_signal == 0
                                        ? std::string(results::schema::status_complete)
                                        : "interrupted: " + stop_signal_name(stop_signal);
    const results::ResultsFile& results = journal->finish(file_status);
    if (points > 1 && stop_signal == 0) {
      if (!plan.quiet)
        std::fputs(printers::format_study(results.study.value_or(results::StudySummary{}),
                                          results.failed_points)
                       .c_str(),
                   stdout);
      std::fputs(printers::format_study_verdict(results.runs).c_str(), stdout);
    }
    fmt::print("results         {}\n", journal->location().string());
    std::fflush(stdout);
    const bool replicas_differ =
        std::any_of(results.runs.begin(), results.runs.end(),
                    [](const auto& r) { return !r.summary.parameters_identical; });
    const bool partial = !results.runs.empty() && !results.runs.back().partial_reason.empty();
    if (stop_signal != 0) {
      spdlog::error(
          "interrupted by {}: kept {} completed point(s) of {}{} in {}",
          stop_signal_name(stop_signal), completed_points, points,
          partial ? " and the measured iterations of the one under way (marked partial)" : "",
          journal->location().string());
      status = 128 + stop_signal;
    } else if (replicas_differ) {
      spdlog::error(
          "parameters differ between ranks after training: data-parallel replicas diverged");
      status = 1;
    } else if (journal->rescued()) {
      status = 1;  // the results are kept, but not where the user asked
    } else if (!results.failed_points.empty()) {
      spdlog::error(
          "{} of {} sweep point(s) could not be measured; kept in the results file "
          "with the reason",
          results.failed_points.size(), points);
      status = exit_some_points_failed;
    }
  }
  DLSCALE_MPI_CHECK(MPI_Bcast(&status, 1, MPI_INT, 0, mpi.world()));
  return status;
}

}  // namespace dlscale::driver
