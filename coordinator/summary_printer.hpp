// The compact terminal summary rank 0 prints at the end of a run. It only formats; every number
// comes from RunSummary.
#pragma once

#include <string>

#include "results/study_record.hpp"

namespace dlscale::coordinator {

std::string format_summary(const results::RunRecord& record);

// The scaling table across a study's runs.
std::string format_study(const results::StudySummary& study);

}  // namespace dlscale::coordinator
