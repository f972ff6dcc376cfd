// Rank 0's analysis across runs: speedup, efficiency with confidence intervals, the Karp-Flatt
// serial fraction, and where the lost efficiency went. Definitions: docs/results-format.md,
// section /study, after docs/workloads.md.
#pragma once

#include <string>
#include <vector>

#include "results/study_record.hpp"

namespace dlscale::analysis {

// Plain runs (scaling "none") keep their batch per rank, so across rank counts they compare as
// weak scaling.
std::string study_scaling(const results::RunConfiguration& configuration);

// The runs must share one workload and settings (see check_comparable in the merge command);
// the study takes only their noise scale and MFU from their summaries (NaN in a summary not
// computed), the rest from their timings.
// The precisions of `runs` in the order they first appear: the order the sweep ran them (fp32
// before bf16 where the user listed them so), not alphabetical.
std::vector<std::string> precisions_in_run_order(const std::vector<results::RunRecord>& runs);
// The --sharding strategies of the runs, in the order they first appear.
std::vector<std::string> shardings_in_run_order(const std::vector<results::RunRecord>& runs);
// The devices of `runs` in the order they first appear (a merged CPU and GPU study).
std::vector<std::string> devices_in_run_order(const std::vector<results::RunRecord>& runs);

// What one run contributes to its study (and to its verdict, run_verdict.hpp), from its
// measured iterations.
struct RunTimes {
  std::vector<double> iteration_seconds;  // slowest rank's step, per iteration
  double global_batch = 0;
  double exposed_communication = 0;   // mean over iterations of the fastest rank's allreduce
  double waiting_for_stragglers = 0;  // mean over iterations of max - mean compute
  int straggler_rank = 0;
};

RunTimes times_of(const results::RunRecord& run);

results::StudySummary analyze_study(const std::vector<results::RunRecord>& runs);

}  // namespace dlscale::analysis
