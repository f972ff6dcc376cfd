// Terminal formatting of a sweep's tables. Lines that are not table rows start with '#', as in
// nccl-tests, so the rows can be pulled out with grep -v '^#'.
#include "printers/comm_sweep_printer.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "analysis/alpha_beta_fit.hpp"
#include "core/number_format.hpp"

namespace dlscale::printers {

namespace {

using Line = std::back_insert_iterator<std::string>;

std::vector<double> p50_seconds(const std::vector<results::CommSizeStatistics>& sizes) {
  std::vector<double> seconds;
  for (const auto& size : sizes) seconds.push_back(size.seconds_p50);
  return seconds;
}

// The per-hop line of a fit, or why its alpha is no latency.
void format_hops(Line line, const results::CommTable& table, int ranks) {
  const auto& fit = table.times.fit;
  const std::vector<double> seconds = p50_seconds(table.times.sizes);
  switch (analysis::alpha_meaning(fit, seconds)) {
    case analysis::AlphaMeaning::negative:
      fmt::format_to(
          line,
          "#   {:<20} not a latency: alpha = {:.3f} us per step is below zero (a collapse "
          "of bandwidth at large sizes pulls the line down; the piecewise fit below "
          "holds its lines at or above zero)\n",
          "alpha", fit.alpha_seconds * 1e6);
      break;
    case analysis::AlphaMeaning::above_smallest_time:
      fmt::format_to(line,
                     "#   {:<20} not a latency: alpha = {:.3f} us per step is above the smallest "
                     "measured time, {:.3f} us (a collapse of bandwidth at large sizes lifts the "
                     "line; see the piecewise fit below)\n",
                     "alpha", fit.alpha_seconds * 1e6,
                     *std::min_element(seconds.begin(), seconds.end()) * 1e6);
      break;
    case analysis::AlphaMeaning::latency:
      fmt::format_to(line, "#   {:<20} {:.3f} us per step\n", "alpha", fit.alpha_seconds * 1e6);
      break;
    case analysis::AlphaMeaning::no_alpha:
      fmt::format_to(line, "#   {:<20} alpha and beta need at least 2 ranks\n",
                     table.collective + " model");
      return;
  }
  fmt::format_to(line, "#   {:<20} {:.4g} s/B (1/beta = {:.3f} GB/s)\n", "beta",
                 fit.beta_seconds_per_byte, 1 / fit.beta_seconds_per_byte / 1e9);
  fmt::format_to(line, "#   {:<20} t = {:g} alpha + {:.4g} m beta for n = {}\n",
                 table.collective + " model", table.latency_steps, table.bus_bandwidth_factor,
                 ranks);
}

void format_fit(Line line, const results::CommTable& table, int ranks) {
  const auto& fit = table.times.fit;
  if (std::isnan(fit.line_seconds_per_byte)) {
    fmt::format_to(line, "# alpha-beta fit: needs at least two message sizes\n");
    return;
  }
  fmt::format_to(line,
                 "# alpha-beta fit to the in-place p50 times (least squares of the relative "
                 "error, {} sizes):\n",
                 table.times.sizes.size());
  fmt::format_to(line, "#   {:<20} t(m) = {:.3f} us + m * {:.4g} s/B\n", "line",
                 fit.line_intercept_seconds * 1e6, fit.line_seconds_per_byte);
  format_hops(line, table, ranks);
  fmt::format_to(line, "#   {:<20} relative error {:.1f}% rms, {:.1f}% at worst\n", "fit quality",
                 fit.relative_rms_error * 100, fit.max_relative_error * 100);
}

void format_piecewise_fit(Line line, const results::PiecewiseAlphaBetaFit& piecewise, int ranks) {
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

std::uint64_t wrong_elements(const std::vector<results::CommSizeStatistics>& sizes) {
  return std::accumulate(
      sizes.begin(), sizes.end(), std::uint64_t{0},
      [](std::uint64_t sum, const auto& size) { return sum + size.wrong_elements; });
}

// Each kind of link alone: its in-place p50 rows as comments (so that grep -v '^#' keeps only the
// main tables), its fits, and one line comparing the two.
void format_links(Line line, const results::CommTable& table) {
  if (table.links.empty()) return;
  for (const auto& link : table.links) {
    const bool intra = link.link == "intra_node";
    fmt::format_to(line, "#\n# {}: {} among {} {} rank(s) alone ({} communicator{} at once)\n",
                   intra ? "intra-node" : "inter-node", table.collective, link.ranks,
                   intra ? "same-host" : "one-per-host", link.communicators,
                   link.communicators == 1 ? "" : "s");
    fmt::format_to(line, "#{:>11} {:>10} {:>10} {:>10}\n", "size (B)", "p50 (us)", "p95 (us)",
                   "busbw p50");
    for (const auto& size : link.times.sizes)
      fmt::format_to(line, "#{:>11} {:>10.2f} {:>10.2f} {:>10.3f}\n", size.bytes,
                     size.seconds_p50 * 1e6, size.seconds_p95 * 1e6, size.busbw_gbps_p50);
    fmt::format_to(line, "#   one line: relative error {:.1f}% rms, {:.1f}% at worst\n",
                   link.times.fit.relative_rms_error * 100,
                   link.times.fit.max_relative_error * 100);
    format_piecewise_fit(line, link.times.piecewise_fit, link.ranks);
  }
  fmt::format_to(line, "# bandwidth by link (best in-place busbw p50):");
  for (std::size_t k = 0; k < table.links.size(); ++k)
    fmt::format_to(line, "{} {} {:.3f} GB/s", k == 0 ? "" : ",",
                   table.links[k].link == "intra_node" ? "intra-node" : "inter-node",
                   best_busbw_gbps(table.links[k].times.sizes));
  fmt::format_to(line, "\n");
}

// One placement's columns of a row: times (us), bandwidths at the p50 time (GB/s), #wrong.
void format_placement(Line line, const results::CommSizeStatistics& size) {
  fmt::format_to(line, "  {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>8.3f} {:>8.3f} {:>7}",
                 size.seconds_p50 * 1e6, size.seconds_p95 * 1e6, size.seconds_mean * 1e6,
                 size.seconds_min * 1e6, size.seconds_max * 1e6, size.algbw_gbps_p50,
                 size.busbw_gbps_p50, size.wrong_elements);
}

void format_table(Line line, const results::CommTable& table, int ranks) {
  fmt::format_to(line,
                 "#\n# {} in {}: busbw = algbw * {:.4g}, nccl-tests' factor for {} rank{}; sizes "
                 "as nccl-tests counts them (dlscale comm --help)\n",
                 table.collective, table.dtype, table.bus_bandwidth_factor, ranks,
                 ranks == 1 ? "" : "s");
  const std::string side_header =
      fmt::format("  {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7}", "p50", "p95", "mean", "min",
                  "max", "algbw", "busbw", "#wrong");
  const std::string side_units =
      fmt::format("  {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7}", "(us)", "(us)", "(us)",
                  "(us)", "(us)", "(GB/s)", "(GB/s)", "");
  fmt::format_to(line, "#{:>11} {:>12} {:>6} {:>6} {:>5}{:^{}}{:^{}}\n", "", "", "", "", "",
                 "out-of-place", side_header.size(), "in-place", side_header.size());
  fmt::format_to(line, "#{:>11} {:>12} {:>6} {:>6} {:>5}{}{}\n", "size", "count", "type", "redop",
                 "root", side_header, side_header);
  fmt::format_to(line, "#{:>11} {:>12} {:>6} {:>6} {:>5}{}{}\n", "(B)", "(elements)", "", "", "",
                 side_units, side_units);
  const auto& times = table.times;
  for (std::size_t s = 0; s < times.sizes.size(); ++s) {
    const auto& size = times.sizes[s];
    fmt::format_to(line, "{:>12} {:>12} {:>6} {:>6} {:>5}", size.bytes, size.count, table.dtype,
                   table.redop, table.root);
    if (s < times.out_of_place_sizes.size()) format_placement(line, times.out_of_place_sizes[s]);
    format_placement(line, size);
    fmt::format_to(line, "\n");
  }
  const std::uint64_t wrong =
      wrong_elements(times.sizes) + wrong_elements(times.out_of_place_sizes);
  fmt::format_to(line, "#\n# wrong elements: {}{}\n", wrong,
                 wrong == 0 ? " (every result exact)" : " (WRONG RESULTS)");
  fmt::format_to(line,
                 "# Avg bus bandwidth    : {:.4f} GB/s (busbw at the p50 time, over every size "
                 "out of place and in place)\n",
                 table.average_busbw_gbps);
  format_fit(line, table, ranks);
  format_piecewise_fit(line, times.piecewise_fit, ranks);
  format_links(line, table);
}

}  // namespace

std::string format_comm_tables(const results::CommRecord& record) {
  std::string out;
  Line line = std::back_inserter(out);
  fmt::format_to(line, "# dlscale {} comm: backend {}, {} rank{} on {} host{}\n",
                 record.dlscale_version, record.backend, record.ranks, record.ranks == 1 ? "" : "s",
                 record.node_count, record.node_count == 1 ? "" : "s");
  fmt::format_to(line,
                 "# {} measured calls per size after {} warm-up, out of place and then in place; "
                 "a call's time is its slowest rank's\n",
                 record.measured_iterations, record.warmup_iterations);
  const bool links_swept = std::any_of(record.tables.begin(), record.tables.end(),
                                       [](const auto& table) { return !table.links.empty(); });
  if (record.ranks > 1 && !links_swept)
    fmt::format_to(line, "# links: every hop of this sweep is {}\n",
                   record.node_count == 1              ? "intra-node (one host)"
                   : record.node_count == record.ranks ? "inter-node (one rank per host)"
                                                       : "of both kinds");
  for (const auto& table : record.tables) format_table(line, table, record.ranks);
  return out;
}

}  // namespace dlscale::printers
