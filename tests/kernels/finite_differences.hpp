// Shared tools of the gradient checks: seeded test values, central finite differences, and a
// comparison that names the first index that differs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "core/random.hpp"

namespace dlscale::testing {

inline constexpr double step_size = 1e-6;
inline constexpr double tolerance = 1e-7;

inline std::vector<double> random_values(std::size_t count, std::uint64_t stream) {
  const CounterRandom random(1234, stream);
  std::vector<double> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = random.normal(i);
  return values;
}

// Central differences of `loss` with respect to every entry of `x` (changed and restored).
inline std::vector<double> numerical_gradient(std::vector<double>& x,
                                              const std::function<double()>& loss) {
  std::vector<double> gradient(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + step_size;
    const double above = loss();
    x[i] = saved - step_size;
    const double below = loss();
    x[i] = saved;
    gradient[i] = (above - below) / (2 * step_size);
  }
  return gradient;
}

inline void expect_near_all(const std::vector<double>& actual, const std::vector<double>& expected,
                            double relative_tolerance, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], relative_tolerance * (1 + std::abs(expected[i])))
        << what << " differs at index " << i;
}

inline void expect_gradients_match(const std::vector<double>& analytic,
                                   const std::vector<double>& numerical, const char* what) {
  expect_near_all(analytic, numerical, tolerance, what);
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace dlscale::testing
