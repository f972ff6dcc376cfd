#include "printers/prediction_printer.hpp"

#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/number_format.hpp"
#include "printers/json_text.hpp"

namespace dlscale::printers {

namespace {

std::vector<std::string> json_strings(const std::vector<std::string>& texts) {
  std::vector<std::string> quoted;
  for (const auto& text : texts) quoted.push_back(json_string(text));
  return quoted;
}

double gigabytes_per_second(double beta_seconds_per_byte) {
  return beta_seconds_per_byte > 0 ? 1 / beta_seconds_per_byte / 1e9
                                   : std::numeric_limits<double>::infinity();
}

std::string describe_link(const results::PiecewiseAlphaBetaFit& link) {
  std::string out;
  for (const auto& piece : link.pieces) {
    if (!out.empty()) out += "; ";
    if (link.pieces.size() > 1)
      out += fmt::format("{}-{}: ", format_bytes(std::uint64_t(piece.min_bytes)),
                         format_bytes(std::uint64_t(piece.max_bytes)));
    out += fmt::format("alpha {:.3g} us, 1/beta {:.3g} GB/s", piece.fit.alpha_seconds * 1e6,
                       gigabytes_per_second(piece.fit.beta_seconds_per_byte));
  }
  if (link.pieces.size() > 1)
    out += fmt::format(" (fit {:.1f}% rms)", link.relative_rms_error * 100);
  return out;
}

std::string json_link(const results::PiecewiseAlphaBetaFit& link) {
  std::string out = "[";
  for (std::size_t k = 0; k < link.pieces.size(); ++k) {
    const auto& piece = link.pieces[k];
    out += fmt::format(
        "{}{{\"min_bytes\": {}, \"max_bytes\": {}, \"alpha_seconds\": {}, "
        "\"beta_seconds_per_byte\": {}}}",
        k == 0 ? "" : ", ", json_number(piece.min_bytes), json_number(piece.max_bytes),
        json_number(piece.fit.alpha_seconds), json_number(piece.fit.beta_seconds_per_byte));
  }
  return out + "]";
}

double relative_error(double predicted, double measured) { return predicted / measured - 1; }

// "low-high" in ms; "-" where the interval is a single value (one repeat, no measured error):
// nothing is known of the prediction's spread, and an interval of width 0 would claim certainty.
std::string interval_text(const analysis::PredictedPoint& point) {
  if (!(point.interval_seconds_high > point.interval_seconds_low)) return "-";
  if (!std::isfinite(point.interval_seconds_high))
    return fmt::format("{:.2f}-inf", point.interval_seconds_low * 1e3);
  return fmt::format("{:.2f}-{:.2f}", point.interval_seconds_low * 1e3,
                     point.interval_seconds_high * 1e3);
}

}  // namespace

std::string format_prediction_table(const analysis::ScalingPrediction& prediction,
                                    const analysis::NetworkModel& network,
                                    const std::string& algorithm) {
  std::string out;
  auto line = std::back_inserter(out);
  const bool strong = results::scaling_names.named(prediction.scaling) == results::Scaling::strong;
  fmt::format_to(line,
                 "{} ({} scaling, {}, {}, {} thread(s)/rank, --sharding {}), {} allreduce, "
                 "efficiency against {} rank(s)\n",
                 prediction.model, prediction.scaling,
                 strong ? fmt::format("global batch {:g}", prediction.global_batch)
                        : fmt::format("batch {:g}/rank", prediction.batch_per_rank),
                 prediction.precision, prediction.threads_per_rank,
                 results::sharding_names(prediction.sharding), algorithm,
                 prediction.baseline_ranks);
  fmt::format_to(line, "network     {}; {} rank(s) per node\n", network.source,
                 prediction.ranks_per_node);
  fmt::format_to(line, "  intra-node {}\n", describe_link(network.intra_node));
  fmt::format_to(line, "  inter-node {}\n", describe_link(network.inter_node));
  fmt::format_to(line, "compute     node-sharing slowdown s(ranks):");
  for (const auto& [ranks, slowdown] : prediction.node_sharing.slowdown)
    fmt::format_to(line, " {} {:.3f}", ranks, slowdown);
  fmt::format_to(line, " (compute-only probes)\n");
  for (const auto& note : network.notes) fmt::format_to(line, "note        {}\n", note);
  for (const auto& note : prediction.notes) fmt::format_to(line, "note        {}\n", note);
  if (std::isfinite(prediction.model_error))
    fmt::format_to(line,
                   "error       the model's measured error, +-{:.1f}% ({}), widens every "
                   "interval\n",
                   prediction.model_error * 100, prediction.model_error_source);
  for (const auto& warning : prediction.warnings) fmt::format_to(line, "warning     {}\n", warning);
  // Which runs fed each reference rank count: every repeat, as the study's mean has them.
  std::map<int, std::vector<std::string>> reference_runs;
  for (const auto& point : prediction.points)
    reference_runs.emplace(point.reference_ranks, point.reference_runs);
  for (const auto& [ranks, runs] : reference_runs)
    fmt::format_to(line, "from        {} rank(s): {}{}\n", ranks, fmt::join(runs, ", "),
                   runs.size() == 1 ? ""
                                    : fmt::format(" ({} repeats: the prediction is from their "
                                                  "mean; the interval holds each alone)",
                                                  runs.size()));
  fmt::format_to(line,
                 "{:>7} {:>5} {:>14} {:>10} {:>9} {:>10} {:>10} {:>13} {:>10} {:>8} {:>6} "
                 "{:>6} {:>6}  {}\n",
                 "ranks", "from", "slowdown", "compute", "comm", "stragglers", "iter ms",
                 "interval", "efficiency", "speedup", "comm", "imbal", "other",
                 "measured iter ms, efficiency");
  fmt::format_to(line,
                 "{:>7} {:>5} {:>14} {:>10} {:>9} {:>10} {:>10} {:>13} {:>10} {:>8} {:>6} "
                 "{:>6} {:>6}\n",
                 "", "", "", "(ms)", "(ms)", "(ms)", "", "(iter ms)", "", "", "gap", "gap", "gap");
  for (const auto& point : prediction.points) {
    const auto& t = point.iteration;
    std::string measured;
    if (std::isfinite(point.measured_iteration_seconds) && !point.compared)
      measured =
          fmt::format("{:.2f}, {:.1f}% (on its own network: not compared)",
                      point.measured_iteration_seconds * 1e3, point.measured_efficiency * 100);
    else if (std::isfinite(point.measured_iteration_seconds))
      measured = fmt::format(
          "{:.2f} ({:+.1f}%), {:.1f}% ({:+.1f}%){}", point.measured_iteration_seconds * 1e3,
          relative_error(t.iteration_seconds, point.measured_iteration_seconds) * 100,
          point.measured_efficiency * 100,
          relative_error(point.efficiency, point.measured_efficiency) * 100,
          point.held_out ? "  held out" : "");
    // '*': above 100%, explained below the table.
    fmt::format_to(line,
                   "{:>7} {:>5} {:>14} {:>10.2f} {:>9.2f} {:>10.2f} {:>10.2f} {:>13} {:>10} "
                   "{:>8.2f} {:>5.1f}% {:>5.1f}% {:>5.1f}%  {}\n",
                   point.ranks, point.reference_ranks,
                   fmt::format("{:.3f} {}", point.compute_slowdown, point.slowdown_how),
                   t.compute_seconds * 1e3, t.exposed_communication_seconds * 1e3,
                   t.straggler_wait_seconds * 1e3, t.iteration_seconds * 1e3, interval_text(point),
                   fmt::format("{:.1f}%{}", point.efficiency * 100,
                               point.above_linear_reason.empty() ? " " : "*"),
                   point.speedup, point.gap.communication * 100, point.gap.load_imbalance * 100,
                   point.gap.other * 100, measured);
  }
  for (const auto& point : prediction.points)
    if (!point.above_linear_reason.empty())
      fmt::format_to(line, "* {}\n", point.above_linear_reason);
  if (!std::isfinite(prediction.noise_scale)) return out;
  const bool target = std::isfinite(prediction.baseline_samples_to_target);
  fmt::format_to(line,
                 "\ngoodput     B_noise {:.4g} samples at every global batch B: statistical "
                 "efficiency (B_noise + B0) / (B_noise + B), B0 = {:.0f}; goodput = samples/s x "
                 "it{}\n",
                 prediction.noise_scale, prediction.global_batch,
                 target ? fmt::format("; to {}: the baseline's {:.0f} samples / statistical "
                                      "efficiency, at the predicted samples/s",
                                      prediction.target, prediction.baseline_samples_to_target)
                        : "; no time to target (train with --target-accuracy or --target-loss)");
  fmt::format_to(line, "{:>7} {:>12} {:>10} {:>12} {:>12} {:>17} {:>12}  {}\n", "ranks",
                 "global batch", "stat eff", "samples/s", "goodput/s", "samples to target",
                 "s to target", "measured s");
  const auto shown = [](double value, const char* format) {
    return std::isfinite(value) ? fmt::format(fmt::runtime(format), value) : std::string("-");
  };
  for (const auto& point : prediction.points)
    fmt::format_to(line, "{:>7} {:>12.0f} {:>9.1f}% {:>12.1f} {:>12.1f} {:>17} {:>12}  {}\n",
                   point.ranks, point.global_batch, point.statistical_efficiency * 100,
                   point.global_batch / point.iteration.iteration_seconds,
                   point.goodput_samples_per_second, shown(point.samples_to_target, "{:.0f}"),
                   shown(point.seconds_to_target, "{:.4g}"),
                   shown(point.measured_seconds_to_target, "{:.4g}"));
  return out;
}

std::string format_prediction_json(const analysis::ScalingPrediction& prediction,
                                   const analysis::NetworkModel& network,
                                   const std::string& algorithm) {
  const auto& largest = network.inter_node.pieces.back().fit;
  std::string out = fmt::format(
      "{{\"model\": {}, \"scaling\": {}, \"precision\": {}, \"sharding\": {}, "
      "\"algorithm\": {}, "
      "\"alpha_seconds\": {}, "
      "\"beta_seconds_per_byte\": {}, \"noise_scale\": {}, \"target\": {}, "
      "\"baseline_samples_to_target\": {},\n \"network\": {{\"source\": {}, "
      "\"ranks_per_node\": {}, \"intra_node\": {}, \"inter_node\": {}}},\n \"node_sharing\": [",
      json_string(prediction.model), json_string(prediction.scaling),
      json_string(prediction.precision),
      json_string(std::string(results::sharding_names(prediction.sharding))),
      json_string(algorithm), json_number(largest.alpha_seconds),
      json_number(largest.beta_seconds_per_byte), json_number(prediction.noise_scale),
      prediction.target.empty() ? "null" : json_string(prediction.target),
      json_number(prediction.baseline_samples_to_target), json_string(network.source),
      prediction.ranks_per_node, json_link(network.intra_node), json_link(network.inter_node));
  for (std::size_t k = 0; k < prediction.node_sharing.slowdown.size(); ++k)
    out += fmt::format("{}{{\"ranks\": {}, \"slowdown\": {}}}", k == 0 ? "" : ", ",
                       prediction.node_sharing.slowdown[k].first,
                       json_number(prediction.node_sharing.slowdown[k].second));
  out += "],\n \"notes\": [";
  std::vector<std::string> notes = network.notes;
  notes.insert(notes.end(), prediction.notes.begin(), prediction.notes.end());
  for (std::size_t k = 0; k < notes.size(); ++k)
    out += (k == 0 ? "" : ", ") + json_string(notes[k]);
  out +=
      fmt::format("],\n \"model_error\": {}, \"model_error_source\": {}, \"warnings\": [{}]",
                  json_number(prediction.model_error), json_string(prediction.model_error_source),
                  fmt::join(json_strings(prediction.warnings), ", "));
  out += ",\n \"predictions\": [";
  for (std::size_t i = 0; i < prediction.points.size(); ++i) {
    const auto& r = prediction.points[i];
    const auto& t = r.iteration;
    out += fmt::format(
        "{}\n  {{\"ranks\": {}, \"reference_ranks\": {}, \"held_out\": {}, "
        "\"iteration_seconds\": {}, \"compute_seconds\": {}, \"communication_seconds\": {}, "
        "\"exposed_communication_seconds\": {}, \"straggler_wait_seconds\": {}, "
        "\"compute_slowdown\": {}, \"compute_slowdown_from\": {}, \"efficiency\": {}, "
        "\"speedup\": {}, \"gap_communication\": {}, \"gap_load_imbalance\": {}, "
        "\"gap_other\": {}, \"measured_iteration_seconds\": {}, \"measured_efficiency\": {}, "
        "\"reference_runs\": [{}], \"iteration_seconds_low\": {}, "
        "\"iteration_seconds_high\": {}, \"efficiency_low\": {}, \"efficiency_high\": {}, "
        "\"above_linear\": {}, \"above_linear_reason\": {}, \"global_batch\": {}, "
        "\"statistical_efficiency\": {}, \"goodput_samples_per_second\": {}, "
        "\"samples_to_target\": {}, \"seconds_to_target\": {}, "
        "\"measured_seconds_to_target\": {}, \"compared\": {}, \"interval_seconds_low\": {}, "
        "\"interval_seconds_high\": {}, \"interval_efficiency_low\": {}, "
        "\"interval_efficiency_high\": {}}}",
        i == 0 ? "" : ",", r.ranks, r.reference_ranks, r.held_out ? "true" : "false",
        json_number(t.iteration_seconds), json_number(t.compute_seconds),
        json_number(t.communication_seconds), json_number(t.exposed_communication_seconds),
        json_number(t.straggler_wait_seconds), json_number(r.compute_slowdown),
        json_string(r.slowdown_how), json_number(r.efficiency), json_number(r.speedup),
        json_number(r.gap.communication), json_number(r.gap.load_imbalance),
        json_number(r.gap.other), json_number(r.measured_iteration_seconds),
        json_number(r.measured_efficiency), fmt::join(json_strings(r.reference_runs), ", "),
        json_number(r.iteration_seconds_low), json_number(r.iteration_seconds_high),
        json_number(r.efficiency_low), json_number(r.efficiency_high),
        r.above_linear_reason.empty() ? "false" : "true",
        r.above_linear_reason.empty() ? "null" : json_string(r.above_linear_reason),
        json_number(r.global_batch), json_number(r.statistical_efficiency),
        json_number(r.goodput_samples_per_second), json_number(r.samples_to_target),
        json_number(r.seconds_to_target), json_number(r.measured_seconds_to_target),
        r.compared ? "true" : "false", json_number(r.interval_seconds_low),
        json_number(r.interval_seconds_high), json_number(r.interval_efficiency_low),
        json_number(r.interval_efficiency_high));
  }
  return out + "\n]}\n";
}

std::string format_strategy_comparison(const std::vector<analysis::ScalingPrediction>& strategies) {
  std::string out;
  auto line = std::back_inserter(out);
  const auto& first = strategies.front();
  fmt::format_to(line,
                 "strategies  {} ({}): predicted iteration ms at each rank count, each strategy "
                 "from its own runs; * the fastest\n",
                 first.model, first.precision);
  fmt::format_to(line, "{:>7}", "ranks");
  for (const auto& strategy : strategies)
    fmt::format_to(line, " {:>12}", results::sharding_names(strategy.sharding));
  fmt::format_to(line, "\n");
  const std::size_t rows = first.points.size();
  for (std::size_t row = 0; row < rows; ++row) {
    std::size_t fastest = 0;
    for (std::size_t s = 1; s < strategies.size(); ++s)
      if (strategies[s].points.at(row).iteration.iteration_seconds <
          strategies[fastest].points.at(row).iteration.iteration_seconds)
        fastest = s;
    fmt::format_to(line, "{:>7}", first.points[row].ranks);
    for (std::size_t s = 0; s < strategies.size(); ++s)
      fmt::format_to(line, " {:>11.2f}{}",
                     strategies[s].points.at(row).iteration.iteration_seconds * 1e3,
                     s == fastest ? "*" : " ");
    fmt::format_to(line, "\n");
  }
  // Where each strategy's lead over the first one changes hands, in the rank counts predicted.
  for (std::size_t s = 1; s < strategies.size(); ++s) {
    const char* name = results::sharding_names(strategies[s].sharding);
    const char* against = results::sharding_names(first.sharding);
    std::vector<std::string> changes;
    for (std::size_t row = 0; row < rows; ++row) {
      const bool faster = strategies[s].points[row].iteration.iteration_seconds <
                          first.points[row].iteration.iteration_seconds;
      const bool was_faster = row > 0 && strategies[s].points[row - 1].iteration.iteration_seconds <
                                             first.points[row - 1].iteration.iteration_seconds;
      if (row > 0 && faster != was_faster)
        changes.push_back(fmt::format("{} {} from {} ranks", faster ? "overtakes" : "falls behind",
                                      against, first.points[row].ranks));
    }
    const auto& last = strategies[s].points.back().iteration.iteration_seconds;
    const double ratio = last / first.points.back().iteration.iteration_seconds;
    fmt::format_to(line, "overtaking  {}: {}; at {} ranks {:.2f}x the iteration time of {}\n", name,
                   changes.empty()
                       ? fmt::format("{} than {} at every rank count predicted",
                                     strategies[s].points.front().iteration.iteration_seconds <
                                             first.points.front().iteration.iteration_seconds
                                         ? "faster"
                                         : "no faster",
                                     against)
                       : fmt::format("{}", fmt::join(changes, ", ")),
                   first.points.back().ranks, ratio, against);
  }
  return out;
}

}  // namespace dlscale::printers
