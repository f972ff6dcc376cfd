// Weighted least squares in closed form, on data centred at the weighted means so that bytes up
// to 10^8 and times down to 10^-6 lose no precision to cancellation. The piecewise fit extends
// each candidate piece one size at a time with West's weighted running moments, so all O(S^2)
// pieces of an S-size sweep cost O(S^2) in all.
#include "analysis/alpha_beta_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "analysis/ring_allreduce.hpp"

namespace dlscale::analysis {

namespace {

constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();

results::AlphaBetaFit unfitted() {
  return {not_a_number, not_a_number, not_a_number, not_a_number, not_a_number, not_a_number};
}

void check_lengths(std::span<const double> bytes, std::span<const double> seconds) {
  if (bytes.size() != seconds.size())
    throw std::invalid_argument("alpha-beta fit: one time per message size is needed");
}

bool fittable(std::span<const double> bytes, std::span<const double> seconds) {
  const bool two_sizes =
      std::any_of(bytes.begin(), bytes.end(), [&](double m) { return m != bytes.front(); });
  const bool positive_times =
      std::all_of(seconds.begin(), seconds.end(), [](double t) { return t > 0; });
  return two_sizes && positive_times;
}

// Errors of the line in `fit` over the sizes, and the per-hop constants of `hops`.
void complete(results::AlphaBetaFit& fit, std::span<const double> bytes,
              std::span<const double> seconds, HopModel hops) {
  double squared_relative_errors = 0, max_relative_error = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const double predicted = fit.line_intercept_seconds + fit.line_seconds_per_byte * bytes[i];
    const double relative_error = std::abs(seconds[i] - predicted) / seconds[i];
    squared_relative_errors += relative_error * relative_error;
    max_relative_error = std::max(max_relative_error, relative_error);
  }
  fit.relative_rms_error = std::sqrt(squared_relative_errors / double(bytes.size()));
  fit.max_relative_error = max_relative_error;
  if (hops.latency_steps > 0 && hops.bandwidth_factor > 0) {
    fit.alpha_seconds = fit.line_intercept_seconds / hops.latency_steps;
    fit.beta_seconds_per_byte = fit.line_seconds_per_byte / hops.bandwidth_factor;
  }
}

// The weighted moments of one piece (weights w = 1/t^2), grown one size at a time.
struct PieceMoments {
  double weight = 0, mean_bytes = 0, mean_seconds = 0;
  double bytes_bytes = 0, bytes_seconds = 0, seconds_seconds = 0;  // centred co-moments
  double sum_u = 0, sum_uu = 0;  // u = m/t: for the line through the origin (a = 0)
  double sum_v = 0, sum_vv = 0;  // v = 1/t: for the flat line (b = 0)
  int count = 0;

  void add(double m, double t) {
    const double w = 1 / (t * t);
    weight += w;
    const double d_bytes = m - mean_bytes, d_seconds = t - mean_seconds;
    mean_bytes += w / weight * d_bytes;
    mean_seconds += w / weight * d_seconds;
    bytes_bytes += w * d_bytes * (m - mean_bytes);
    bytes_seconds += w * d_bytes * (t - mean_seconds);
    seconds_seconds += w * d_seconds * (t - mean_seconds);
    sum_u += m / t;
    sum_uu += (m / t) * (m / t);
    sum_v += 1 / t;
    sum_vv += 1 / (t * t);
    ++count;
  }
};

struct Line {
  double intercept = 0, slope = 0;
  double squared_relative_error = 0;  // sum of ((t - a - b m)/t)^2 over the piece
};

// The best line with a >= 0 and b >= 0: the unconstrained one if it is allowed, else the better
// of the two boundary lines (a convex problem in two variables has its optimum on one of them).
// Note sum w t^2 = count, since w = 1/t^2.
Line non_negative_line(const PieceMoments& p) {
  Line best{0, 0, std::numeric_limits<double>::infinity()};
  if (p.bytes_bytes > 0) {
    const double slope = p.bytes_seconds / p.bytes_bytes;
    const double intercept = p.mean_seconds - slope * p.mean_bytes;
    if (slope >= 0 && intercept >= 0)
      return {intercept, slope, std::max(0.0, p.seconds_seconds - p.bytes_seconds * slope)};
  }
  if (p.sum_uu > 0) {  // a = 0: b = sum u / sum u^2
    const Line origin{0, p.sum_u / p.sum_uu, std::max(0.0, p.count - p.sum_u * p.sum_u / p.sum_uu)};
    if (origin.squared_relative_error < best.squared_relative_error) best = origin;
  }
  const Line flat{p.sum_v / p.sum_vv, 0, std::max(0.0, p.count - p.sum_v * p.sum_v / p.sum_vv)};
  if (flat.squared_relative_error < best.squared_relative_error) best = flat;
  return best;
}

}  // namespace

HopModel ring_allreduce_hops(int ranks) {
  return {ring_allreduce_steps(ranks), allreduce_bus_factor(ranks)};
}

AlphaMeaning alpha_meaning(const results::AlphaBetaFit& fit, std::span<const double> seconds) {
  const double alpha = fit.alpha_seconds;
  if (std::isnan(alpha) || seconds.empty()) return AlphaMeaning::no_alpha;
  if (alpha < 0) return AlphaMeaning::negative;
  if (alpha > *std::min_element(seconds.begin(), seconds.end()))
    return AlphaMeaning::above_smallest_time;
  return AlphaMeaning::latency;
}

results::AlphaBetaFit fit_alpha_beta(std::span<const double> bytes, std::span<const double> seconds,
                                     HopModel hops) {
  check_lengths(bytes, seconds);
  results::AlphaBetaFit fit = unfitted();
  if (!fittable(bytes, seconds)) return fit;
  const std::size_t points = bytes.size();
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
  complete(fit, bytes, seconds, hops);
  return fit;
}

results::PiecewiseAlphaBetaFit fit_piecewise_alpha_beta(std::span<const double> bytes,
                                                        std::span<const double> seconds,
                                                        HopModel hops, int max_pieces,
                                                        int min_sizes_per_piece) {
  check_lengths(bytes, seconds);
  results::PiecewiseAlphaBetaFit result{{}, not_a_number, not_a_number};
  if (!fittable(bytes, seconds)) return result;
  // Ascending sizes.
  std::vector<std::size_t> order(bytes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return bytes[a] < bytes[b]; });
  std::vector<double> m, t;
  for (std::size_t k : order) {
    m.push_back(bytes[k]);
    t.push_back(seconds[k]);
  }
  const int sizes = int(m.size());
  const int least = std::max(2, min_sizes_per_piece);
  const int most_pieces = std::max(1, std::min(max_pieces, sizes / least));

  // cost[i][j]: the squared relative error of the best line through sizes i..j.
  constexpr double infinity = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> cost(sizes, std::vector<double>(sizes, infinity));
  for (int i = 0; i < sizes; ++i) {
    PieceMoments moments;
    for (int j = i; j < sizes; ++j) {
      moments.add(m[j], t[j]);
      if (j - i + 1 >= least || (most_pieces == 1 && j == sizes - 1 && i == 0))
        cost[i][j] = non_negative_line(moments).squared_relative_error;
    }
  }
  // best[k][j]: k+1 pieces over sizes 0..j; start[k][j]: where the last of them starts.
  std::vector<std::vector<double>> best(most_pieces, std::vector<double>(sizes, infinity));
  std::vector<std::vector<int>> start(most_pieces, std::vector<int>(sizes, 0));
  for (int j = 0; j < sizes; ++j) best[0][j] = cost[0][j];
  for (int k = 1; k < most_pieces; ++k)
    for (int j = 0; j < sizes; ++j)
      for (int i = 1; i <= j; ++i)
        if (best[k - 1][i - 1] + cost[i][j] < best[k][j]) {
          best[k][j] = best[k - 1][i - 1] + cost[i][j];
          start[k][j] = i;
        }
  const auto rms_of = [&](int k) { return std::sqrt(best[k][sizes - 1] / sizes); };
  double lowest = infinity;
  for (int k = 0; k < most_pieces; ++k) lowest = std::min(lowest, rms_of(k));
  int pieces = 0;
  while (pieces + 1 < most_pieces && !(rms_of(pieces) <= std::max(0.05, 1.25 * lowest))) ++pieces;

  // The split points, last piece first, then each piece's line again with its own errors.
  std::vector<std::pair<int, int>> ranges;
  for (int k = pieces, j = sizes - 1; k >= 0; --k) {
    const int i = k == 0 ? 0 : start[k][j];
    ranges.insert(ranges.begin(), {i, j});
    j = i - 1;
  }
  double squared_relative_errors = 0, max_relative_error = 0;
  for (const auto& [i, j] : ranges) {
    PieceMoments moments;
    for (int k = i; k <= j; ++k) moments.add(m[k], t[k]);
    const Line line = non_negative_line(moments);
    results::AlphaBetaPiece piece{m[i], m[j], unfitted()};
    piece.fit.line_intercept_seconds = line.intercept;
    piece.fit.line_seconds_per_byte = line.slope;
    complete(piece.fit, std::span(m).subspan(i, j - i + 1), std::span(t).subspan(i, j - i + 1),
             hops);
    for (int k = i; k <= j; ++k) {
      const double error = std::abs(t[k] - line.intercept - line.slope * m[k]) / t[k];
      squared_relative_errors += error * error;
      max_relative_error = std::max(max_relative_error, error);
    }
    result.pieces.push_back(piece);
  }
  result.relative_rms_error = std::sqrt(squared_relative_errors / sizes);
  result.max_relative_error = max_relative_error;
  return result;
}

const results::AlphaBetaPiece& piece_for(const results::PiecewiseAlphaBetaFit& fit, double bytes) {
  if (fit.pieces.empty()) throw std::invalid_argument("piecewise alpha-beta fit without pieces");
  for (std::size_t k = 0; k + 1 < fit.pieces.size(); ++k) {
    const auto& piece = fit.pieces[k];
    if (bytes <= piece.max_bytes) return piece;
    // Between this piece and the next: the nearer on a log scale.
    if (bytes < fit.pieces[k + 1].min_bytes &&
        bytes * bytes <= piece.max_bytes * fit.pieces[k + 1].min_bytes)
      return piece;
  }
  return fit.pieces.back();
}

double fitted_seconds(const results::PiecewiseAlphaBetaFit& fit, double bytes) {
  const auto& line = piece_for(fit, bytes).fit;
  return line.line_intercept_seconds + line.line_seconds_per_byte * bytes;
}

}  // namespace dlscale::analysis
