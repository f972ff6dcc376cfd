// How far a reduced-precision result (bf16, tf32) is from its float reference, as one number.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace dlscale::kernels {

// sqrt(sum (actual - expected)^2 / sum expected^2)
inline double relative_l2(const std::vector<float>& expected, const std::vector<float>& actual) {
  double squared = 0, difference = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    squared += double(expected[i]) * expected[i];
    difference += (double(expected[i]) - actual[i]) * (double(expected[i]) - actual[i]);
  }
  return std::sqrt(difference / std::max(squared, 1e-60));
}

}  // namespace dlscale::kernels
