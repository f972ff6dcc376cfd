// The gradient noise scale estimator on a problem whose noise scale is known exactly: per-sample
// gradients g = G + e, e ~ N(0, diag(sigma^2)), so B_noise = sum(sigma^2) / |G|^2. Ranks average
// their samples, the global gradient averages the ranks, as data-parallel training does.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "analysis/gradient_noise_scale.hpp"

namespace dlscale::analysis {
namespace {

struct KnownProblem {
  std::vector<double> gradient;  // G
  std::vector<double> sigma;     // per coordinate
  double noise_scale() const {
    double trace = 0, squared = 0;
    for (std::size_t i = 0; i < gradient.size(); ++i) {
      trace += sigma[i] * sigma[i];
      squared += gradient[i] * gradient[i];
    }
    return trace / squared;
  }
};

KnownProblem make_problem(std::size_t dimensions, double gradient_size, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> spread(0.5, 1.5);
  KnownProblem problem;
  for (std::size_t i = 0; i < dimensions; ++i) {
    problem.gradient.push_back(gradient_size * spread(random) * (i % 2 ? 1 : -1));
    problem.sigma.push_back(spread(random));
  }
  return problem;
}

// `iterations` of `ranks` ranks with `batch` samples each: the squared norms each would record.
std::vector<GradientNormSample> train(const KnownProblem& problem, int ranks, int batch,
                                      int iterations, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::normal_distribution<double> normal;
  const std::size_t d = problem.gradient.size();
  std::vector<GradientNormSample> samples;
  for (int iteration = 0; iteration < iterations; ++iteration) {
    std::vector<double> global(d, 0.0);
    GradientNormSample sample;
    for (int rank = 0; rank < ranks; ++rank) {
      double squared = 0;
      for (std::size_t i = 0; i < d; ++i) {
        // The mean of `batch` samples' noise is N(0, sigma^2 / batch).
        const double local =
            problem.gradient[i] + problem.sigma[i] / std::sqrt(batch) * normal(random);
        squared += local * local;
        global[i] += local / ranks;
      }
      sample.local_squared_norm += squared / ranks;
    }
    for (double g : global) sample.global_squared_norm += g * g;
    samples.push_back(sample);
  }
  return samples;
}

TEST(GradientNoiseScale, RecoversAKnownNoiseScaleWithinItsInterval) {
  // B_noise near 64, measured with batches of 16 on 4 ranks (a global batch of 64).
  const KnownProblem problem = make_problem(200, 0.125, 1);
  const double truth = problem.noise_scale();
  const auto estimate = estimate_noise_scale(train(problem, 4, 16, 400, 2), 16, 64);
  ASSERT_TRUE(estimate.has_value());
  std::printf("true B_noise %.2f, estimated %.2f [%.2f, %.2f]\n", truth, estimate->noise_scale,
              estimate->noise_scale_low, estimate->noise_scale_high);
  EXPECT_NEAR(estimate->noise_scale, truth, 0.1 * truth);
  EXPECT_LE(estimate->noise_scale_low, truth);
  EXPECT_GE(estimate->noise_scale_high, truth);
  EXPECT_LT(estimate->noise_scale_high - estimate->noise_scale_low, 0.4 * truth);
}

TEST(GradientNoiseScale, TracksTheNoiseScaleAcrossTwoDecades) {
  // The same noise, gradients sqrt(10)x smaller each time: B_noise grows 10x each time, from
  // about 1 to about 100 samples (batches of 32 and 256 measure it).
  for (const double gradient_size : {1.0, 0.316, 0.1}) {
    const KnownProblem problem = make_problem(100, gradient_size, 3);
    const double truth = problem.noise_scale();
    const auto estimate = estimate_noise_scale(train(problem, 8, 32, 2000, 4), 32, 256);
    ASSERT_TRUE(estimate.has_value()) << "B_noise " << truth;
    std::printf("true B_noise %.2f, estimated %.2f [%.2f, %.2f]\n", truth, estimate->noise_scale,
                estimate->noise_scale_low, estimate->noise_scale_high);
    EXPECT_NEAR(estimate->noise_scale, truth, 0.1 * truth);
  }
}

TEST(GradientNoiseScale, OneRankHasNoneAndSaysWhy) {
  std::string why;
  EXPECT_FALSE(estimate_noise_scale({{1.0, 1.0}}, 32, 32, &why).has_value());
  EXPECT_NE(why.find("two or more ranks"), std::string::npos) << why;
}

TEST(GradientNoiseScale, NoiseThatHidesTheGradientIsSaidSo) {
  // Local norms far above the global one, and the global one no larger than the noise predicts:
  // the estimated |G|^2 is negative.
  std::string why;
  EXPECT_FALSE(estimate_noise_scale({{10.0, 2.0}, {10.0, 2.0}}, 4, 8, &why).has_value());
  EXPECT_NE(why.find("hides it"), std::string::npos) << why;
}

}  // namespace
}  // namespace dlscale::analysis
