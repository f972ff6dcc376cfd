#include "analysis/gradient_noise_scale.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "analysis/statistics.hpp"

namespace dlscale::analysis {

std::optional<NoiseScaleEstimate> estimate_noise_scale(
    const std::vector<GradientNormSample>& samples, double small_batch, double big_batch,
    std::string* why_not) {
  const auto refuse = [&](std::string reason) -> std::optional<NoiseScaleEstimate> {
    if (why_not != nullptr) *why_not = std::move(reason);
    return std::nullopt;
  };
  if (!(small_batch > 0) || !(big_batch > small_batch))
    return refuse(fmt::format(
        "one batch size only (local {:g}, global {:g}): the noise scale needs gradients of two, "
        "as two or more ranks have",
        small_batch, big_batch));
  if (samples.empty()) return refuse("no iteration recorded its gradient norms");
  std::vector<double> squared_norms, traces;
  for (const auto& sample : samples) {
    squared_norms.push_back(
        (big_batch * sample.global_squared_norm - small_batch * sample.local_squared_norm) /
        (big_batch - small_batch));
    traces.push_back((sample.local_squared_norm - sample.global_squared_norm) /
                     (1 / small_batch - 1 / big_batch));
  }
  const auto mean_of = [](const std::vector<double>& values, const std::vector<std::size_t>& at) {
    double sum = 0;
    for (std::size_t k : at) sum += values[k];
    return sum / double(at.size());
  };
  std::vector<std::size_t> all(samples.size());
  for (std::size_t k = 0; k < all.size(); ++k) all[k] = k;
  NoiseScaleEstimate estimate;
  estimate.iterations = int(samples.size());
  estimate.gradient_squared_norm = mean_of(squared_norms, all);
  estimate.trace_covariance = mean_of(traces, all);
  if (!(estimate.gradient_squared_norm > 0))
    return refuse(fmt::format(
        "the gradient's squared norm came out {:.3g} over {} iterations: the noise of batches of "
        "{:g} hides it; a longer run or a larger batch can measure it",
        estimate.gradient_squared_norm, samples.size(), small_batch));
  estimate.noise_scale = estimate.trace_covariance / estimate.gradient_squared_norm;

  std::mt19937_64 random(bootstrap_seed);
  std::uniform_int_distribution<std::size_t> pick(0, samples.size() - 1);
  std::vector<double> resampled;
  std::vector<std::size_t> at(samples.size());
  for (int r = 0; r < bootstrap_resamples; ++r) {
    for (auto& index : at) index = pick(random);
    const double squared_norm = mean_of(squared_norms, at);
    // A resample whose |G|^2 is not positive has an unbounded ratio: it counts as infinite.
    resampled.push_back(squared_norm > 0 ? mean_of(traces, at) / squared_norm
                                         : std::numeric_limits<double>::infinity());
  }
  // Nearest rank, not interpolated: an infinite neighbour would make an interpolation NaN.
  std::sort(resampled.begin(), resampled.end());
  const auto nearest_rank = [&](double q) {
    return resampled[std::size_t(std::lround(q * double(resampled.size() - 1)))];
  };
  estimate.noise_scale_low = nearest_rank(interval_low);
  estimate.noise_scale_high = nearest_rank(interval_high);
  // Unbounded above: stated as not a number, as a results file holds nothing infinite.
  if (std::isinf(estimate.noise_scale_high))
    estimate.noise_scale_high = std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(estimate.noise_scale_low))
    estimate.noise_scale_low = std::numeric_limits<double>::quiet_NaN();
  return estimate;
}

double statistical_efficiency(double noise_scale, double baseline_batch, double batch) {
  return (noise_scale + baseline_batch) / (noise_scale + batch);
}

}  // namespace dlscale::analysis
