// A results file in memory: where it came from, its runs (the points of a rank sweep, or the
// runs of merged jobs) and the scaling analysis across them. docs/results-format.md describes
// the same as it appears on disk.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "results/run_record.hpp"

namespace dlscale::results {

// What wrote the file: the root attributes.
struct FileOrigin {
  std::string dlscale_version;
  std::string git_commit;
  std::string command_line;
  std::string start_time_utc;
};

// One run's place in the study, against the baseline (the run with the fewest ranks).
struct StudyPoint {
  int ranks = 0;
  std::string run;  // its group name in /runs
  double iteration_seconds = 0, iteration_seconds_ci_low = 0, iteration_seconds_ci_high = 0;
  double throughput_samples_per_second = 0;
  double speedup = 0;
  double efficiency = 0, efficiency_ci_low = 0, efficiency_ci_high = 0;
  double karp_flatt = 0;  // NaN at the baseline
  double gap_communication = 0, gap_load_imbalance = 0, gap_other = 0;  // fractions of T(n)
  int straggler_rank = 0;
  std::string straggler_host;
};

struct StudySummary {
  std::string scaling;
  int baseline_ranks = 0;
  std::vector<StudyPoint> points;  // by rank count
};

struct ResultsFile {
  FileOrigin origin;
  std::vector<RunRecord> runs;
  std::optional<StudySummary> study;  // written whenever there are runs
};

// The group name of run `index` in /runs.
std::string run_group_name(std::size_t index);

}  // namespace dlscale::results
