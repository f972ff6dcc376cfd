// Terminal formatting of an allreduce sweep. Lines that are not table rows start with '#', as in
// nccl-tests, so the rows can be pulled out with grep -v '^#'.
#include "printers/comm_sweep_printer.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "core/number_format.hpp"

namespace dlscale::printers {

namespace {

void format_fit(std::back_insert_iterator<std::string> line, const results::CommRecord& record) {
  const auto& fit = record.fit;
  if (std::isnan(fit.line_seconds_per_byte)) {
    fmt::format_to(line, "# alpha-beta fit: needs at least two message sizes\n");
    return;
  }
  fmt::format_to(line,
                 "# alpha-beta fit to the p50 times (least squares of the relative error, "
                 "{} sizes):\n",
                 record.sizes.size());
  fmt::format_to(line, "#   line            t(m) = {:.3f} us + m * {:.4g} s/B\n",
                 fit.line_intercept_seconds * 1e6, fit.line_seconds_per_byte);
  if (std::isnan(fit.beta_seconds_per_byte))
    fmt::format_to(line, "#   ring allreduce  alpha and beta need at least 2 ranks\n");
  else
    fmt::format_to(line,
                   "#   ring allreduce  alpha = {:.3f} us per step, beta = {:.4g} s/B "
                   "(1/beta = {:.3f} GB/s), with 2(n-1) = {} steps for n = {}\n",
                   fit.alpha_seconds * 1e6, fit.beta_seconds_per_byte,
                   1 / fit.beta_seconds_per_byte / 1e9, 2 * (record.ranks - 1), record.ranks);
  fmt::format_to(line, "#   fit quality     relative error {:.1f}% rms, {:.1f}% at worst\n",
                 fit.relative_rms_error * 100, fit.max_relative_error * 100);
}

void format_piecewise_fit(std::back_insert_iterator<std::string> line,
                          const results::PiecewiseAlphaBetaFit& piecewise, int ranks) {
  if (piecewise.pieces.empty()) return;
  fmt::format_to(line,
                 "# piecewise alpha-beta fit ({} piece{}, a line per range of sizes; "
                 "relative error {:.1f}% rms, {:.1f}% at worst):\n",
                 piecewise.pieces.size(), piecewise.pieces.size() == 1 ? "" : "s",
                 piecewise.relative_rms_error * 100, piecewise.max_relative_error * 100);
  for (const auto& piece : piecewise.pieces) {
    const auto& fit = piece.fit;
    fmt::format_to(line, "#   {:>9} - {:>9}  t(m) = {:.3f} us + m * {:.4g} s/B",
                   format_bytes(std::uint64_t(piece.min_bytes)),
                   format_bytes(std::uint64_t(piece.max_bytes)), fit.line_intercept_seconds * 1e6,
                   fit.line_seconds_per_byte);
    if (ranks > 1)
      fmt::format_to(line, "  alpha {:.3f} us, 1/beta {:.3f} GB/s", fit.alpha_seconds * 1e6,
                     fit.beta_seconds_per_byte > 0 ? 1 / fit.beta_seconds_per_byte / 1e9
                                                   : std::numeric_limits<double>::infinity());
    fmt::format_to(line, "  ({:.1f}% rms)\n", fit.relative_rms_error * 100);
  }
}

double best_busbw_gbps(const std::vector<results::CommSizeStatistics>& sizes) {
  double best = 0;
  for (const auto& size : sizes) best = std::max(best, size.busbw_gbps_p50);
  return best;
}

// Each kind of link alone: its p50 rows as comments (so that grep -v '^#' keeps only the main
// table), its fits, and one line comparing the two.
void format_links(std::back_insert_iterator<std::string> line, const results::CommRecord& record) {
  if (record.links.empty()) {
    if (record.ranks > 1)
      fmt::format_to(line, "# links: every hop of this sweep is {}\n",
                     record.node_count == 1              ? "intra-node (one host)"
                     : record.node_count == record.ranks ? "inter-node (one rank per host)"
                                                         : "of both kinds");
    return;
  }
  for (const auto& link : record.links) {
    const bool intra = link.link == "intra_node";
    fmt::format_to(line,
                   "#\n# {}: allreduce among {} {} rank(s) alone ({} communicator{} at "
                   "once)\n",
                   intra ? "intra-node" : "inter-node", link.ranks,
                   intra ? "same-host" : "one-per-host", link.communicators,
                   link.communicators == 1 ? "" : "s");
    fmt::format_to(line, "#{:>11} {:>10} {:>10} {:>10}\n", "size (B)", "p50 (us)", "p95 (us)",
                   "busbw p50");
    for (const auto& size : link.sizes)
      fmt::format_to(line, "#{:>11} {:>10.2f} {:>10.2f} {:>10.3f}\n", size.bytes,
                     size.seconds_p50 * 1e6, size.seconds_p95 * 1e6, size.busbw_gbps_p50);
    fmt::format_to(line, "#   one line: relative error {:.1f}% rms, {:.1f}% at worst\n",
                   link.fit.relative_rms_error * 100, link.fit.max_relative_error * 100);
    format_piecewise_fit(line, link.piecewise_fit, link.ranks);
  }
  fmt::format_to(line, "# bandwidth by link (best busbw p50):");
  for (std::size_t k = 0; k < record.links.size(); ++k)
    fmt::format_to(line, "{} {} {:.3f} GB/s", k == 0 ? "" : ",",
                   record.links[k].link == "intra_node" ? "intra-node" : "inter-node",
                   best_busbw_gbps(record.links[k].sizes));
  fmt::format_to(line, "\n");
}

}  // namespace

std::string format_comm_table(const results::CommRecord& record) {
  std::string out;
  auto line = std::back_inserter(out);
  fmt::format_to(line,
                 "# dlscale {} comm: allreduce, float32 sum in place, backend {}, {} rank{} "
                 "on {} host{}\n",
                 record.dlscale_version, record.backend, record.ranks, record.ranks == 1 ? "" : "s",
                 record.node_count, record.node_count == 1 ? "" : "s");
  fmt::format_to(line,
                 "# {} measured calls per size after {} warm-up; a call's time is its "
                 "slowest rank's; sizes are whole floats\n#\n",
                 record.measured_iterations, record.warmup_iterations);
  fmt::format_to(line,
                 "#{:>11} {:>13} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}\n",
                 "size", "count", "type", "redop", "time p50", "time p95", "algbw p50", "algbw p95",
                 "busbw p50", "busbw p95", "#wrong");
  fmt::format_to(
      line, "#{:>11} {:>13} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}\n", "(B)",
      "(elements)", "", "", "(us)", "(us)", "(GB/s)", "(GB/s)", "(GB/s)", "(GB/s)", "");
  for (const auto& size : record.sizes)
    fmt::format_to(line,
                   "{:>12} {:>13} {:>6} {:>6} {:>10.2f} {:>10.2f} {:>10.3f} {:>10.3f} "
                   "{:>10.3f} {:>10.3f} {:>7}\n",
                   size.bytes, size.count, "float", "sum", size.seconds_p50 * 1e6,
                   size.seconds_p95 * 1e6, size.algbw_gbps_p50, size.algbw_gbps_p95,
                   size.busbw_gbps_p50, size.busbw_gbps_p95, size.wrong_elements);
  const std::uint64_t wrong = std::accumulate(
      record.sizes.begin(), record.sizes.end(), std::uint64_t{0},
      [](std::uint64_t sum, const auto& size) { return sum + size.wrong_elements; });
  fmt::format_to(line, "#\n# wrong elements: {}{}\n", wrong,
                 wrong == 0 ? " (every sum exact)" : " (WRONG SUMS)");
  format_fit(line, record);
  format_piecewise_fit(line, record.piecewise_fit, record.ranks);
  format_links(line, record);
  return out;
}

}  // namespace dlscale::printers
