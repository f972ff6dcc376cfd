// A results file in memory: where it came from, its runs (the points of a rank sweep, or the
// runs of merged jobs) and the scaling analysis across them. docs/results-format.md describes
// the same as it appears on disk.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/enum_names.hpp"
#include "core/errors.hpp"
#include "results/run_record.hpp"

namespace dlscale::results {

// What wrote the file: the root attributes.
struct FileOrigin {
  std::string dlscale_version;
  std::string git_commit;
  std::string command_line;
  std::string start_time_utc;
};

// One run's place in the study, against the baseline: the runs with the fewest ranks on the same
// device, at the same precision, sharding and thread count, their repeats pooled. /study stores
// each member that has an entry in results/study_columns.hpp, its column's one home.
struct StudyPoint {
  int ranks = 0;
  std::string device = "cpu";      // what it ran on: cpu or cuda (a merged study may hold both)
  std::string precision = "fp32";  // what the device computed in
  std::string sharding = "none";   // --sharding: none, optimizer or gradients
  int threads = 1;                 // per rank
  int repeat = 0;                  // which run of this configuration, from 0
  std::string run;                 // its group name in /runs
  double iteration_seconds = 0, iteration_seconds_ci_low = 0, iteration_seconds_ci_high = 0;
  double throughput_samples_per_second = 0;
  // X(n) in tokens, for a language model (NaN for others), and the run's MFU against the GEMM
  // measured on its device (NaN without one); schema 10.
  double tokens_per_second = nan;
  double model_flops_utilisation = nan;
  double speedup = 0;
  double efficiency = 0, efficiency_ci_low = 0, efficiency_ci_high = 0;
  double karp_flatt = 0;                                                // NaN at the baseline
  double gap_communication = 0, gap_load_imbalance = 0, gap_other = 0;  // fractions of T(n)
  int straggler_rank = 0;
  std::string straggler_host;
  // Joules per sample of each energy measurement that was measured (name, J/sample).
  std::vector<std::pair<std::string, double>> energy_joules_per_sample;

  // Convergence (docs/scaling-model.md, "Goodput"); NaN where not measured. B is the point's
  // global batch, B0 the baseline's.
  int global_batch = 0;
  double noise_scale = nan;  // this run's own B_noise (two or more ranks)
  // The model's statistical efficiency (B_noise + B0) / (B_noise + B), with the B_noise of the
  // configuration's run at the smallest global batch that has one, and goodput: throughput x it.
  double noise_scale_used = nan;
  double statistical_efficiency_model = nan;
  double goodput_samples_per_second = nan;
  // Training to a target: samples and training seconds to it, the measured statistical
  // efficiency (the baseline's samples to target / this point's) and the speedup in time to it.
  double samples_to_target = nan;
  double seconds_to_target = nan;
  double statistical_efficiency = nan;
  double time_to_target_speedup = nan;
  // What the evaluation spacing allows of those two: each run crossed its target somewhere after
  // the evaluation before the one that saw it, so the ratios lie anywhere between these (an
  // infinite high end where a point met its target at its first evaluation).
  double statistical_efficiency_low = nan, statistical_efficiency_high = nan;
  double time_to_target_speedup_low = nan, time_to_target_speedup_high = nan;
  // The measured iterations this run's own B_noise came from (those that read the norms), of its
  // measured iterations.
  int noise_scale_iterations = 0;
  int measured_iterations = 0;

 private:
  static constexpr double nan = std::numeric_limits<double>::quiet_NaN();
};

// The repeats of one configuration (device, precision, sharding, threads, ranks): their mean and
// spread.
struct RepeatSpread {
  std::string device = "cpu";
  std::string precision = "fp32";
  std::string sharding = "none";
  int threads = 1;
  int ranks = 0;
  int repeats = 0;
  double iteration_seconds_mean = 0, iteration_seconds_std = 0;  // std: sample, n - 1; 0 for one
  double iteration_seconds_min = 0, iteration_seconds_max = 0;
  double efficiency_mean = 0, efficiency_std = 0;
  double throughput_samples_per_second_mean = 0;
};

struct StudySummary {
  std::string scaling;
  int baseline_ranks = 0;
  // Precisions in the order the sweep ran them, then by thread count, rank count, repeat.
  std::vector<StudyPoint> points;
  std::vector<RepeatSpread> configurations;  // in the same order
};

// A sweep point that could not be measured, its cause, and why in words: "out of memory (estimate
// ...)", "diverged at iteration N (...)", "exceeded --point-timeout ...". Kept, not dropped.
struct FailedPoint {
  int ranks = 0;
  std::string precision = "fp32";
  int threads = 1;
  int repeat = 0;
  int batch_per_rank = 0;
  std::uint64_t seed = 0;
  FailureCause cause = FailureCause::unknown;
  std::string reason;
  std::string sharding = "none";  // --sharding (schema 9)
};

// The causes' names in a results file (failed_points/cause).
inline constexpr EnumNames<FailureCause, 7> failure_cause_names{
    {"does_not_fit", "out_of_memory", "diverged", "timed_out", "job_left_no_results", "unknown",
     "target_not_reached"}};
inline const char* failure_cause_name(FailureCause cause) { return failure_cause_names(cause); }

// A node-sharing probe (worker/node_sharing_probe.hpp) on a rank count that the sweep did not
// train: compute-only passes on the first `ranks` ranks of the launch, so that `dlscale predict`
// knows how compute slows as the nodes fill beyond the largest trained point.
struct NodeSharingProbe {
  int ranks = 0;
  std::string precision = "fp32";  // the sweep baseline's
  int threads = 1;                 // per rank
  int batch_per_rank = 0;
  int ranks_per_node = 0;     // the most of its ranks on one host
  double shared_seconds = 0;  // one pass, every rank at once: the mean of the ranks' medians
  double alone_seconds = 0;   // one pass on rank 0 alone: its median
  double probe_seconds = 0;   // the probe's wall time on rank 0, set-up included: its cost
};

// The probe's measurement names: the probe writes them, the driver and `dlscale predict` read
// them from the generic measurement channel.
inline constexpr const char* node_sharing_alone_seconds = "node_sharing_alone_seconds";
inline constexpr const char* node_sharing_shared_seconds = "node_sharing_shared_seconds";
inline constexpr const char* node_sharing_probe_seconds = "node_sharing_probe_seconds";

struct ResultsFile {
  FileOrigin origin;
  std::string status = "complete";  // see schema::status
  std::vector<RunRecord> runs;
  std::optional<StudySummary> study;  // written whenever there are runs
  std::vector<FailedPoint> failed_points;
  // The settings of the launch its failed points belong to (attributes of /failed_points, schema
  // 8): what merge checks a failed point against before it joins a study. Each row holds the
  // point's own ranks, precision, threads, batch and seed; absent in earlier files.
  std::optional<RunConfiguration> failed_points_configuration;
  std::vector<NodeSharingProbe> node_sharing_probes;  // by rank count
};

// The group name of run `index` in /runs.
std::string run_group_name(std::size_t index);

}  // namespace dlscale::results
