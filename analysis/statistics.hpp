// Descriptive statistics of timing samples, computed in one place for every report.
#pragma once

#include <cstdint>
#include <span>

#include "results/run_record.hpp"

namespace dlscale::analysis {

// Every bootstrap interval of the analysis: 2000 resamples from a fixed seed (the same file gives
// the same interval), the central 95%.
inline constexpr int bootstrap_resamples = 2000;
inline constexpr std::uint64_t bootstrap_seed = 20240601;
inline constexpr double interval_low = 0.025, interval_high = 0.975;

// The q-th quantile (0..1) with linear interpolation between order statistics, as NumPy's
// default percentile method. `samples` must not be empty.
double quantile(std::span<const double> samples, double q);

double median(std::span<const double> samples);
// The arithmetic mean; 0 for no samples.
double mean(std::span<const double> samples);

results::PhaseStatistics describe(std::span<const double> samples);

}  // namespace dlscale::analysis
