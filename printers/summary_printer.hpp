// The compact terminal summary rank 0 prints at the end of a run. It only formats; every number
// comes from RunSummary.
#pragma once

#include <string>
#include <vector>

#include "results/study_record.hpp"

namespace dlscale::printers {

// The whole summary, ending in the verdict line. An absent measurement's or noise scale's reason
// found in `absent_reasons_said` is not repeated (those absent for it are named on one line); the
// reasons given are added to it, so that a launch that passes one list says each once.
std::string format_summary(const results::RunRecord& record,
                           std::vector<std::string>* absent_reasons_said = nullptr);

// The verdict line that ends the summary (analysis/run_verdict.hpp): the bound, the shares of the
// iteration, the fraction of the GEMM yardstick, oversubscription and a yardstick that moved.
std::string format_verdict(const results::RunRecord& record);

// One line for a point under --quiet: its ranks, threads, precision, batch, throughput and verdict.
std::string format_point_line(const results::RunRecord& record);

// One line for a study: the verdict of its point with the most ranks, and how many points were
// oversubscribed or saw their yardstick move.
std::string format_study_verdict(const std::vector<results::RunRecord>& runs);

// The scaling table across a study's runs, with the failed points as rows of their own ("-" and
// the reason), and, when points were repeated, their mean and spread.
std::string format_study(const results::StudySummary& study,
                         const std::vector<results::FailedPoint>& failed_points = {});

}  // namespace dlscale::printers
