// Terminal formatting of a run's summary.
#include "printers/summary_printer.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/measurement_summary.hpp"
#include "analysis/run_verdict.hpp"
#include "analysis/scaling_metrics.hpp"
#include "core/number_format.hpp"
#include "results/schema.hpp"

namespace dlscale::printers {

namespace {

std::string with_units(double value, const std::string& units) {
  if (units == "bytes") return format_bytes(std::uint64_t(std::max(value, 0.0)));
  return fmt::format("{:.3g} {}", value, units);
}

// What the compute line's fraction needs said about its yardstick, a line per fact: that it moved
// during the point, and why a fraction is above 100%. Nothing when neither holds.
// An end of the noise scale's interval: NaN where the noise leaves it unbounded.
std::string interval_end(double value) {
  return std::isfinite(value) ? fmt::format("{:.4g}", value) : std::string("unbounded");
}

// How many measured iterations a noise scale came from, and why not all: "4 of 20 measured
// iterations (norms read every 5th, to keep their cost small)". Two estimates from different
// counts are not equally certain, and their intervals say so only to a reader who knows it.
std::string noise_scale_iterations_text(int used, int measured) {
  if (used <= 0 || measured <= 0) return "";
  if (used >= measured)
    return fmt::format("{} of {} measured iterations (norms read at each)", used, measured);
  const int every = (measured + used - 1) / used;
  return fmt::format(
      "{} of {} measured iterations (norms read about every {}{} iteration, to keep their cost "
      "small)",
      used, measured, every,
      every == 2   ? "nd"
      : every == 3 ? "rd"
                   : "th");
}

std::string yardstick_lines(const results::RunEnvironment& environment,
                            const analysis::RunVerdict& verdict) {
  const double before = environment.device_gemm_gflops_before;
  const double after = environment.device_gemm_gflops_after;
  const bool moved = verdict.yardstick_moved;
  std::string out;
  auto line = std::back_inserter(out);
  if (moved)
    fmt::format_to(line,
                   "{:<16}moved {:.0f} -> {:.0f} GFLOP/s from before the point to after it "
                   "({:+.0f}%): the machine was shared or its clock changed; the faster is the "
                   "yardstick\n",
                   "yardstick", before, after, 100 * verdict.yardstick_change);
  if (verdict.model_flops_utilisation > 1)
    fmt::format_to(line, "{:<16}above 100%: {}\n", moved ? "" : "yardstick",
                   moved ? "other work held back even the faster GEMM measurement, or this "
                           "workload's GEMMs ran faster here than the square one"
                         : "this workload's GEMMs ran faster here than the square one, or its "
                           "FLOP count credits work it skips (docs/performance.md)");
  return out;
}

std::string percent(double fraction) { return fmt::format("{:.0f}%", 100 * fraction); }

// A rate of tokens as people read one: 693,965 (whole tokens from a thousand up), 42.5 below.
std::string tokens_rate(double tokens_per_second) {
  return tokens_per_second >= 1000
             ? with_thousands_separators(std::uint64_t(std::llround(tokens_per_second)))
             : fmt::format("{:.1f}", tokens_per_second);
}

// "MFU 42% against the 50 GFLOP/s fp32 GEMM measured on this device" (`digits` after the point):
// dlscale's peak is the GEMM it measured, not a vendor's table (results/run_record.hpp).
std::string mfu_text(const results::RunRecord& record, int digits) {
  return fmt::format("MFU {:.{}f}% against the {:.0f} GFLOP/s {} GEMM measured on this device",
                     100 * record.summary.model_flops_utilisation, digits,
                     record.environment.device_gemm_gflops, record.configuration.precision);
}

// "compute-bound: compute 85%, exposed communication 10%, waiting for stragglers 5% of the
// iteration; MFU 42% against the 50 GFLOP/s fp32 GEMM measured on this device; ..." without a
// label.
std::string verdict_text(const results::RunRecord& record, const analysis::RunVerdict& verdict) {
  std::string out = fmt::format("{}-bound: ", analysis::bound_name(verdict.bound));
  auto line = std::back_inserter(out);
  if (record.ranks == 1)
    fmt::format_to(line, "one rank, no communication or stragglers");
  else
    fmt::format_to(line,
                   "compute {}, exposed communication {}, waiting for stragglers {} of the "
                   "iteration",
                   percent(verdict.compute_share), percent(verdict.communication_share),
                   percent(verdict.straggler_share));
  if (std::isfinite(verdict.model_flops_utilisation))
    fmt::format_to(line, "; {}", mfu_text(record, 0));
  else
    fmt::format_to(line, "; no GEMM yardstick measured");
  if (verdict.oversubscribed) {
    fmt::format_to(line, "; OVERSUBSCRIBED: {} thread{} per rank", verdict.threads,
                   verdict.threads == 1 ? "" : "s");
    if (std::isfinite(verdict.allowed_cpus))
      fmt::format_to(line, " on {:.3g} allowed CPU{}", verdict.allowed_cpus,
                     verdict.allowed_cpus == 1 ? "" : "s");
    if (std::isfinite(verdict.cores_used))
      fmt::format_to(line, ", {:.2g} cores used", verdict.cores_used);
  } else {
    fmt::format_to(line, "; not oversubscribed");
  }
  if (verdict.yardstick_moved)
    fmt::format_to(line, "; the yardstick MOVED {:+.0f}% during the point",
                   100 * verdict.yardstick_change);
  return out;
}

std::string verdict_line(const results::RunRecord& record, const analysis::RunVerdict& verdict) {
  return fmt::format("{:<16}{}\n", "verdict", verdict_text(record, verdict));
}

}  // namespace

std::string format_verdict(const results::RunRecord& record) {
  return verdict_line(record, analysis::run_verdict(record));
}

std::string format_point_line(const results::RunRecord& record) {
  const auto& config = record.configuration;
  const double tokens = record.summary.tokens_per_second;
  return fmt::format(
      "{} rank{} x{} thread{} {}{}, batch {}/rank: {:.1f} samples/s{}, {}\n", record.ranks,
      record.ranks == 1 ? "" : "s", config.threads_per_rank,
      config.threads_per_rank == 1 ? "" : "s", config.precision,
      config.repeat > 0 ? fmt::format(" repeat {}", config.repeat) : "", config.batch_per_rank,
      record.summary.throughput_samples_per_second,
      std::isfinite(tokens) ? fmt::format(" ({} tokens/s)", tokens_rate(tokens)) : "",
      verdict_text(record, analysis::run_verdict(record)));
}

std::string format_study_verdict(const std::vector<results::RunRecord>& runs) {
  if (runs.empty()) return "";
  const analysis::StudyVerdict study = analysis::study_verdict(runs);
  const auto largest = std::find_if(runs.rbegin(), runs.rend(), [&](const auto& run) {
    return run.ranks == study.largest_ranks;
  });
  return fmt::format(
      "{:<16}at {} rank{}, the most: {}; {} of {} point{} oversubscribed, the yardstick moved in "
      "{}\n",
      "study verdict", study.largest_ranks, study.largest_ranks == 1 ? "" : "s",
      verdict_text(*largest, study.largest), study.oversubscribed_points, study.points,
      study.points == 1 ? "" : "s", study.yardstick_moved_points);
}

std::string format_summary(const results::RunRecord& record,
                           std::vector<std::string>* absent_reasons_said) {
  // A reason already given earlier in the launch is not repeated: the first point said it.
  std::vector<std::string> said_here;
  std::vector<std::string>& said = absent_reasons_said ? *absent_reasons_said : said_here;
  const auto first_time = [&](const std::string& reason) {
    if (std::find(said.begin(), said.end(), reason) != said.end()) return false;
    said.push_back(reason);
    return true;
  };
  const analysis::RunVerdict verdict = analysis::run_verdict(record);
  const auto& config = record.configuration;
  const auto& environment = record.environment;
  const auto& summary = record.summary;
  std::string out;
  auto line = std::back_inserter(out);

  fmt::format_to(line,
                 "dlscale {} | {} ({}, {} parameters) | {} rank{} on {} host{} | {} {} x{} "
                 "threads\n",
                 environment.dlscale_version, config.model, config.model_family,
                 with_thousands_separators(config.parameter_count), record.ranks,
                 record.ranks == 1 ? "" : "s", environment.node_count,
                 environment.node_count == 1 ? "" : "s", config.device, config.precision,
                 config.threads_per_rank);
  fmt::format_to(line, "batch {}/rank, {} measured iteration{} after {} warm-up, comm {}\n",
                 config.batch_per_rank, config.measured_iterations,
                 config.measured_iterations == 1 ? "" : "s", config.warmup_iterations,
                 config.comm_backend);
  if (!record.partial_reason.empty())
    fmt::format_to(line, "partial         {}\n", record.partial_reason);
  fmt::format_to(line, "device          {}", environment.cpu_model);
  for (const auto& [name, value] : environment.device_properties)
    if (name == "cuda_driver" || name == "cudnn" || name == "cudnn_api" || name == "onednn_isa")
      fmt::format_to(line, ", {} {}", name, value);
    else if (name == "changed_settings")  // what the device ran other than its defaults
      fmt::format_to(line, ", {}", value);
  fmt::format_to(line, "\n\n");

  // A unit per phase, from its longest time: one rank's allreduce is a millionth of its step,
  // and in the step's unit would read 0.000.
  fmt::format_to(line, "{:<10} {:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "phase", "unit",
                 "median", "mean", "p5", "p95", "min", "max");
  for (std::size_t p = 0; p < phase_count; ++p) {
    const auto& s = summary.phase_statistics[p];
    const TimeUnit unit = time_unit(s.max);
    const double k = unit.per_second;
    fmt::format_to(line,
                   "{:<10} {:>4} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f}\n",
                   phase_names[p], unit.name, s.median * k, s.mean * k, s.p5 * k, s.p95 * k,
                   s.min * k, s.max * k);
  }

  const auto slowest =
      std::min_element(summary.gflops_per_rank.begin(), summary.gflops_per_rank.end());
  const double mean_gflops = verdict.mean_gflops;
  std::vector<double> imbalance = summary.load_imbalance_seconds;
  std::sort(imbalance.begin(), imbalance.end());

  fmt::format_to(line, "\nthroughput      {:.1f} samples/s (job)",
                 summary.throughput_samples_per_second);
  // A language model's users count tokens (a sample is one sequence of them).
  if (std::isfinite(summary.tokens_per_second))
    fmt::format_to(line, "; {} tokens/s (job), {} tokens/s per rank ({} tokens per sample)",
                   tokens_rate(summary.tokens_per_second),
                   tokens_rate(summary.tokens_per_second / record.ranks), config.tokens_per_sample);
  fmt::format_to(line, "\n");
  fmt::format_to(line, "compute         {:.2f} GFLOP/s per rank (mean; slowest rank {} at {:.2f})",
                 mean_gflops, std::distance(summary.gflops_per_rank.begin(), slowest), *slowest);
  // The yardstick ran at the run's precision: bf16 GEMMs under --precision bf16.
  if (std::isfinite(summary.model_flops_utilisation))
    fmt::format_to(line, ": {}", mfu_text(record, 1));
  fmt::format_to(line, "\n{}", yardstick_lines(environment, verdict));
  if (record.ranks == 1)
    fmt::format_to(line, "communication   none: one rank has no gradients to sum\n");
  else
    fmt::format_to(line,
                   "communication   {:.1f}% of step time exposed; {:.1f} MB in {} bucket{}{}, "
                   "{:.3f} ms first start to last done: algbw {:.2f} GB/s, busbw {:.2f} GB/s\n",
                   summary.communication_fraction * 100, summary.allreduce_bytes / 1e6,
                   record.buckets.size(), record.buckets.size() == 1 ? "" : "s",
                   config.overlap ? " overlapped with backward" : " after backward",
                   summary.allreduce_seconds * 1e3, summary.allreduce_algbw_gbps,
                   summary.allreduce_busbw_gbps);
  fmt::format_to(
      line, "load imbalance  {:.3f} ms median, {:.3f} ms max (max - min compute across ranks)\n",
      imbalance[imbalance.size() / 2] * 1e3, imbalance.back() * 1e3);
  const std::size_t last_iteration = std::size_t(record.iterations - 1) * record.ranks;
  double first_loss = 0, last_loss = 0;
  for (int r = 0; r < record.ranks; ++r) {
    first_loss += record.loss[r];
    last_loss += record.loss[last_iteration + r];
  }
  fmt::format_to(line,
                 "loss            {:.4f} -> {:.4f} (mean over ranks, first -> last iteration)\n",
                 first_loss / record.ranks, last_loss / record.ranks);
  if (std::isfinite(summary.noise_scale))
    fmt::format_to(
        line,
        "noise scale     B_noise {:.4g} samples (95% interval {} to {}), from "
        "{}; this point's global batch {} is {:.2g}x it\n",
        summary.noise_scale, interval_end(summary.noise_scale_ci_low),
        interval_end(summary.noise_scale_ci_high),
        noise_scale_iterations_text(summary.noise_scale_iterations, config.measured_iterations),
        config.batch_per_rank * record.ranks,
        config.batch_per_rank * record.ranks / summary.noise_scale);
  else if (first_time(summary.noise_scale_absent_reason))
    fmt::format_to(line, "noise scale     absent: {}\n", summary.noise_scale_absent_reason);
  else
    fmt::format_to(line, "noise scale     absent, as above\n");
  if (!record.evaluations.empty()) {
    const auto& last = record.evaluations.back();
    fmt::format_to(line,
                   "held-out        accuracy {:.4f}, loss {:.4f} after {} samples ({} "
                   "evaluation{}, every {} iterations)\n",
                   last.accuracy, last.loss, with_thousands_separators(std::uint64_t(last.samples)),
                   record.evaluations.size(), record.evaluations.size() == 1 ? "" : "s",
                   config.evaluate_every);
  }
  if (const auto& target = summary.target_reached; target && config.target)
    fmt::format_to(
        line, "to target       {} {} after {} iterations, {} samples, {:.3g} s of training\n",
        config.target->metric_name(), config.target->value, target->iterations,
        with_thousands_separators(std::uint64_t(target->samples)), target->training_seconds);
  bool first_measurement = true;
  std::vector<std::string> absent_as_above;  // named on one line, their reasons given before
  for (const auto& m : analysis::summarize_measurements(record)) {
    if (m.sources == 0 && !first_time(m.absent_reason)) {
      absent_as_above.push_back(m.name);
      continue;
    }
    fmt::format_to(line, "{:<16}{} ", first_measurement ? "measured" : "", m.name);
    first_measurement = false;
    if (m.sources == 0) {
      fmt::format_to(line, "absent: {}\n", m.absent_reason);
      continue;
    }
    switch (m.headline) {
      case results::Headline::energy:
        fmt::format_to(line, "{:.4g} J: {:.4g} J/step, {:.4g} J/sample", m.joules,
                       m.joules_per_step, m.joules_per_sample);
        break;
      case results::Headline::peak:
        fmt::format_to(line, "{} peak", with_units(m.peak, m.units));
        break;
      case results::Headline::mean_and_peak:
        fmt::format_to(line, "{} mean, {} peak", with_units(m.mean, m.units),
                       with_units(m.peak, m.units));
        break;
      default:
        fmt::format_to(line, "{} mean", with_units(m.mean, m.units));
    }
    fmt::format_to(line, " ({} {})\n", m.sources, m.sources == 1 ? "source" : "sources");
  }
  if (!absent_as_above.empty())
    fmt::format_to(line, "{:<16}absent, for the reasons given above: {}\n",
                   first_measurement ? "measured" : "", fmt::join(absent_as_above, ", "));
  // The estimate that admitted the point, beside the largest peak measured of the memory it
  // estimates: a CPU run's process (any rank's resident peak), a GPU run's device (NVML's memory
  // in use; the host process of a GPU run holds none of the training's tensors).
  if (const double estimate = record.environment.memory_estimate_bytes; estimate > 0) {
    fmt::format_to(line,
                   "memory          {} per rank estimated before training for the network, "
                   "optimizer state, shards and data (not the libraries)",
                   with_units(estimate, "bytes"));
    const bool on_gpu = analysis::trained_on_a_gpu(record);
    const std::string peak_name =
        on_gpu ? "gpu_memory_used_bytes" : results::schema::peak_resident_bytes;
    bool peak_measured = false;
    for (const auto& m : analysis::summarize_measurements(record)) {
      if (m.name != peak_name || m.sources == 0) continue;
      peak_measured = true;
      if (on_gpu)
        fmt::format_to(line,
                       "; the GPU held {} at its peak (NVML: every process on it, the libraries "
                       "included)",
                       with_units(m.peak, m.units));
      else
        fmt::format_to(line, "; the whole process peaked at {}", with_units(m.peak, m.units));
    }
    if (on_gpu && !peak_measured) fmt::format_to(line, "; the GPU's peak was not sampled (NVML)");
    fmt::format_to(line, "\n");
  }
  if (record.ranks == 1)
    fmt::format_to(line, "parameters      one rank: no replicas to compare\n");
  else
    fmt::format_to(line, "parameters      {} on all {} ranks after the last step\n",
                   summary.parameters_identical ? "bit-identical" : "DIFFERENT", record.ranks);
  fmt::format_to(line, "{}", verdict_line(record, verdict));
  return out;
}

// The study's convergence columns, where any point has them: the B_noise model's statistical
// efficiency and goodput, and what training to a target measured.
// `configuration_of` names a point's device and precision as the study table does, under
// `configuration_header`.
template <typename KeyColumns, typename ConfigurationOf>
std::string convergence_table(const results::StudySummary& study, const KeyColumns& key_columns,
                              const ConfigurationOf& configuration_of,
                              const char* configuration_header) {
  const bool modelled = std::any_of(study.points.begin(), study.points.end(), [](const auto& p) {
    return std::isfinite(p.noise_scale_used);
  });
  const bool targeted = std::any_of(study.points.begin(), study.points.end(), [](const auto& p) {
    return std::isfinite(p.samples_to_target);
  });
  if (!modelled && !targeted) return "";
  std::string out;
  auto line = std::back_inserter(out);
  const auto shown = [](double value, const char* format) {
    return std::isfinite(value) ? fmt::format(fmt::runtime(format), value) : std::string("-");
  };
  // A measured ratio with the interval the evaluation spacing allows: "67% [50, 100]".
  const auto with_spacing = [&](double value, double low, double high, double scale,
                                const char* format) {
    if (!std::isfinite(value)) return std::string("-");
    const auto end = [&](double x) {
      return std::isinf(x) ? std::string("inf") : fmt::format(fmt::runtime(format), x * scale);
    };
    return fmt::format("{}{} [{}, {}]", fmt::format(fmt::runtime(format), value * scale),
                       scale == 100 ? "%" : "", end(low), end(high));
  };
  fmt::format_to(line,
                 "\nconvergence: statistical efficiency, per sample against the baseline's "
                 "global batch B0: (B_noise + B0) / (B_noise + B) from the B_noise of the "
                 "smallest batch that measured one (B_noise used; model), and samples to target "
                 "(measured); goodput = samples/s x the model's\n");
  fmt::format_to(line, "{} {:>8} {:>9} {:>7} {:>9} {:>12} {:>12} {:>12} {:>11} {:>18} {:>18}\n",
                 key_columns(configuration_header, "ranks", "threads", "repeat"), "batch",
                 "B_noise", "its", "used", "stat (model)", "goodput/s", "to target", "seconds",
                 "stat (meas)", "TTT speedup");
  std::vector<std::string> sampling_notes;  // each once, under the table
  for (const auto& p : study.points) {
    const std::string iterations =
        std::isfinite(p.noise_scale) && p.noise_scale_iterations > 0
            ? fmt::format("{}/{}", p.noise_scale_iterations, p.measured_iterations)
            : "-";
    const std::string note =
        std::isfinite(p.noise_scale) && p.noise_scale_iterations < p.measured_iterations
            ? noise_scale_iterations_text(p.noise_scale_iterations, p.measured_iterations)
            : "";
    if (!note.empty() &&
        std::find(sampling_notes.begin(), sampling_notes.end(), note) == sampling_notes.end())
      sampling_notes.push_back(note);
    fmt::format_to(line, "{} {:>8} {:>9} {:>7} {:>9} {:>12} {:>12} {:>12} {:>11} {:>18} {:>18}\n",
                   key_columns(configuration_of(p), p.ranks, p.threads, p.repeat), p.global_batch,
                   shown(p.noise_scale, "{:.4g}"), iterations, shown(p.noise_scale_used, "{:.4g}"),
                   shown(p.statistical_efficiency_model * 100, "{:.1f}%"),
                   shown(p.goodput_samples_per_second, "{:.1f}"),
                   shown(p.samples_to_target, "{:.0f}"), shown(p.seconds_to_target, "{:.3g}"),
                   with_spacing(p.statistical_efficiency, p.statistical_efficiency_low,
                                p.statistical_efficiency_high, 100, "{:.0f}"),
                   with_spacing(p.time_to_target_speedup, p.time_to_target_speedup_low,
                                p.time_to_target_speedup_high, 1, "{:.2g}"));
  }
  if (targeted)
    fmt::format_to(line,
                   "measured ratios [low, high]: each run crossed its target somewhere after the "
                   "evaluation before the one that saw it (--eval-every)\n");
  for (const auto& note : sampling_notes) fmt::format_to(line, "its: B_noise from {}\n", note);
  return out;
}

std::string format_study(const results::StudySummary& study,
                         const std::vector<results::FailedPoint>& failed_points) {
  std::string out;
  auto line = std::back_inserter(out);
  // A column is shown where the study's points and failed points differ in it.
  const auto varies = [&](auto point_member, auto failed_member) {
    const auto& first = study.points.empty() ? failed_points.front().*failed_member
                                             : study.points.front().*point_member;
    for (const auto& p : study.points)
      if (p.*point_member != first) return true;
    for (const auto& f : failed_points)
      if (f.*failed_member != first) return true;
    return false;
  };
  if (study.points.empty() && failed_points.empty()) return out;
  // A merged study of a CPU job and a GPU job: each point names its device beside its precision.
  const bool device_sweep =
      std::any_of(study.points.begin(), study.points.end(),
                  [&](const auto& p) { return p.device != study.points.front().device; });
  // A --sharding sweep names each point's strategy beside its precision.
  const bool sharding_sweep =
      varies(&results::StudyPoint::sharding, &results::FailedPoint::sharding);
  const bool precision_sweep =
      device_sweep || sharding_sweep ||
      varies(&results::StudyPoint::precision, &results::FailedPoint::precision);
  const auto configuration_of = [&](const auto& p) {
    std::string configuration = device_sweep ? p.device + " " + p.precision : p.precision;
    return sharding_sweep ? configuration + " " + p.sharding : configuration;
  };
  const bool thread_sweep = varies(&results::StudyPoint::threads, &results::FailedPoint::threads);
  const bool repeated = varies(&results::StudyPoint::repeat, &results::FailedPoint::repeat);
  // "on the same device, precision and thread count": what each point's baseline shares.
  std::vector<std::string> shared;
  for (const auto& [swept, name] :
       {std::pair{device_sweep, "device"}, std::pair{precision_sweep, "precision"},
        std::pair{sharding_sweep, "sharding"}, std::pair{thread_sweep, "thread count"}})
    if (swept) shared.emplace_back(name);
  std::string same_configuration;
  for (std::size_t k = 0; k < shared.size(); ++k)
    same_configuration += (k == 0 ? (device_sweep ? " on the same " : " at the same ")
                           : k + 1 == shared.size() ? " and "
                                                    : ", ") +
                          shared[k];
  // The configuration column: as wide as its longest entry.
  const std::string configuration_header =
      std::string(device_sweep ? "device" : "precision") + (sharding_sweep ? " sharding" : "");
  std::size_t configuration_width = std::max<std::size_t>(10, configuration_header.size() + 1);
  for (const auto& p : study.points)
    configuration_width = std::max(configuration_width, configuration_of(p).size() + 1);
  // One rank count has nothing to scale against: its speedup 1 and efficiency 100% would read
  // as a result. Its failed points and repeats are still shown.
  const bool one_rank_count =
      !study.points.empty() &&
      std::all_of(study.points.begin(), study.points.end(),
                  [&](const auto& p) { return p.ranks == study.points.front().ranks; }) &&
      std::all_of(failed_points.begin(), failed_points.end(),
                  [&](const auto& f) { return f.ranks == study.points.front().ranks; });
  if (one_rank_count)
    fmt::format_to(line,
                   "every point has {} rank{}: no scaling table (speedup and efficiency need two "
                   "rank counts){}\n",
                   study.points.front().ranks, study.points.front().ranks == 1 ? "" : "s",
                   study.points.size() > 1
                       ? "; its configurations side by side, samples/s relative to the first:"
                       : "");
  if (!study.points.empty() && !one_rank_count)
    fmt::format_to(line,
                   "{} scaling against {} rank{}{}: efficiency with its 95% bootstrap interval; "
                   "the gap 1 - E split into exposed communication, waiting for stragglers and "
                   "the rest\n",
                   study.scaling, study.baseline_ranks, study.baseline_ranks == 1 ? "" : "s",
                   same_configuration);
  // A language model's study reads in tokens, and MFU wherever a point has one (docs/workloads.md).
  const bool language_model =
      std::any_of(study.points.begin(), study.points.end(),
                  [](const auto& p) { return std::isfinite(p.tokens_per_second); });
  const bool has_mfu = std::any_of(study.points.begin(), study.points.end(), [](const auto& p) {
    return std::isfinite(p.model_flops_utilisation);
  });
  const auto token_columns = [&](const auto& tokens, const auto& mfu) {
    return fmt::format("{}{}", language_model ? fmt::format(" {:>10}", tokens) : "",
                       has_mfu ? fmt::format(" {:>6}", mfu) : "");
  };
  // Every energy measurement any point has, in the order the points name them: a merged CPU and
  // GPU study's points measure different ones (cpu_package, gpu_board), each in its own column.
  std::vector<std::string> energy_names;
  for (const auto& p : study.points)
    for (const auto& [name, joules] : p.energy_joules_per_sample)
      if (std::find(energy_names.begin(), energy_names.end(), name) == energy_names.end())
        energy_names.push_back(name);
  // A point's tokens/s and MFU, "-" where it has none.
  const auto point_token_columns = [&](const results::StudyPoint& p) {
    return token_columns(
        std::isfinite(p.tokens_per_second) ? tokens_rate(p.tokens_per_second) : "-",
        std::isfinite(p.model_flops_utilisation)
            ? fmt::format("{:.1f}%", 100 * p.model_flops_utilisation)
            : "-");
  };
  std::string energy_header;
  for (const auto& name : energy_names)
    energy_header += fmt::format(" {:>12}", name.substr(0, name.find('_')) + " J/sample");
  // A point's value in each of those columns, "-" where it did not measure one.
  const auto energy_columns = [&](const results::StudyPoint& p) {
    std::string columns;
    for (const auto& name : energy_names) {
      const auto found =
          std::find_if(p.energy_joules_per_sample.begin(), p.energy_joules_per_sample.end(),
                       [&](const auto& measured) { return measured.first == name; });
      columns += found != p.energy_joules_per_sample.end()
                     ? fmt::format(" {:>12.4g}", found->second)
                     : fmt::format(" {:>12}", "-");
    }
    return columns;
  };
  // The configuration's columns: precision, ranks, threads and repeat, each where it varies.
  const auto key_columns = [&](const auto& precision, const auto& ranks, const auto& threads,
                               const auto& repeat) {
    return fmt::format("{}{:>6}{}{}",
                       precision_sweep ? fmt::format("{:<{}}", precision, configuration_width) : "",
                       ranks, thread_sweep ? fmt::format(" {:>7}", threads) : "",
                       repeated ? fmt::format(" {:>6}", repeat) : "");
  };
  if (!one_rank_count)
    fmt::format_to(line, "{} {:>10} {:>12}{} {:>8} {:>19} {:>10} {:>7} {:>9} {:>7}{}  {}\n",
                   key_columns(configuration_header, "ranks", "threads", "repeat"), "iter ms",
                   "samples/s", token_columns("tokens/s", "MFU"), "speedup", "efficiency",
                   "Karp-Flatt", "comm", "imbalance", "other", energy_header, "straggler");
  // One rank count of several configurations (a CPU job and a GPU job merged, a precision sweep
  // at one rank count) still compares them: each beside the first, in samples/s.
  if (one_rank_count && study.points.size() > 1) {
    fmt::format_to(line, "{} {:>10} {:>12}{} {:>9}{}\n",
                   key_columns(configuration_header, "ranks", "threads", "repeat"), "iter ms",
                   "samples/s", token_columns("tokens/s", "MFU"), "relative", energy_header);
    const double first = study.points.front().throughput_samples_per_second;
    for (const auto& p : study.points) {
      fmt::format_to(
          line, "{} {:>10.2f} {:>12.1f}{} {:>9}{}\n",
          key_columns(configuration_of(p), p.ranks, p.threads, p.repeat), p.iteration_seconds * 1e3,
          p.throughput_samples_per_second, point_token_columns(p),
          first > 0 ? fmt::format("{:.2f}x", p.throughput_samples_per_second / first) : "-",
          energy_columns(p));
    }
  }
  std::vector<std::string> karp_flatt_reasons;  // each once, under the table
  bool too_noisy = false;
  for (const auto& p : study.points) {
    if (one_rank_count) break;
    const std::string karp_flatt_reason = analysis::karp_flatt_out_of_range_reason(p.karp_flatt);
    if (!karp_flatt_reason.empty() &&
        std::find(karp_flatt_reasons.begin(), karp_flatt_reasons.end(), karp_flatt_reason) ==
            karp_flatt_reasons.end())
      karp_flatt_reasons.push_back(karp_flatt_reason);
    const bool noisy =
        p.ranks != study.baseline_ranks &&
        analysis::interval_too_wide(p.efficiency, p.efficiency_ci_low, p.efficiency_ci_high);
    too_noisy = too_noisy || noisy;
    fmt::format_to(
        line,
        "{} {:>10.2f} {:>12.1f}{} {:>8.2f} {:>6.1f}% [{:>4.0f},{:>4.0f}]{} {:>10} "
        "{:>6.1f}% {:>8.1f}% {:>6.1f}%{}  {}\n",
        key_columns(configuration_of(p), p.ranks, p.threads, p.repeat), p.iteration_seconds * 1e3,
        p.throughput_samples_per_second, point_token_columns(p), p.speedup, p.efficiency * 100,
        p.efficiency_ci_low * 100, p.efficiency_ci_high * 100, noisy ? "?" : " ",
        std::isnan(p.karp_flatt)    ? "-"
        : karp_flatt_reason.empty() ? fmt::format("{:.3f}", p.karp_flatt)
                                    : fmt::format("{:.3f}!", p.karp_flatt),
        p.gap_communication * 100, p.gap_load_imbalance * 100, p.gap_other * 100, energy_columns(p),
        p.ranks == 1 ? "-" : fmt::format("rank {} on {}", p.straggler_rank, p.straggler_host));
  }
  for (const auto& f : failed_points)
    fmt::format_to(line, "{} {:>10}  {}\n", key_columns(f.precision, f.ranks, f.threads, f.repeat),
                   "-", f.reason);
  if (too_noisy)
    fmt::format_to(line,
                   "? the efficiency's 95% interval is wider than {:.0f}% of its value: too noisy "
                   "to read (more --iters or --repeat)\n",
                   analysis::widest_readable_interval * 100);
  for (const auto& reason : karp_flatt_reasons) fmt::format_to(line, "! Karp-Flatt {}\n", reason);
  fmt::format_to(
      line, "{}",
      convergence_table(study, key_columns, configuration_of, configuration_header.c_str()));
  if (repeated && !study.configurations.empty()) {
    fmt::format_to(line, "\nacross repeats: mean +- sample standard deviation (min .. max)\n");
    fmt::format_to(
        line, "{}{:>6}{} {:>8} {:>27} {:>18} {:>12}\n",
        precision_sweep ? fmt::format("{:<{}}", configuration_header, configuration_width) : "",
        "ranks", thread_sweep ? fmt::format(" {:>7}", "threads") : "", "repeats", "iter ms",
        "efficiency", "samples/s");
    for (const auto& c : study.configurations)
      fmt::format_to(
          line,
          "{}{:>6}{} {:>8} {:>8.2f} +- {:<6.2f} ({:.2f} .. {:.2f}) {:>8.1f}% +- "
          "{:>5.1f}% {:>12.1f}\n",
          precision_sweep ? fmt::format("{:<{}}", configuration_of(c), configuration_width) : "",
          c.ranks, thread_sweep ? fmt::format(" {:>7}", c.threads) : "", c.repeats,
          c.iteration_seconds_mean * 1e3, c.iteration_seconds_std * 1e3,
          c.iteration_seconds_min * 1e3, c.iteration_seconds_max * 1e3, c.efficiency_mean * 100,
          c.efficiency_std * 100, c.throughput_samples_per_second_mean);
  }
  return out;
}

}  // namespace dlscale::printers
