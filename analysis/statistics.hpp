// Descriptive statistics of timing samples, computed in one place for every report.
#pragma once

#include <span>

#include "results/run_record.hpp"

namespace dlscale::analysis {

// The q-th quantile (0..1) with linear interpolation between order statistics, as NumPy's
// default percentile method. `samples` must not be empty.
double quantile(std::span<const double> samples, double q);

double median(std::span<const double> samples);

results::PhaseStatistics describe(std::span<const double> samples);

}  // namespace dlscale::analysis
