// AdamW on the CPU device against torch.optim.AdamW's definition, computed here in double: the
// update step by step, its bias correction and decoupled weight decay, the learning rate it reads,
// the gradient norm and non-finite flag it shares with SgdMomentum, and the Optimizer seam.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_device.hpp"
#include "model/adamw.hpp"
#include "model/optimizer.hpp"
#include "model/sgd_momentum.hpp"
#include "tests/kernels/finite_differences.hpp"

namespace dlscale::model {
namespace {

using kernels::AdamWHyperparameters;
using kernels::CpuDevice;

// torch.optim.AdamW's step, written as its documentation states it, in double.
struct ReferenceAdamW {
  double beta1, beta2, epsilon, weight_decay;
  std::vector<double> parameters, first_moment, second_moment;
  int t = 0;

  template <typename T>
  ReferenceAdamW(const AdamWHyperparameters<T>& hyperparameters, const std::vector<double>& initial)
      : beta1(hyperparameters.beta1),
        beta2(hyperparameters.beta2),
        epsilon(hyperparameters.epsilon),
        weight_decay(hyperparameters.weight_decay),
        parameters(initial),
        first_moment(initial.size(), 0.0),
        second_moment(initial.size(), 0.0) {}

  void step(double learning_rate, double gradient_scale, const std::vector<double>& gradients) {
    ++t;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const double g = gradient_scale * gradients[i];
      parameters[i] -= learning_rate * weight_decay * parameters[i];
      first_moment[i] = beta1 * first_moment[i] + (1 - beta1) * g;
      second_moment[i] = beta2 * second_moment[i] + (1 - beta2) * g * g;
      const double corrected_first = first_moment[i] / (1 - std::pow(beta1, t));
      const double corrected_second = second_moment[i] / (1 - std::pow(beta2, t));
      parameters[i] -= learning_rate * corrected_first / (std::sqrt(corrected_second) + epsilon);
    }
  }
};

template <typename T, typename From>
std::vector<T> rounded_to(const std::vector<From>& values) {
  return std::vector<T>(values.begin(), values.end());
}

// Fails naming the first few indices where |actual - expected| > tolerance(expected).
template <typename T, typename Tolerance>
void expect_near_all(const std::string& what, const std::vector<double>& expected,
                     const std::vector<T>& actual, Tolerance tolerance) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  std::size_t failures = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double allowed = tolerance(expected[i]);
    if (std::abs(double(actual[i]) - expected[i]) <= allowed) continue;
    if (++failures <= 5)
      ADD_FAILURE() << std::setprecision(17) << what << ": index " << i << ": got " << actual[i]
                    << ", reference " << expected[i] << " (tolerance " << allowed << ")";
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " of " << expected.size() << " differ";
}

template <typename T>
class AdamWTest : public ::testing::Test {};
using ScalarTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AdamWTest, ScalarTypes);

// Five steps with a new gradient each, a learning rate changed after the second, a gradient
// scale of 1/4 and a weight decay large enough to see; 100003 parameters take the parallel loop.
TYPED_TEST(AdamWTest, FollowsTheDoublePrecisionReferenceStepByStep) {
  using T = TypeParam;
  CpuDevice device(2);
  const std::size_t count = 100003;
  const AdamWHyperparameters<T> hyperparameters{.weight_decay = T(0.1)};
  const double gradient_scale = 0.25;
  const std::vector<double> initial = rounded_to<double>(
      rounded_to<T>(testing::random_values(count, 1)));  // exactly representable in T
  ReferenceAdamW reference(hyperparameters, initial);
  std::vector<T> parameters = rounded_to<T>(initial);
  AdamW<T> optimizer(device, count, T(0.01), hyperparameters);

  for (int t = 1; t <= 5; ++t) {
    if (t == 3) optimizer.set_learning_rate(T(0.003));
    const std::vector<T> gradients = rounded_to<T>(testing::random_values(count, 10 + t));
    reference.step(double(optimizer.learning_rate()), gradient_scale,
                   rounded_to<double>(gradients));
    optimizer.step(parameters, gradients, T(gradient_scale));
    EXPECT_EQ(optimizer.steps_taken(), t);
    // Each step rounds a handful of terms the size of |p| or of the step (a few learning rates,
    // below 1), and the errors add up over the steps. A step without bias correction, or with
    // the decay through the gradient, misses by 1e-3 or more.
    expect_near_all("parameters after step " + std::to_string(t), reference.parameters, parameters,
                    [&](double expected) {
                      return 16 * std::numeric_limits<T>::epsilon() * t * (std::abs(expected) + 1);
                    });
  }
  EXPECT_FALSE(optimizer.saw_nonfinite_gradient());
}

// With the same gradient every step, m and v converge on g and g^2 only slowly; the bias
// correction divides that out, so each step moves every parameter by the learning rate exactly
// (less epsilon's share). Without it the first step would be 0.1 / sqrt(0.001) = 3.2 times larger.
TEST(AdamW, BiasCorrectionMakesEveryStepOfAConstantGradientTheLearningRate) {
  CpuDevice device(1);
  const double learning_rate = 0.01;
  AdamW<double> optimizer(device, 3, learning_rate, {.epsilon = 0, .weight_decay = 0});
  std::vector<double> parameters = {1.0, -2.0, 0.5};
  const std::vector<double> gradients = {3.0, -0.25, 1e-3};
  for (int t = 1; t <= 3; ++t) {
    const std::vector<double> before = parameters;
    optimizer.step(parameters, gradients, 1.0);
    for (std::size_t i = 0; i < parameters.size(); ++i)
      EXPECT_NEAR(before[i] - parameters[i], std::copysign(learning_rate, gradients[i]), 1e-15)
          << "parameter " << i << " at step " << t;
  }
}

// A zero gradient leaves m and v at zero and the Adam term at 0 / epsilon = 0: what remains is
// the decay, p *= 1 - learning_rate * weight_decay, applied to the parameter and not through the
// gradient (so no moment average carries it).
TEST(AdamW, WeightDecayIsDecoupledFromTheGradient) {
  CpuDevice device(1);
  AdamW<double> optimizer(device, 2, 0.1, {.weight_decay = 0.5});
  std::vector<double> parameters = {4.0, -1.0};
  const std::vector<double> gradients = {0.0, 0.0};
  for (int t = 0; t < 3; ++t) optimizer.step(parameters, gradients, 1.0);
  EXPECT_NEAR(parameters[0], 4.0 * std::pow(0.95, 3), 1e-14);
  EXPECT_NEAR(parameters[1], -1.0 * std::pow(0.95, 3), 1e-14);
}

TEST(AdamW, DefaultsAreTorchs) {
  const AdamWHyperparameters<float> defaults;
  EXPECT_EQ(defaults.beta1, 0.9f);
  EXPECT_EQ(defaults.beta2, 0.999f);
  EXPECT_EQ(defaults.epsilon, 1e-8f);
  EXPECT_EQ(defaults.weight_decay, 0.01f);
}

// The norm is of the scaled gradient, sum of (scale * g)^2 in double, and overwrites the slot.
TEST(AdamW, WritesTheScaledGradientsSquaredNormFromItsOwnPass) {
  CpuDevice device(2);
  const std::size_t count = 100000;
  const std::vector<float> gradients = rounded_to<float>(testing::random_values(count, 3));
  std::vector<float> parameters(count, 1.0f);
  AdamW<float> optimizer(device, count, 0.01f);
  double expected = 0;
  for (float g : gradients) expected += double(0.5f * g) * double(0.5f * g);
  double squared_norm = -1;  // must be overwritten, not added to
  optimizer.step(parameters, gradients, 0.5f, &squared_norm);
  EXPECT_NEAR(squared_norm, expected, 1e-12 * expected);
}

TEST(AdamW, ANaNOrInfiniteGradientIsFlaggedAndStaysFlagged) {
  CpuDevice device(2);
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    const std::size_t count = 100000;  // enough for the parallel loop
    AdamW<float> optimizer(device, count, 0.01f);
    std::vector<float> parameters(count, 1.0f), gradients(count, 0.5f);
    optimizer.step(parameters, gradients, 1.0f);
    EXPECT_FALSE(optimizer.saw_nonfinite_gradient()) << "finite gradients raised the flag";
    gradients[count - 7] = bad;
    optimizer.step(parameters, gradients, 1.0f);
    EXPECT_TRUE(optimizer.saw_nonfinite_gradient()) << "a gradient of " << bad << " went unseen";
    gradients[count - 7] = 0.5f;
    optimizer.step(parameters, gradients, 1.0f);
    EXPECT_TRUE(optimizer.saw_nonfinite_gradient()) << "the flag was cleared";
  }
}

// The training loop may hold either optimizer as an Optimizer: the call reaches the right update.
TEST(Optimizer, EitherOptimizerStepsThroughTheSeam) {
  CpuDevice device(1);
  SgdMomentum<double> sgd(device, 1, 0.1, 0.9);
  AdamW<double> adamw(device, 1, 0.1, {.weight_decay = 0});
  for (Optimizer<double>* optimizer :
       {static_cast<Optimizer<double>*>(&sgd), static_cast<Optimizer<double>*>(&adamw)}) {
    std::vector<double> parameter = {1.0};
    const std::vector<double> gradient = {4.0};
    optimizer->step(parameter, gradient, 0.5, nullptr);
    EXPECT_FALSE(optimizer->saw_nonfinite_gradient());
    // SGD moves by rate * scale * g = 0.2; AdamW's first step by the rate, 0.1 (less epsilon's).
    EXPECT_NEAR(parameter[0], optimizer == &sgd ? 0.8 : 0.9, 1e-9);
  }
}

}  // namespace
}  // namespace dlscale::model
