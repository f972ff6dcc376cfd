#include "analysis/scaling_metrics.hpp"

namespace dlscale::analysis {

double scaling_efficiency(double global_batch, double iteration_seconds, int ranks,
                          double baseline_global_batch, double baseline_iteration_seconds,
                          int baseline_ranks) {
  return (global_batch / iteration_seconds) / (baseline_global_batch / baseline_iteration_seconds) *
         double(baseline_ranks) / ranks;
}

EfficiencyGap split_efficiency_gap(double efficiency, double iteration_seconds,
                                   double exposed_communication_seconds,
                                   double straggler_wait_seconds) {
  EfficiencyGap gap;
  gap.communication = exposed_communication_seconds / iteration_seconds;
  gap.load_imbalance = straggler_wait_seconds / iteration_seconds;
  gap.other = 1 - efficiency - gap.communication - gap.load_imbalance;
  return gap;
}

}  // namespace dlscale::analysis
