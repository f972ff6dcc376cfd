// The sweep: points in turn, each on its group of ranks, then node-sharing probes on the rank
// counts beyond them; rank 0 prints each point, keeps it in the results file and analyses the
// study. Every decision that ends the run is agreed on by all ranks, so no rank waits in a
// collective that another has left.
#include "coordinator/sweep.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "comm/collective_agreement.hpp"
#include "comm/mpi_check.hpp"
#include "comm/rank_group.hpp"
#include "coordinator/point.hpp"
#include "coordinator/probe_beyond_sweep.hpp"
#include "coordinator/progress_line.hpp"
#include "coordinator/results_journal.hpp"
#include "coordinator/stall_watchdog.hpp"
#include "coordinator/stop_signals.hpp"
#include "core/errors.hpp"
#include "printers/summary_printer.hpp"
#include "results/schema.hpp"
#include "worker/node_sharing_probe.hpp"
#include "worker/slurm_allocation.hpp"

namespace dlscale::coordinator {

namespace {

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

// What every run of this launch shares: provenance, libraries, the device and the job.
results::RunEnvironment launch_environment(kernels::Device& device, const comm::MpiSession& mpi,
                                           const results::FileOrigin& origin) {
  results::RunEnvironment environment;
  environment.dlscale_version = origin.dlscale_version;
  environment.git_commit = origin.git_commit;
  environment.command_line = origin.command_line;
  environment.start_time_utc = origin.start_time_utc;
  environment.mpi_library_version = comm::mpi_library_version();
  environment.device_properties = device.properties();
  // The library the device's GEMMs run on, as the device describes it.
  for (const auto& [name, value] : environment.device_properties)
    if (name == kernels::blas_property) environment.blas = value;
  environment.launch_world_size = mpi.world_size();
  if (const auto slurm = worker::slurm_allocation()) environment.slurm = *slurm;
  return environment;
}

// One launch's sweep on this rank, and what its points and probes share.
class Sweep {
 public:
  Sweep(TrainingPlan plan, const comm::MpiSession& mpi, const results::FileOrigin& origin)
      : plan_(std::move(plan)),
        mpi_(mpi),
        coordinator_rank_(mpi.world_rank() == 0),
        relay_(mpi.world()),
        device_(std::move(plan_.device)),
        device_made_with_(plan_.device_settings),
        progress_(coordinator_rank_) {
    // The file's name is taken before any training: a clash, an unwritable directory or a full
    // disk costs seconds, not a run. From here on the file holds every finished point.
    comm::agree_on_success(mpi.world(), [&] {
      if (!coordinator_rank_) return;
      int most_ranks = 0;
      for (const auto& point : plan_.points) most_ranks = std::max(most_ranks, point.ranks);
      journal_.emplace(
          plan_.output_path, plan_.overwrite, origin,
          expected_results_bytes(point_count(), most_ranks, plan_.schedule.total_iterations()));
    });
    // A stalled rank ends the job from the watchdog's thread, after the file says so.
    watchdog_.emplace(
        mpi.world(),
        StallSettings{.timeout_seconds = plan_.stall_timeout_seconds, .exit_status = exit_stalled},
        [this](const std::string& diagnosis) {
          std::string kept;
          if (journal_)
            kept = fmt::format("; the finished points are kept in {}",
                               journal_->finish_for_exit("interrupted: " + diagnosis).string());
          spdlog::error("{}{}", diagnosis, kept);
        });
    environment_ = launch_environment(*device_, mpi, origin);
  }

  // Every point, then the probes beyond them, until a stop signal. A launch the backend cannot
  // serve ends here, on every rank of the point, with one line; the file keeps the points
  // finished before it, or is removed where there are none.
  void run() {
    try {
      for (int index = 0; index < point_count() && stop_signal_ == 0; ++index) {
        const comm::RankGroup group(mpi_.world(), plan_.points[index].ranks);
        if (group.contains_this_rank()) run_point(index, group.comm());
        wait_for_the_others();
      }
      // Beyond the sweep: how compute slows as the launch's nodes fill, without training there.
      if (plan_.probe_schedule.enabled &&
          worker::probe_pass_budget(plan_.probe_schedule, plan_.schedule.total_iterations()) > 0)
        for (int ranks : probe_only_rank_counts(plan_.points, mpi_.world_size())) {
          if (stop_signal_ != 0) break;
          const comm::RankGroup group(mpi_.world(), ranks);
          if (group.contains_this_rank()) probe(ranks, group.comm());
          wait_for_the_others();
        }
    } catch (const UserError& error) {
      if (coordinator_rank_) {
        const std::filesystem::path kept = journal_->abandon(error.what());
        if (!kept.empty()) spdlog::info("the finished points are kept in {}", kept.string());
      }
      throw;
    }
    relay_.finish();
  }

  // Rank 0 finishes the file and prints the study; every rank returns the exit status.
  int finish() {
    int status = 0;
    if (coordinator_rank_) status = finish_results();
    DLSCALE_MPI_CHECK(MPI_Bcast(&status, 1, MPI_INT, 0, mpi_.world()));
    return status;
  }

 private:
  int point_count() const { return int(plan_.points.size()); }

  // Ranks outside a point or probe wait here, asleep, passing on a stop signal they receive; then
  // all agree whether one came.
  void wait_for_the_others() {
    comm::quiet_barrier(mpi_.world(), [&] { relay_.forward(); });
    stop_signal_ = agreed_stop_signal(mpi_.world());
  }

  void run_point(int index, MPI_Comm group) {
    const SweepPoint& point = plan_.points[index];
    use_device_of(point, device_, device_made_with_, plan_.device_kind);
    progress_.begin_point(index + 1, point_count(), point.ranks,
                          point_schedule(plan_, point).total_iterations());
    try {
      auto record =
          train_point(plan_, point, *device_, group, environment_, progress_, *watchdog_, relay_);
      if (!record) return;
      if (plan_.quiet) {
        std::fputs(printers::format_point_line(*record).c_str(), stdout);
      } else {
        std::fputs(printers::format_summary(*record, &absent_reasons_said_).c_str(), stdout);
        std::fputs("\n", stdout);
      }
      std::fflush(stdout);
      if (record->partial_reason.empty()) ++completed_points_;
      journal_->add_run(std::move(*record));
    } catch (const PointFailure& failure) {
      progress_.end_point();
      if (!coordinator_rank_) return;
      journal_->add_failed_point(
          {point.ranks, kernels::precision_name(point.precision), point.threads, point.repeat,
           point.batch_per_rank, point.seed, failure.cause(), failure.what(),
           results::sharding_names(point.sharding)},
          point_configuration(plan_, point, 0));
      spdlog::warn(
          "point {} of {} ({} rank(s) x {} thread(s), {}{}) failed: {}; going on", index + 1,
          point_count(), point.ranks, point.threads, kernels::precision_name(point.precision),
          point.repeat > 0 ? fmt::format(", repeat {}", point.repeat) : "", failure.what());
    }
  }

  void probe(int ranks, MPI_Comm group) {
    use_device_of(baseline_point(plan_.points), device_, device_made_with_, plan_.device_kind);
    try {
      progress_.begin_point(0, 1, ranks, 0);
      const auto probe = probe_without_training(plan_, *device_, group, progress_, *watchdog_);
      progress_.end_point();
      if (!probe) return;
      spdlog::info(
          "node-sharing probe on {} ranks ({} on a node), no training: one pass takes {:.3g} s, "
          "{:.2f}x the {:.3g} s of one rank alone ({:.1f} s)",
          probe->ranks, probe->ranks_per_node, probe->shared_seconds,
          probe->shared_seconds / probe->alone_seconds, probe->alone_seconds, probe->probe_seconds);
      journal_->add_node_sharing_probe(*probe);
    } catch (const PointFailure& failure) {
      if (coordinator_rank_)
        spdlog::warn("no node-sharing probe on {} ranks: {}", ranks, failure.what());
    }
  }

  // On rank 0: the file finished with its status, the study printed, and the exit status, with
  // the line that explains it.
  int finish_results() {
    const std::string file_status = stop_signal_ == 0
                                        ? std::string(results::schema::status_complete)
                                        : "interrupted: " + stop_signal_name(stop_signal_);
    const results::ResultsFile& results = journal_->finish(file_status);
    if (point_count() > 1 && stop_signal_ == 0) {
      if (!plan_.quiet)
        std::fputs(printers::format_study(results.study.value_or(results::StudySummary{}),
                                          results.failed_points)
                       .c_str(),
                   stdout);
      std::fputs(printers::format_study_verdict(results.runs).c_str(), stdout);
    }
    fmt::print("results         {}\n", journal_->location().string());
    std::fflush(stdout);
    const SweepOutcome outcome{.stop_signal = stop_signal_,
                               .replicas_differ = std::any_of(
                                   results.runs.begin(), results.runs.end(),
                                   [](const auto& r) { return !r.summary.parameters_identical; }),
                               .results_rescued = journal_->rescued(),
                               .failed_points = int(results.failed_points.size())};
    const bool partial = !results.runs.empty() && !results.runs.back().partial_reason.empty();
    if (outcome.stop_signal != 0)
      spdlog::error(
          "interrupted by {}: kept {} completed point(s) of {}{} in {}",
          stop_signal_name(stop_signal_), completed_points_, point_count(),
          partial ? " and the measured iterations of the one under way (marked partial)" : "",
          journal_->location().string());
    else if (outcome.replicas_differ)
      spdlog::error(
          "parameters differ between ranks after training: data-parallel replicas diverged");
    else if (!outcome.results_rescued && outcome.failed_points > 0)
      spdlog::error(
          "{} of {} sweep point(s) could not be measured; kept in the results file with the "
          "reason",
          outcome.failed_points, point_count());
    return exit_status(outcome);
  }

  TrainingPlan plan_;
  const comm::MpiSession& mpi_;
  const bool coordinator_rank_;
  StopSignalRelay relay_;
  std::unique_ptr<kernels::Device> device_;
  kernels::DeviceSettings device_made_with_;
  std::optional<ResultsJournal> journal_;  // on rank 0
  std::optional<StallWatchdog> watchdog_;  // made once the journal can keep what is finished
  results::RunEnvironment environment_;
  ProgressLine progress_;
  // Each absent measurement's reason is said once per launch, by the first point it is absent in.
  std::vector<std::string> absent_reasons_said_;
  int stop_signal_ = 0;
  int completed_points_ = 0;
};

}  // namespace

int exit_status(const SweepOutcome& outcome) {
  if (outcome.stop_signal != 0) return 128 + outcome.stop_signal;
  if (outcome.replicas_differ) return 1;
  if (outcome.results_rescued) return 1;  // the results are kept, but not where the user asked
  if (outcome.failed_points > 0) return exit_some_points_failed;
  return 0;
}

int run_training_plan(TrainingPlan plan, const comm::MpiSession& mpi,
                      const results::FileOrigin& origin) {
  install_stop_signal_handlers();
  Sweep sweep(std::move(plan), mpi, origin);
  sweep.run();
  return sweep.finish();
}

}  // namespace dlscale::coordinator
