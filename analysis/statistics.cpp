// Sample statistics.
#include "analysis/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace dlscale::analysis {

namespace {

double sorted_quantile(const std::vector<double>& sorted, double q) {
  const double position = q * double(sorted.size() - 1);
  const auto below = std::size_t(std::floor(position));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - double(below);
  return sorted[below] + (sorted[above] - sorted[below]) * fraction;
}

std::vector<double> sorted_copy(std::span<const double> samples) {
  if (samples.empty()) throw std::invalid_argument("statistics of an empty sample");
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

}  // namespace

double quantile(std::span<const double> samples, double q) {
  return sorted_quantile(sorted_copy(samples), q);
}

double median(std::span<const double> samples) { return quantile(samples, 0.5); }

results::PhaseStatistics describe(std::span<const double> samples) {
  const std::vector<double> sorted = sorted_copy(samples);
  results::PhaseStatistics statistics;
  statistics.median = sorted_quantile(sorted, 0.5);
  statistics.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / double(sorted.size());
  statistics.p5 = sorted_quantile(sorted, 0.05);
  statistics.p95 = sorted_quantile(sorted, 0.95);
  statistics.min = sorted.front();
  statistics.max = sorted.back();
  return statistics;
}

double mean(std::span<const double> samples) {
  if (samples.empty()) return 0;
  return std::accumulate(samples.begin(), samples.end(), 0.0) / double(samples.size());
}

}  // namespace dlscale::analysis
