// Terminal formatting of an allreduce sweep. Lines that are not table rows start with '#', as in
// nccl-tests, so the rows can be pulled out with grep -v '^#'.
#include "coordinator/comm_sweep_printer.hpp"

#include <cmath>
#include <iterator>
#include <numeric>

#include <fmt/format.h>

namespace dlscale::coordinator {

namespace {

void format_fit(std::back_insert_iterator<std::string> line, const results::CommRecord& record) {
  const auto& fit = record.fit;
  if (std::isnan(fit.line_seconds_per_byte)) {
    fmt::format_to(line, "# alpha-beta fit: needs at least two message sizes\n");
    return;
  }
  fmt::format_to(line, "# alpha-beta fit to the p50 times (least squares of the relative error, "
                       "{} sizes):\n", record.sizes.size());
  fmt::format_to(line, "#   line            t(m) = {:.3f} us + m * {:.4g} s/B\n",
                 fit.line_intercept_seconds * 1e6, fit.line_seconds_per_byte);
  if (std::isnan(fit.beta_seconds_per_byte))
    fmt::format_to(line, "#   ring allreduce  alpha and beta need at least 2 ranks\n");
  else
    fmt::format_to(line, "#   ring allreduce  alpha = {:.3f} us per step, beta = {:.4g} s/B "
                         "(1/beta = {:.3f} GB/s), with 2(n-1) = {} steps for n = {}\n",
                   fit.alpha_seconds * 1e6, fit.beta_seconds_per_byte,
                   1 / fit.beta_seconds_per_byte / 1e9, 2 * (record.ranks - 1), record.ranks);
  fmt::format_to(line, "#   fit quality     relative error {:.1f}% rms, {:.1f}% at worst\n",
                 fit.relative_rms_error * 100, fit.max_relative_error * 100);
}

}  // namespace

std::string format_comm_table(const results::CommRecord& record) {
  std::string out;
  auto line = std::back_inserter(out);
  fmt::format_to(line, "# dlscale {} comm: allreduce, float32 sum in place, backend {}, {} rank{} "
                       "on {} host{}\n",
                 record.dlscale_version, record.backend, record.ranks,
                 record.ranks == 1 ? "" : "s", record.node_count,
                 record.node_count == 1 ? "" : "s");
  fmt::format_to(line, "# {} measured calls per size after {} warm-up; a call's time is its "
                       "slowest rank's; sizes are whole floats\n#\n",
                 record.measured_iterations, record.warmup_iterations);
  fmt::format_to(line, "#{:>11} {:>13} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}\n",
                 "size", "count", "type", "redop", "time p50", "time p95", "algbw p50",
                 "algbw p95", "busbw p50", "busbw p95", "#wrong");
  fmt::format_to(line, "#{:>11} {:>13} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}\n",
                 "(B)", "(elements)", "", "", "(us)", "(us)", "(GB/s)", "(GB/s)", "(GB/s)",
                 "(GB/s)", "");
  for (const auto& size : record.sizes)
    fmt::format_to(line, "{:>12} {:>13} {:>6} {:>6} {:>10.2f} {:>10.2f} {:>10.3f} {:>10.3f} "
                         "{:>10.3f} {:>10.3f} {:>7}\n",
                   size.bytes, size.count, "float", "sum", size.seconds_p50 * 1e6,
                   size.seconds_p95 * 1e6, size.algbw_gbps_p50, size.algbw_gbps_p95,
                   size.busbw_gbps_p50, size.busbw_gbps_p95, size.wrong_elements);
  const std::uint64_t wrong =
      std::accumulate(record.sizes.begin(), record.sizes.end(), std::uint64_t{0},
                      [](std::uint64_t sum, const auto& size) { return sum + size.wrong_elements; });
  fmt::format_to(line, "#\n# wrong elements: {}{}\n", wrong,
                 wrong == 0 ? " (every sum exact)" : " (WRONG SUMS)");
  format_fit(line, record);
  return out;
}

}  // namespace dlscale::coordinator
