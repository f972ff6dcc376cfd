// Rank 0's analysis of a run: every derived number in the summary is computed here, once.
#pragma once

#include <optional>
#include <string>

#include "results/run_record.hpp"

namespace dlscale::analysis {

// Computes record.summary from the raw timings, configuration and fingerprints.
results::RunSummary summarize(const results::RunRecord& record);

// The first of the run's evaluations that met its target, or nothing (no target, not reached).
std::optional<results::TargetReached> first_evaluation_at_target(const results::RunRecord& record);

}  // namespace dlscale::analysis
