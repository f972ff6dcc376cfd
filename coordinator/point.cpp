// One sweep point: set up, measured, recorded. Every decision that ends a point is agreed on by
// the point's ranks, so no rank waits in a collective that another has left.
#include "coordinator/point.hpp"

#include <algorithm>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "analysis/run_summary.hpp"
#include "comm/collective_agreement.hpp"
#include "comm/communicator_factory.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_host_group.hpp"
#include "comm/rank_group.hpp"
#include "coordinator/timing_gather.hpp"
#include "core/errors.hpp"
#include "core/host_info.hpp"
#include "core/number_format.hpp"
#include "core/run_clock.hpp"
#include "model/adamw.hpp"
#include "model/sgd_momentum.hpp"
#include "worker/data_parallel_strategy.hpp"
#include "worker/device_dataset.hpp"
#include "worker/gemm_rate.hpp"
#include "worker/held_out_set.hpp"
#include "worker/memory_plan.hpp"
#include "worker/node_sharing_probe.hpp"
#include "worker/parameter_fingerprint.hpp"
#include "worker/sampling/sampler.hpp"

namespace dlscale::coordinator {

namespace {

constexpr double sgd_momentum = 0.9;  // SGD's, fixed
// AdamW's constants are torch.optim.AdamW's defaults; the record keeps beta1 and the weight
// decay as written here.
constexpr double adamw_beta1 = 0.9;
constexpr double adamw_weight_decay = 0.01;
constexpr kernels::AdamWHyperparameters<float> adamw_hyperparameters{
    .beta1 = float(adamw_beta1), .weight_decay = float(adamw_weight_decay)};
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

// The optimizer a point trains with, over `parameters` parameters at `learning_rate`.
std::unique_ptr<model::Optimizer<float>> make_optimizer(results::OptimizerKind kind,
                                                        kernels::Device& device,
                                                        std::size_t parameters,
                                                        float learning_rate) {
  if (kind == results::OptimizerKind::adamw)
    return std::make_unique<model::AdamW<float>>(device, parameters, learning_rate,
                                                 adamw_hyperparameters);
  return std::make_unique<model::SgdMomentum<float>>(device, parameters, learning_rate,
                                                     float(sgd_momentum));
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

// Why a point trained to --max-samples without reaching its target, from its evaluations.
std::string short_of_target(const TrainingTarget& target,
                            const std::vector<results::Evaluation>& evaluations) {
  const bool accuracy = target.goal.metric == results::TargetMetric::accuracy;
  const auto best =
      std::max_element(evaluations.begin(), evaluations.end(), [&](const auto& a, const auto& b) {
        return accuracy ? a.accuracy < b.accuracy : a.loss > b.loss;
      });
  if (best == evaluations.end())
    return fmt::format("no evaluation before the --max-samples limit of {} samples",
                       target.max_samples);
  return fmt::format(
      "held-out {} {:.4g} at best (after {} samples), short of the target {} within the "
      "--max-samples limit of {} samples",
      target.goal.metric_name(), accuracy ? best->accuracy : best->loss,
      with_thousands_separators(std::uint64_t(best->samples)), target.goal.value,
      with_thousands_separators(std::uint64_t(target.max_samples)));
}

// How the point updates its parameters, for the memory estimate.
worker::UpdateStrategy update_strategy(const TrainingPlan& plan, const SweepPoint& point,
                                       const comm::HostPlacement& placement) {
  return {
      plan.optimizer, point.sharding,
      // Hybrid sharding shards over the ranks of one host.
      plan.sharding_group == results::ShardingGroup::node ? placement.ranks_on_host : point.ranks,
      std::uint64_t(plan.shard_unit_mb * (1 << 20))};
}

// Hybrid sharding's groups (--sharding-group node): this rank's host, and the ranks of its local
// index on every host, with a communicator over each. The MPI groups live as long as they do.
struct HybridGroups {
  MPI_Comm host = MPI_COMM_NULL, replicas = MPI_COMM_NULL;
  std::unique_ptr<comm::GradientCommunicator> shards, replica_sums;
  HybridGroups() = default;
  HybridGroups(const HybridGroups&) = delete;
  HybridGroups& operator=(const HybridGroups&) = delete;
  ~HybridGroups() {
    shards.reset();
    replica_sums.reset();
    if (host != MPI_COMM_NULL) MPI_Comm_free(&host);
    if (replicas != MPI_COMM_NULL) MPI_Comm_free(&replicas);
  }
};

// Throws UserError, on every rank of `group`, unless every host holds the same number of its
// ranks; otherwise makes the groups and their communicators.
std::unique_ptr<HybridGroups> make_hybrid_groups(const TrainingPlan& plan, MPI_Comm group,
                                                 const comm::HostPlacement& placement,
                                                 kernels::Device& device) {
  int fewest = placement.ranks_on_host, most = placement.ranks_on_host;
  DLSCALE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &fewest, 1, MPI_INT, MPI_MIN, group));
  DLSCALE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT, MPI_MAX, group));
  if (fewest != most)
    throw UserError(fmt::format(
        "--sharding-group node needs the same number of ranks on every host (each host holds "
        "one copy of the shards); this point's hosts hold {} to {}: use --sharding-group all",
        fewest, most));
  auto groups = std::make_unique<HybridGroups>();
  int rank = 0;
  DLSCALE_MPI_CHECK(MPI_Comm_rank(group, &rank));
  DLSCALE_MPI_CHECK(
      MPI_Comm_split_type(group, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &groups->host));
  DLSCALE_MPI_CHECK(MPI_Comm_split(group, placement.local_rank, rank, &groups->replicas));
  groups->shards =
      comm::make_gradient_communicator(plan.comm_backend, groups->host, device, plan.grad_dtype);
  groups->replica_sums = comm::make_gradient_communicator(plan.comm_backend, groups->replicas,
                                                          device, plan.grad_dtype);
  return groups;
}

// Everything one point holds while it trains, made on every rank of its group.
struct PointSetUp {
  comm::HostPlacement placement;
  std::unique_ptr<comm::GradientCommunicator> communicator;
  std::unique_ptr<HybridGroups> hybrid;  // --sharding-group node, for a sharded point
  std::unique_ptr<model::Network<float>> network;
  std::unique_ptr<model::Optimizer<float>> optimizer;
  std::unique_ptr<worker::DeviceDataset> data;
  worker::GradientExchange exchange;
  std::vector<std::unique_ptr<worker::Sampler>> samplers;
  std::vector<results::Measurement> node_sharing;  // the probe made before training
  double gemm_gflops_before = 0;                   // the yardstick, before the point's buffers
  worker::TrainingSchedule schedule;               // the plan's, for this point
  double learning_rate = 0;                        // scaled to the point's global batch
  results::Sharding sharding = results::Sharding::none;  // the point's strategy
  double memory_estimate_bytes = 0;  // per rank, by worker/memory_plan, before anything is made
  std::unique_ptr<worker::HeldOutSet> held_out;  // with --eval-every
};

// What a point's training left on this rank.
struct PointMeasurement {
  RankReport report;
  int measured_iterations = 0;  // fewer than planned: cut short by a stop signal or its target
  int stop_signal = 0;          // the one the group agreed on, or 0
};

// Where a point's set-up time goes, logged at --log-level debug: a short benchmark point (23
// steps of a few ms on a GPU) spends more of its wall time in set-up than in training.
class SetUpLaps {
 public:
  void lap(const char* what) {
    const double now = clock_.seconds();
    laps_.push_back(fmt::format("{} {:.2f} s", what, now - last_));
    last_ = now;
  }
  std::string summary() const {
    return fmt::format("{}; {:.2f} s in all", fmt::join(laps_, ", "), last_);
  }

 private:
  RunClock clock_;
  double last_ = 0;
  std::vector<std::string> laps_;
};

// A point's set-up on every rank of `group`: the memory check, the communicator, the yardstick,
// the network, optimizer and data, the gradient buckets, the samplers and the node-sharing
// probe. Throws PointFailure, on every rank of the group, where the point does not fit.
PointSetUp set_up_point(const TrainingPlan& plan, const SweepPoint& point, kernels::Device& device,
                        MPI_Comm group, ProgressLine& progress, StallWatchdog& watchdog) {
  watchdog.begin_point(point.ranks);
  SetUpLaps laps;
  const workloads::Workload& workload = *plan.workload;
  PointSetUp run;
  run.schedule = point_schedule(plan, point);
  run.learning_rate = point_learning_rate(plan, point);
  run.sharding = point.sharding;
  run.placement = comm::host_placement(group);
  const int batch = point.batch_per_rank;
  const int batches = point_distinct_batches(plan, point);
  if (plan.check_memory_per_point)
    fail_unless_it_fits(group, workload, batch, batches, point, device, plan, run.placement);
  run.memory_estimate_bytes = double(worker::estimate_training_bytes(
      workload, batch, batches, point.precision, update_strategy(plan, point, run.placement)));

  laps.lap("memory check");
  run.communicator =
      comm::make_gradient_communicator(plan.comm_backend, group, device, plan.grad_dtype);
  if (point.sharding != results::Sharding::none &&
      plan.sharding_group == results::ShardingGroup::node)
    run.hybrid = make_hybrid_groups(plan, group, run.placement, device);
  // Whom the point shards over: its host's ranks under hybrid sharding, else all of them.
  const int shard_ranks = run.hybrid ? run.hybrid->shards->size() : run.communicator->size();
  spdlog::info(
      "{} ({} parameters) on {} rank(s) x {} thread(s), {}, batch {}/rank, {}{}{}", workload.name(),
      with_thousands_separators(workload.parameter_count()), run.communicator->size(),
      point.threads, kernels::precision_name(point.precision), batch,
      plan.target
          ? fmt::format("to held-out {} {} within {} iterations", plan.target->goal.metric_name(),
                        plan.target->goal.value, run.schedule.total_iterations())
          : fmt::format("{} + {} iterations", run.schedule.warmup_iterations,
                        run.schedule.measured_iterations),
      run.learning_rate != plan.learning_rate
          ? fmt::format(", learning rate {:.4g}", run.learning_rate)
          : "",
      point.repeat > 0 ? fmt::format(", repeat {} (seed {})", point.repeat, point.seed) : "");
  // Once before the point's network and data are allocated and once after they are freed, so
  // that its buffers never compete with the point's for device memory; the two show whether the
  // machine's rate moved during the point.
  laps.lap("communicator");
  if (plan.gemm_yardstick) {
    run.gemm_gflops_before = measure_yardstick(device, group);
    laps.lap("GEMM yardstick");
  }
  set_up_or_fail_point(group, [&] {
    run.network = workload.build_network(device, batch);
    run.network->initialize(point.seed);
    laps.lap("network");
    // Fully sharded, the buckets are the units of sharding, as FSDP's wrapped modules are.
    const double bucket_mb =
        point.sharding == results::Sharding::full ? plan.shard_unit_mb : plan.bucket_mb;
    run.exchange = worker::make_gradient_exchange(*run.network, std::size_t(bucket_mb * (1 << 20)),
                                                  plan.overlap, point.sharding);
    if (run.hybrid)
      run.exchange.groups = {run.hybrid->shards.get(), run.hybrid->replica_sums.get()};
    run.optimizer =
        make_optimizer(plan.optimizer, device,
                       worker::updated_parameter_count(point.sharding, run.exchange.buckets,
                                                       run.network->parameter_count(), shard_ranks),
                       float(run.learning_rate));
    laps.lap("buckets and optimizer");
    run.data = std::make_unique<worker::DeviceDataset>(device, workload, batch, batches, point.seed,
                                                       run.communicator->rank());
    laps.lap("data");
    if (run.schedule.evaluate_every > 0)
      run.held_out = std::make_unique<worker::HeldOutSet>(
          device, workload, batch, plan.evaluation_samples, point.seed, run.communicator->rank(),
          run.communicator->size());
  });
  run.samplers = worker::make_samplers({plan.sample_interval_seconds, device.gpu_index()});
  // How much slower compute gets with the point's ranks side by side, for `dlscale predict`.
  announce_probe(plan, run.communicator->size(), progress);
  run.node_sharing = worker::probe_node_sharing(
      *run.network, *run.data, device, group, plan.schedule.total_iterations(),
      [&] { watchdog.progressed(); }, plan.probe_schedule);
  laps.lap("held-out set, samplers and node-sharing probe");
  spdlog::debug("set-up of the point: {}", laps.summary());
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
    if (report.evaluation != nullptr && plan.target && plan.target->goal.met_by(*report.evaluation))
      reached_target = true;
    return measured.stop_signal == 0 &&
           !(reached_target && report.iteration >= run.schedule.warmup_iterations);
  };
  const worker::Evaluator evaluate = [&] { return run.held_out->evaluate(*run.network, group); };
  const auto instruments = worker::make_step_instruments(
      {device, *run.communicator, run.schedule.warmup_iterations, run.schedule.evaluate_every,
       run.held_out ? evaluate : worker::Evaluator{}, run.sharding == results::Sharding::none});
  measured.report.measurements =
      worker::train(*run.network, *run.optimizer, *run.data, *run.communicator, run.exchange,
                    device, run.schedule, run.samplers, after_iteration, instruments);
  if (plan.target && !reached_target && measured.stop_signal == 0)
    throw PointFailure(FailureCause::target_not_reached,
                       short_of_target(*plan.target, measured.report.measurements.evaluations));
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
  const double memory_estimate_bytes = run.memory_estimate_bytes;
  const int planned_iterations = run.schedule.measured_iterations;
  {
    const PointSetUp finished = std::move(run);  // freed here, in reverse order of making
  }
  // Not kept in the heap for the next points, whose memory checks and peaks would count it.
  return_free_memory_to_the_system();
  // A stop signal asks for a quick exit, so the run keeps the yardstick from before only.
  const double gemm_gflops_after =
      plan.gemm_yardstick && measured.stop_signal == 0 ? measure_yardstick(device, group) : 0;

  results::RunEnvironment point_environment = environment;
  point_environment.cpu_model = device.description();
  point_environment.device_properties = device.properties();  // this point's threads
  point_environment.device_gemm_gflops_before = gemm_gflops_before;
  point_environment.device_gemm_gflops_after = gemm_gflops_after;
  point_environment.memory_estimate_bytes = memory_estimate_bytes;
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

}  // namespace

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
                         int batches, const SweepPoint& point, kernels::Device& device,
                         const TrainingPlan& plan, const comm::HostPlacement& placement) {
  comm::agree_on_success(group, [&] {
    const std::string shortfall = worker::memory_shortfall(
        workload, batch, batches, point.precision,
        ranks_per_device(placement.ranks_on_host,
                         kernels::device_record(plan.device_kind).devices_per_host()),
        device.free_memory_bytes(), update_strategy(plan, point, placement));
    if (!shortfall.empty()) throw PointFailure(FailureCause::does_not_fit, shortfall);
  });
}

std::string shortfall_of_every_point(const TrainingPlan& plan, kernels::Device& device,
                                     int world_rank) {
  std::string least;
  std::uint64_t least_bytes = std::numeric_limits<std::uint64_t>::max();
  for (const SweepPoint& point : plan.points) {
    // A rank outside a point says nothing of it; and the point's ranks that share this device
    // are not known before its group exists, so each is held to the least it could need: its
    // rank alone on the device.
    if (world_rank >= point.ranks) return {};
    const int batches = point_distinct_batches(plan, point);
    // Sharded at most over all of its ranks (hybrid sharding shards over fewer): the least.
    const worker::UpdateStrategy strategy = update_strategy(plan, point, {point.ranks, 0});
    const std::string shortfall =
        worker::memory_shortfall(*plan.workload, point.batch_per_rank, batches, point.precision, 1,
                                 device.free_memory_bytes(), strategy);
    if (shortfall.empty()) return {};
    const std::uint64_t bytes = worker::estimate_training_bytes(
        *plan.workload, point.batch_per_rank, batches, point.precision, strategy);
    if (bytes < least_bytes) least_bytes = bytes, least = shortfall;
  }
  return least;
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

// What a point's record says it was: the plan's settings and the point's own, with
// `measured_iterations` measured. A failed point's file keeps the launch's part of it.
results::RunConfiguration point_configuration(const TrainingPlan& plan, const SweepPoint& point,
                                              int measured_iterations) {
  const workloads::Workload& workload = *plan.workload;
  const worker::TrainingSchedule schedule = point_schedule(plan, point);
  return {
      .model = workload.name(),
      .model_family = workload.family(),
      .model_description = workload.description(),
      .parameter_count = workload.parameter_count(),
      .training_flops_per_sample = workload.training_flops_per_sample(),
      .tokens_per_sample = workload.tokens_per_sample(),
      .batch_per_rank = point.batch_per_rank,
      .warmup_iterations = plan.schedule.warmup_iterations,
      .measured_iterations = measured_iterations,
      .threads_per_rank = point.threads,
      .repeat = point.repeat,
      .comm_backend = comm::backend_record(plan.comm_backend).name,
      .gradient_dtype = comm::gradient_dtype_names(plan.grad_dtype),
      .device = kernels::device_record(plan.device_kind).name,
      .precision = kernels::precision_name(point.precision),
      .seed = point.seed,
      .learning_rate = point_learning_rate(plan, point),
      .optimizer = plan.optimizer,
      .sharding = point.sharding,
      .sharding_group = point.sharding == results::Sharding::none ? results::ShardingGroup::all
                                                                  : plan.sharding_group,
      .momentum = plan.optimizer == results::OptimizerKind::adamw ? adamw_beta1 : sgd_momentum,
      .weight_decay = plan.optimizer == results::OptimizerKind::adamw ? adamw_weight_decay : 0.0,
      .scaling = results::scaling_name(plan.scaling),
      .bucket_mb = plan.bucket_mb,
      .overlap = plan.overlap,
      .learning_rate_scaling = plan.learning_rate_scaling,
      .base_learning_rate = plan.learning_rate,
      .learning_rate_warmup_steps = schedule.learning_rate_warmup,
      .evaluate_every = schedule.evaluate_every,
      .target = plan.target ? std::optional(plan.target->goal) : std::nullopt,
  };
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

}  // namespace dlscale::coordinator
