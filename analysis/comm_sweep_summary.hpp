// Rank 0's analysis of a `dlscale comm` sweep: per-size time statistics and bandwidths in both
// placements, the average bus bandwidth and the alpha-beta fits. Every derived number in a comm
// file is computed here, once.
#pragma once

#include <string>

#include "analysis/alpha_beta_fit.hpp"
#include "results/comm_record.hpp"

namespace dlscale::analysis {

// Fills the statistics of both placements' sizes (bytes, count and wrong_elements must be set)
// and the fits of `times` from its raw seconds of `ranks` ranks and `iterations` measured calls
// per size, with the collective's bus bandwidth factor and its model's hops (the fits' alpha and
// beta).
void summarize_sweep_times(results::SweepTimes& times, int ranks, int iterations,
                           double bus_bandwidth_factor, HopModel hops);

// nccl-tests' "Avg bus bandwidth": the mean busbw p50 over every size, out of place and in place.
double average_busbw_gbps(const results::SweepTimes& times);

}  // namespace dlscale::analysis
