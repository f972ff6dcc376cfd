// The scaling metrics of a study, defined once for the measured points (scaling_study.cpp) and the
// predicted ones (scaling_prediction.cpp): efficiency against a baseline, and the gap 1 - E split
// by where the time went. Definitions: docs/workloads.md and docs/results-format.md (/study).
#pragma once

namespace dlscale::analysis {

// E(n) = X(n)/X(p) * p/n with the throughput X = global batch / mean iteration time, against a
// baseline of p ranks. Weak scaling (the global batch grows with n) makes it T(p)/T(n).
double scaling_efficiency(double global_batch, double iteration_seconds, int ranks,
                          double baseline_global_batch, double baseline_iteration_seconds,
                          int baseline_ranks);

// The gap 1 - E as fractions of the iteration time T: exposed communication / T, waiting for
// stragglers / T, and the rest (other = 1 - E - communication - load_imbalance).
struct EfficiencyGap {
  double communication = 0;
  double load_imbalance = 0;
  double other = 0;
};

EfficiencyGap split_efficiency_gap(double efficiency, double iteration_seconds,
                                   double exposed_communication_seconds,
                                   double straggler_wait_seconds);

}  // namespace dlscale::analysis
