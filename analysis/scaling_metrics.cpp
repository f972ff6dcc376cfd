#include "analysis/scaling_metrics.hpp"

#include <cmath>

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

std::string karp_flatt_out_of_range_reason(double karp_flatt) {
  if (karp_flatt > 1)
    return "above 1: the point is slower than its baseline outright (speedup against it below "
           "1), so no serial fraction explains it";
  if (karp_flatt < 0)
    return "below 0: the point scaled superlinearly (faster per rank than its baseline, a "
           "cache effect or noise), so no serial fraction explains it";
  return "";
}

bool interval_too_wide(double value, double low, double high) {
  return high - low > widest_readable_interval * std::abs(value);
}

}  // namespace dlscale::analysis
