// The CPU device's float sigmoid and softmax cross-entropy (oneDNN's element-wise kernels) against
// its double loops: large logits that need the max subtracted, many classes, in-place sigmoid.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_device.hpp"

namespace dlscale::kernels {
namespace {

TEST(FloatElementwise, SoftmaxCrossEntropyMatchesTheDoubleLoop) {
  CpuDevice device(2);
  const int rows = 37, classes = 1000;
  std::mt19937 random(3);
  std::uniform_real_distribution<double> logit(-80, 80);
  std::uniform_int_distribution<std::int32_t> label(0, classes - 1);
  std::vector<double> logits_double(std::size_t(rows) * classes);
  for (double& z : logits_double) z = logit(random);
  std::vector<float> logits(logits_double.begin(), logits_double.end());
  for (std::size_t i = 0; i < logits.size(); ++i) logits_double[i] = logits[i];  // same inputs
  std::vector<std::int32_t> labels(rows);
  for (auto& l : labels) l = label(random);

  std::vector<double> expected_gradient(logits.size());
  double expected_loss = 0;
  device.math_double().softmax_cross_entropy(rows, classes, logits_double.data(), labels.data(),
                                             expected_gradient.data(), &expected_loss);
  std::vector<float> gradient(logits.size());
  float loss = 0;
  device.math_float().softmax_cross_entropy(rows, classes, logits.data(), labels.data(),
                                            gradient.data(), &loss);
  EXPECT_NEAR(loss, expected_loss, 1e-5 * std::abs(expected_loss));
  for (std::size_t i = 0; i < gradient.size(); ++i)
    ASSERT_NEAR(gradient[i], expected_gradient[i], 1e-6) << "element " << i;
}

TEST(FloatElementwise, SigmoidMatchesTheDoubleLoopInPlace) {
  CpuDevice device(2);
  const std::size_t count = 100003;  // not a multiple of any vector width
  std::vector<float> values(count);
  std::vector<double> expected(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = float(-30.0 + 60.0 * double(i) / count);
  for (std::size_t i = 0; i < count; ++i) expected[i] = values[i];
  device.math_double().sigmoid_forward(count, expected.data(), expected.data());
  device.math_float().sigmoid_forward(count, values.data(), values.data());
  for (std::size_t i = 0; i < count; ++i)
    ASSERT_NEAR(values[i], expected[i], 2e-7 + 1e-6 * expected[i]) << "element " << i;
}

}  // namespace
}  // namespace dlscale::kernels
