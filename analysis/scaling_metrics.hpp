// The scaling metrics of a study, defined once for the measured points (scaling_study.cpp) and the
// predicted ones (scaling_prediction.cpp): efficiency against a baseline, and the gap 1 - E split
// by where the time went. Definitions: docs/workloads.md and docs/results-format.md (/study).
#pragma once

#include <string>

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

// Why a Karp-Flatt value e = (1/S' - 1/n') / (1 - 1/n') cannot be read as a serial fraction:
// above 1 the point is slower outright than its baseline (S' < 1); below 0 it scaled
// superlinearly (S' > n'). Empty for a value in [0, 1] or NaN (the baseline itself).
std::string karp_flatt_out_of_range_reason(double karp_flatt);

// A 95% interval wider than half the value it bounds: the measurement is too noisy to read.
inline constexpr double widest_readable_interval = 0.5;
bool interval_too_wide(double value, double low, double high);

}  // namespace dlscale::analysis
