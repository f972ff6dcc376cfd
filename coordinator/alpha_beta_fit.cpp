// Weighted least squares in closed form, on data centred at the weighted means so that bytes up
// to 10^8 and times down to 10^-6 lose no precision to cancellation.
#include "coordinator/alpha_beta_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "coordinator/ring_allreduce.hpp"

namespace dlscale::coordinator {

results::AlphaBetaFit fit_alpha_beta(std::span<const double> bytes,
                                     std::span<const double> seconds, int ranks) {
  constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();
  results::AlphaBetaFit fit{not_a_number, not_a_number, not_a_number,
                            not_a_number, not_a_number, not_a_number};
  if (bytes.size() != seconds.size())
    throw std::invalid_argument("alpha-beta fit: one time per message size is needed");
  const std::size_t points = bytes.size();
  const bool two_sizes =
      std::any_of(bytes.begin(), bytes.end(), [&](double m) { return m != bytes.front(); });
  const bool positive_times =
      std::all_of(seconds.begin(), seconds.end(), [](double t) { return t > 0; });
  if (!two_sizes || !positive_times) return fit;

  double weight_sum = 0, mean_bytes = 0, mean_seconds = 0;
  for (std::size_t i = 0; i < points; ++i) {
    const double weight = 1 / (seconds[i] * seconds[i]);
    weight_sum += weight;
    mean_bytes += weight * bytes[i];
    mean_seconds += weight * seconds[i];
  }
  mean_bytes /= weight_sum;
  mean_seconds /= weight_sum;
  double covariance = 0, variance = 0;
  for (std::size_t i = 0; i < points; ++i) {
    const double weight = 1 / (seconds[i] * seconds[i]);
    covariance += weight * (bytes[i] - mean_bytes) * (seconds[i] - mean_seconds);
    variance += weight * (bytes[i] - mean_bytes) * (bytes[i] - mean_bytes);
  }
  fit.line_seconds_per_byte = covariance / variance;
  fit.line_intercept_seconds = mean_seconds - fit.line_seconds_per_byte * mean_bytes;

  double squared_relative_errors = 0, max_relative_error = 0;
  for (std::size_t i = 0; i < points; ++i) {
    const double predicted = fit.line_intercept_seconds + fit.line_seconds_per_byte * bytes[i];
    const double relative_error = std::abs(seconds[i] - predicted) / seconds[i];
    squared_relative_errors += relative_error * relative_error;
    max_relative_error = std::max(max_relative_error, relative_error);
  }
  fit.relative_rms_error = std::sqrt(squared_relative_errors / double(points));
  fit.max_relative_error = max_relative_error;

  if (ranks > 1) {
    fit.alpha_seconds = fit.line_intercept_seconds / ring_allreduce_steps(ranks);
    fit.beta_seconds_per_byte = fit.line_seconds_per_byte / allreduce_bus_factor(ranks);
  }
  return fit;
}

}  // namespace dlscale::coordinator
