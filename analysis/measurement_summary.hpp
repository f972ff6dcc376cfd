// What the summary and the study say of a run's measurements, computed once from the gathered
// records: means and peaks over the measured window, energy in joules per step and per sample.
// Ranks that measured the same thing (a host's CPUs, a shared GPU) count once.
#pragma once

#include <string>
#include <vector>

#include "results/run_record.hpp"

namespace dlscale::analysis {

struct MeasurementHeadline {
  std::string name;
  std::string units;
  results::Headline headline = results::Headline::none;
  int sources = 0;  // distinct things measured (ranks, hosts or GPUs); 0 when absent everywhere
  std::string absent_reason;  // the first rank's, when absent everywhere
  double mean = 0;            // mean, over sources, of each one's mean over its samples
  double peak = 0;            // the largest sample of any source
  // energy: joules over the measured iterations, summed over sources, and per step and sample
  double joules = 0, joules_per_step = 0, joules_per_sample = 0;
};

// One entry for each measurement whose headline is not `none`, in the record's order.
std::vector<MeasurementHeadline> summarize_measurements(const results::RunRecord& record);

}  // namespace dlscale::analysis
