// The verdict of a run and of a study: shares of the iteration time from the study's own split
// (times_of), the MFU against the yardstick, and the two conditions that make the numbers
// unrepresentative.
#include "analysis/run_verdict.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "analysis/measurement_summary.hpp"
#include "analysis/scaling_study.hpp"

namespace dlscale::analysis {

const char* bound_name(Bound bound) {
  switch (bound) {
    case Bound::communication:
      return "communication";
    case Bound::stragglers:
      return "straggler";
    default:
      return "compute";
  }
}

bool trained_on_a_gpu(const results::RunRecord& record) {
  const auto& properties = record.environment.device_properties;
  return std::any_of(properties.begin(), properties.end(),
                     [](const auto& property) { return property.first == "gpu_name"; });
}

RunVerdict run_verdict(const results::RunRecord& record) {
  RunVerdict verdict;
  // A record whose timings were not kept (one made by hand) has no shares to split.
  const bool timed =
      record.ranks > 0 && record.iterations > record.configuration.warmup_iterations &&
      record.phase_seconds.size() == std::size_t(record.iterations) * record.ranks * phase_count;
  const RunTimes times = timed ? times_of(record) : RunTimes{};
  const double iteration_seconds =
      times.iteration_seconds.empty()
          ? 0
          : std::accumulate(times.iteration_seconds.begin(), times.iteration_seconds.end(), 0.0) /
                double(times.iteration_seconds.size());
  if (iteration_seconds > 0 && record.ranks > 1) {
    verdict.communication_share =
        std::clamp(times.exposed_communication / iteration_seconds, 0.0, 1.0);
    verdict.straggler_share = std::clamp(times.waiting_for_stragglers / iteration_seconds, 0.0,
                                         1.0 - verdict.communication_share);
  }
  verdict.compute_share = 1 - verdict.communication_share - verdict.straggler_share;
  // The largest share names the bound; compute wins a tie, as the thing a faster device fixes.
  if (verdict.communication_share > verdict.compute_share &&
      verdict.communication_share >= verdict.straggler_share)
    verdict.bound = Bound::communication;
  else if (verdict.straggler_share > verdict.compute_share)
    verdict.bound = Bound::stragglers;

  verdict.mean_gflops = results::mean_gflops_per_rank(record.summary.gflops_per_rank);
  const auto& environment = record.environment;
  verdict.yardstick_gflops = environment.device_gemm_gflops;
  verdict.model_flops_utilisation = record.summary.model_flops_utilisation;
  const double before = environment.device_gemm_gflops_before;
  const double after = environment.device_gemm_gflops_after;
  if (before > 0 && after > 0) {
    verdict.yardstick_change = (after - before) / before;
    verdict.yardstick_moved =
        std::abs(after - before) > yardstick_moved_fraction * std::max(before, after);
  }

  verdict.threads = record.configuration.threads_per_rank;
  for (const auto& m : summarize_measurements(record)) {
    if (m.sources == 0) continue;
    if (m.name == "process_allowed_cpus") verdict.allowed_cpus = m.mean;
    if (m.name == "process_cpu_cores") verdict.cores_used = m.mean;
  }
  // Cores used say nothing of a GPU run: its host thread may sleep while the device computes.
  const bool computes_on_host_cores = !trained_on_a_gpu(record);
  verdict.oversubscribed =
      (std::isfinite(verdict.allowed_cpus) && verdict.allowed_cpus < verdict.threads) ||
      (computes_on_host_cores && std::isfinite(verdict.cores_used) &&
       verdict.cores_used < least_cores_per_thread * verdict.threads);
  return verdict;
}

StudyVerdict study_verdict(const std::vector<results::RunRecord>& runs) {
  StudyVerdict study;
  for (const auto& run : runs) {
    const RunVerdict verdict = run_verdict(run);
    ++study.points;
    study.oversubscribed_points += verdict.oversubscribed;
    study.yardstick_moved_points += verdict.yardstick_moved;
    if (run.ranks >= study.largest_ranks) {
      study.largest_ranks = run.ranks;
      study.largest = verdict;
    }
  }
  return study;
}

}  // namespace dlscale::analysis
