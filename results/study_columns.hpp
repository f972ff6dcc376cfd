// The columns of /study, one entry each: the one place a column is named, tied to its StudyPoint
// member, given its units, the schema version that brought it, the values a reader accepts and a
// line of meaning. The writer writes /study from this table; `dlscale schema --json` exports it,
// and the report's reader (report/dlscale_results.py) and the docs test read that export. The
// energy columns (NAME_per_sample) follow the measurements, not this table.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "results/study_record.hpp"

namespace dlscale::results {

struct StudyColumn {
  const char* name;  // its dataset in /study
  // The member it stores: a double as float64, an int as int64, a string as UTF-8 text.
  std::variant<double StudyPoint::*, int StudyPoint::*, std::string StudyPoint::*> member;
  const char* units = nullptr;  // its `units` attribute; none for ratios, counts and names
  long long since_version = 2;  // files of earlier schemas lack it (files of 2 on hold /study)
  // What a reader accepts of a number: none below `least`; NaN only where `may_be_nan`; +inf
  // only where `may_be_unbounded` (the high end of an interval that nothing bounds).
  std::optional<double> least = std::nullopt;
  bool may_be_nan = false;
  bool may_be_unbounded = false;
  const char* description = "";
};

// How a column is stored, as docs/results-format.md names the types.
inline const char* stored_type(const StudyColumn& column) {
  constexpr const char* names[] = {"float64", "int64", "string"};  // in the order of `member`
  return names[column.member.index()];
}

// In the order the writer writes them. The baseline (p ranks) is the configuration's runs with
// the fewest ranks; T(n) is the mean over measured iterations of each one's slowest rank.
inline constexpr StudyColumn study_columns[] = {
    {.name = "ranks",
     .member = &StudyPoint::ranks,
     .least = 1,
     .description = "n: the run's rank count"},
    {.name = "device",
     .member = &StudyPoint::device,
     .since_version = 8,
     .description = "What the run ran on: cpu or cuda (a merged study may hold both)"},
    {.name = "precision",
     .member = &StudyPoint::precision,
     .since_version = 7,
     .description = "What the device computed in: fp32, tf32 or bf16"},
    {.name = "sharding",
     .member = &StudyPoint::sharding,
     .since_version = 9,
     .description = "--sharding: none (replicated, gradients allreduced), optimizer or gradients "
                    "(ZeRO stages 1 and 2)"},
    {.name = "threads",
     .member = &StudyPoint::threads,
     .since_version = 3,
     .least = 1,
     .description = "Threads per rank (the run's threads_per_rank)"},
    {.name = "repeat",
     .member = &StudyPoint::repeat,
     .since_version = 3,
     .least = 0,
     .description = "Which run of its configuration, from 0"},
    {.name = "run", .member = &StudyPoint::run, .description = "The run's group name in /runs"},
    {.name = "iteration_seconds",
     .member = &StudyPoint::iteration_seconds,
     .units = "seconds",
     .least = 0,
     .description = "T(n): the mean step time at the slowest rank"},
    {.name = "iteration_seconds_ci_low",
     .member = &StudyPoint::iteration_seconds_ci_low,
     .units = "seconds",
     .least = 0,
     .description = "Low end of T(n)'s 95% bootstrap interval"},
    {.name = "iteration_seconds_ci_high",
     .member = &StudyPoint::iteration_seconds_ci_high,
     .units = "seconds",
     .least = 0,
     .description = "High end of T(n)'s 95% bootstrap interval"},
    {.name = "throughput_samples_per_second",
     .member = &StudyPoint::throughput_samples_per_second,
     .units = "samples/s",
     .least = 0,
     .description = "X(n) = global batch / T(n)"},
    {.name = "tokens_per_second",
     .member = &StudyPoint::tokens_per_second,
     .units = "tokens/s",
     .since_version = 10,
     .least = 0,
     .may_be_nan = true,
     .description = "X(n) x tokens per sample, for a language model; NaN for other models"},
    {.name = "mfu",
     .member = &StudyPoint::model_flops_utilisation,
     .since_version = 10,
     .least = 0,
     .may_be_nan = true,
     .description = "Model FLOPs utilisation: the run's GFLOP/s per rank over the GEMM measured "
                    "on its device; NaN where none was measured"},
    {.name = "speedup",
     .member = &StudyPoint::speedup,
     .least = 0,
     .description = "S(n) = p X(n) / X(p), against the baseline of p ranks"},
    {.name = "efficiency",
     .member = &StudyPoint::efficiency,
     .least = 0,
     .description = "E(n) = S(n) / n"},
    {.name = "efficiency_ci_low",
     .member = &StudyPoint::efficiency_ci_low,
     .least = 0,
     .description = "Low end of E(n)'s 95% bootstrap interval"},
    {.name = "efficiency_ci_high",
     .member = &StudyPoint::efficiency_ci_high,
     .least = 0,
     .description = "High end of E(n)'s 95% bootstrap interval"},
    {.name = "karp_flatt",
     .member = &StudyPoint::karp_flatt,
     .may_be_nan = true,
     .description = "Experimentally determined serial fraction; NaN at the baseline"},
    {.name = "gap_communication",
     .member = &StudyPoint::gap_communication,
     .may_be_nan = true,
     .description = "Exposed communication, as a fraction of T(n)"},
    {.name = "gap_load_imbalance",
     .member = &StudyPoint::gap_load_imbalance,
     .may_be_nan = true,
     .description = "Waiting for stragglers, as a fraction of T(n)"},
    {.name = "gap_other",
     .member = &StudyPoint::gap_other,
     .may_be_nan = true,
     .description = "1 - E(n) - the other two gaps: shared cores and memory, and the rest"},
    {.name = "straggler_rank",
     .member = &StudyPoint::straggler_rank,
     .least = 0,
     .description = "The rank with the largest mean compute time"},
    {.name = "straggler_host",
     .member = &StudyPoint::straggler_host,
     .description = "The straggler's host"},
    // Convergence (docs/scaling-model.md, "Goodput"): NaN where not measured. B is the run's
    // global batch, B0 the baseline's.
    {.name = "global_batch",
     .member = &StudyPoint::global_batch,
     .units = "samples",
     .since_version = 8,
     .least = 0,
     .description = "B = batch_per_rank n"},
    {.name = "noise_scale",
     .member = &StudyPoint::noise_scale,
     .units = "samples",
     .since_version = 8,
     .least = 0,
     .may_be_nan = true,
     .description = "The run's own gradient noise scale B_noise"},
    {.name = "noise_scale_used",
     .member = &StudyPoint::noise_scale_used,
     .units = "samples",
     .since_version = 8,
     .least = 0,
     .may_be_nan = true,
     .description = "The B_noise the model uses at every point of the configuration"},
    {.name = "statistical_efficiency_model",
     .member = &StudyPoint::statistical_efficiency_model,
     .since_version = 8,
     .least = 0,
     .may_be_nan = true,
     .description = "The model's statistical efficiency (B_noise + B0) / (B_noise + B)"},
    {.name = "goodput_samples_per_second",
     .member = &StudyPoint::goodput_samples_per_second,
     .units = "samples/s",
     .since_version = 8,
     .least = 0,
     .may_be_nan = true,
     .description = "Throughput times the model's statistical efficiency"},
    {.name = "samples_to_target",
     .member = &StudyPoint::samples_to_target,
     .units = "samples",
     .since_version = 8,
     .least = 0,
     .may_be_nan = true,
     .description = "Samples trained until the held-out target was first met"},
    {.name = "seconds_to_target",
     .member = &StudyPoint::seconds_to_target,
     .units = "seconds",
     .since_version = 8,
     .least = 0,
     .may_be_nan = true,
     .description = "Training seconds until the held-out target was first met"},
    {.name = "statistical_efficiency",
     .member = &StudyPoint::statistical_efficiency,
     .since_version = 8,
     .least = 0,
     .may_be_nan = true,
     .description = "Measured: the baseline's mean samples_to_target over this run's"},
    {.name = "time_to_target_speedup",
     .member = &StudyPoint::time_to_target_speedup,
     .since_version = 8,
     .least = 0,
     .may_be_nan = true,
     .description = "The baseline's mean seconds_to_target over this run's"},
    // What the evaluation spacing allows of the two above; added within schema 8.
    {.name = "statistical_efficiency_low",
     .member = &StudyPoint::statistical_efficiency_low,
     .since_version = 8,
     .may_be_nan = true,
     .description = "Lowest statistical_efficiency the evaluation spacing allows"},
    {.name = "statistical_efficiency_high",
     .member = &StudyPoint::statistical_efficiency_high,
     .since_version = 8,
     .may_be_nan = true,
     // Infinite where the target was met at the first evaluation: crossed anywhere after 0.
     .may_be_unbounded = true,
     .description = "Highest statistical_efficiency the evaluation spacing allows"},
    {.name = "time_to_target_speedup_low",
     .member = &StudyPoint::time_to_target_speedup_low,
     .since_version = 8,
     .may_be_nan = true,
     .description = "Lowest time_to_target_speedup the evaluation spacing allows"},
    {.name = "time_to_target_speedup_high",
     .member = &StudyPoint::time_to_target_speedup_high,
     .since_version = 8,
     .may_be_nan = true,
     // Infinite where the target was met at the first evaluation: crossed anywhere after 0.
     .may_be_unbounded = true,
     .description = "Highest time_to_target_speedup the evaluation spacing allows"},
};

}  // namespace dlscale::results
