// Metric definitions (docs/communication.md):
//  - a call's time is the maximum over ranks: the collective is done when its last rank is;
//  - mean, min, max, p50 and p95 over the measured calls of a size (analysis/statistics.hpp
//    quantiles);
//  - algbw = bytes / time / 1e9, busbw = algbw * the collective's factor, as nccl-tests defines
//    them (2(n-1)/n for an allreduce);
//  - the alpha-beta fits, one line and piecewise, go through the in-place p50 times
//    (analysis/alpha_beta_fit.hpp).
#include "analysis/comm_sweep_summary.hpp"

#include <algorithm>
#include <vector>

#include "analysis/statistics.hpp"

namespace dlscale::analysis {

namespace {

// The statistics of each size from `seconds` [size][iteration][rank].
void summarize_placement(std::vector<results::CommSizeStatistics>& sizes,
                         const std::vector<double>& seconds, int ranks, int iterations,
                         double bus_bandwidth_factor) {
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    std::vector<double> call_seconds;
    for (int i = 0; i < iterations; ++i) {
      double slowest = 0;
      for (int r = 0; r < ranks; ++r)
        slowest = std::max(slowest, results::call_seconds(seconds, iterations, ranks, s, i, r));
      call_seconds.push_back(slowest);
    }
    auto& size = sizes[s];
    size.seconds_p50 = quantile(call_seconds, 0.5);
    size.seconds_p95 = quantile(call_seconds, 0.95);
    size.seconds_mean = mean(call_seconds);
    size.seconds_min = *std::min_element(call_seconds.begin(), call_seconds.end());
    size.seconds_max = *std::max_element(call_seconds.begin(), call_seconds.end());
    size.algbw_gbps_p50 = double(size.bytes) / size.seconds_p50 / 1e9;
    size.algbw_gbps_p95 = double(size.bytes) / size.seconds_p95 / 1e9;
    size.busbw_gbps_p50 = size.algbw_gbps_p50 * bus_bandwidth_factor;
    size.busbw_gbps_p95 = size.algbw_gbps_p95 * bus_bandwidth_factor;
  }
}

}  // namespace

void summarize_sweep_times(results::SweepTimes& times, int ranks, int iterations,
                           double bus_bandwidth_factor, HopModel hops) {
  summarize_placement(times.sizes, times.seconds, ranks, iterations, bus_bandwidth_factor);
  summarize_placement(times.out_of_place_sizes, times.out_of_place_seconds, ranks, iterations,
                      bus_bandwidth_factor);
  std::vector<double> bytes, p50_seconds;
  for (const auto& size : times.sizes) {
    bytes.push_back(double(size.bytes));
    p50_seconds.push_back(size.seconds_p50);
  }
  times.fit = fit_alpha_beta(bytes, p50_seconds, hops);
  times.piecewise_fit = fit_piecewise_alpha_beta(bytes, p50_seconds, hops);
}

double average_busbw_gbps(const results::SweepTimes& times) {
  std::vector<double> busbw;
  for (const auto* placement : {&times.out_of_place_sizes, &times.sizes})
    for (const auto& size : *placement) busbw.push_back(size.busbw_gbps_p50);
  return mean(busbw);
}

}  // namespace dlscale::analysis
