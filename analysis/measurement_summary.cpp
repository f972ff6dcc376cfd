// Sources are the distinct shared_by keys among the ranks that measured; an empty key is the
// rank itself.
#include "analysis/measurement_summary.hpp"

#include <algorithm>
#include <numeric>
#include <set>

namespace dlscale::analysis {

std::vector<MeasurementHeadline> summarize_measurements(const results::RunRecord& record) {
  std::vector<MeasurementHeadline> headlines;
  const double measured_iterations = record.configuration.measured_iterations;
  const double samples =
      measured_iterations * record.configuration.batch_per_rank * double(record.ranks);
  for (const auto& measurement : record.measurements) {
    if (measurement.headline == results::Headline::none) continue;
    MeasurementHeadline headline;
    headline.name = measurement.name;
    headline.units = measurement.units;
    headline.headline = measurement.headline;
    std::set<std::string> seen;
    double sum_of_means = 0;
    for (std::size_t r = 0; r < measurement.values.size(); ++r) {
      const auto& values = measurement.values[r];
      if (!measurement.absent_reasons[r].empty() || values.empty()) continue;
      const std::string& key = measurement.shared_by[r];
      if (!key.empty() && !seen.insert(key).second) continue;
      ++headline.sources;
      const double mean =
          std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
      sum_of_means += mean;
      headline.peak = std::max(headline.peak, *std::max_element(values.begin(), values.end()));
      if (measurement.headline == results::Headline::energy) headline.joules += mean;
    }
    if (headline.sources == 0) {
      headline.absent_reason = measurement.absent_reasons.empty() ? "no rank measured it"
                                                                  : measurement.absent_reasons[0];
    } else {
      headline.mean = sum_of_means / headline.sources;
      if (measured_iterations > 0) headline.joules_per_step = headline.joules / measured_iterations;
      if (samples > 0) headline.joules_per_sample = headline.joules / samples;
    }
    headlines.push_back(std::move(headline));
  }
  return headlines;
}

}  // namespace dlscale::analysis
