// Rank 0's analysis of a run: every derived number in the summary is computed here, once.
#pragma once

#include "results/run_record.hpp"

namespace dlscale::analysis {

// Computes record.summary from the raw timings, configuration and fingerprints.
results::RunSummary summarize(const results::RunRecord& record);

}  // namespace dlscale::analysis
