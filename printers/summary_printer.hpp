// The compact terminal summary rank 0 prints at the end of a run. It only formats; every number
// comes from RunSummary.
#pragma once

#include <string>
#include <vector>

#include "results/study_record.hpp"

namespace dlscale::printers {

std::string format_summary(const results::RunRecord& record);

// The scaling table across a study's runs, with the failed points as rows of their own ("-" and
// the reason), and, when points were repeated, their mean and spread.
std::string format_study(const results::StudySummary& study,
                         const std::vector<results::FailedPoint>& failed_points = {});

}  // namespace dlscale::printers
