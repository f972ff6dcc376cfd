// Metric definitions (docs/communication.md):
//  - a call's time is the maximum over ranks: the collective is done when its last rank is;
//  - p50 and p95 over the measured calls of a size (analysis/statistics.hpp quantiles);
//  - algbw = bytes / time / 1e9, busbw = algbw * 2(n-1)/n, as nccl-tests defines them;
//  - the alpha-beta fits, one line and piecewise, go through the p50 times
//    (analysis/alpha_beta_fit.hpp).
#include "analysis/comm_sweep_summary.hpp"

#include <algorithm>
#include <vector>

#include "analysis/alpha_beta_fit.hpp"
#include "analysis/ring_allreduce.hpp"
#include "analysis/statistics.hpp"

namespace dlscale::analysis {

void summarize_comm_sweep(results::CommRecord& record) {
  const double bus_factor = allreduce_bus_factor(record.ranks);
  std::vector<double> bytes, p50_seconds;
  for (std::size_t s = 0; s < record.sizes.size(); ++s) {
    std::vector<double> call_seconds;
    for (int i = 0; i < record.measured_iterations; ++i) {
      double slowest = 0;
      for (int r = 0; r < record.ranks; ++r)
        slowest = std::max(slowest, record.call_seconds(s, i, r));
      call_seconds.push_back(slowest);
    }
    auto& size = record.sizes[s];
    size.seconds_p50 = quantile(call_seconds, 0.5);
    size.seconds_p95 = quantile(call_seconds, 0.95);
    size.algbw_gbps_p50 = double(size.bytes) / size.seconds_p50 / 1e9;
    size.algbw_gbps_p95 = double(size.bytes) / size.seconds_p95 / 1e9;
    size.busbw_gbps_p50 = size.algbw_gbps_p50 * bus_factor;
    size.busbw_gbps_p95 = size.algbw_gbps_p95 * bus_factor;
    bytes.push_back(double(size.bytes));
    p50_seconds.push_back(size.seconds_p50);
  }
  record.fit = fit_alpha_beta(bytes, p50_seconds, record.ranks);
  record.piecewise_fit = fit_piecewise_alpha_beta(bytes, p50_seconds, record.ranks);
}

results::LinkSweep link_sweep_of(results::CommRecord sweep, const std::string& link,
                                 int communicators) {
  summarize_comm_sweep(sweep);
  return {link,
          sweep.ranks,
          communicators,
          std::move(sweep.seconds),
          std::move(sweep.sizes),
          sweep.fit,
          std::move(sweep.piecewise_fit)};
}

}  // namespace dlscale::analysis
