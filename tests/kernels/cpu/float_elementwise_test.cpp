// The CPU device's float sigmoid, softmax cross-entropy, GELU and causal softmax (oneDNN's
// element-wise kernels) and layer norm against its double loops: large logits that need the max
// subtracted, many classes, in-place sigmoid.
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

std::vector<float> spread_values(std::size_t count, double low, double high) {
  std::vector<float> values(count);
  std::mt19937 random(5);
  std::uniform_real_distribution<double> value(low, high);
  for (float& v : values) v = float(value(random));
  return values;
}
std::vector<double> widened(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

TEST(FloatElementwise, GeluAndItsGradientMatchTheDoubleLoop) {
  CpuDevice device(2);
  const std::size_t count = 10007;
  const std::vector<float> x = spread_values(count, -8, 8), dy = spread_values(count, -1, 1);
  std::vector<float> y(count), dx(count);
  std::vector<double> expected_y(count), expected_dx(count);
  device.math_float().gelu_forward(count, x.data(), y.data());
  device.math_float().gelu_backward(count, x.data(), dy.data(), dx.data());
  device.math_double().gelu_forward(count, widened(x).data(), expected_y.data());
  device.math_double().gelu_backward(count, widened(x).data(), widened(dy).data(),
                                     expected_dx.data());
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_NEAR(y[i], expected_y[i], 1e-5 * (1 + std::abs(expected_y[i]))) << "y at " << i;
    ASSERT_NEAR(dx[i], expected_dx[i], 1e-5) << "dx at " << i;
  }
}

TEST(FloatElementwise, CausalSoftmaxMatchesTheDoubleLoopWithZerosAfterTheDiagonal) {
  CpuDevice device(2);
  const int heads = 3, rows = 67;  // each head's rows are causal within that head
  std::vector<float> scores = spread_values(std::size_t(heads) * rows * rows, -40, 40);
  std::vector<double> expected = widened(scores);
  device.math_float().causal_softmax_forward(heads, rows, scores.data());
  device.math_double().causal_softmax_forward(heads, rows, expected.data());
  for (int h = 0; h < heads; ++h)
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < rows; ++c) {
        const std::size_t i = (std::size_t(h) * rows + r) * rows + c;
        if (c > r)
          ASSERT_EQ(scores[i], 0.0f)
              << "head " << h << " row " << r << " column " << c << " is after the diagonal";
        else
          ASSERT_NEAR(scores[i], expected[i], 1e-6)
              << "head " << h << " row " << r << " column " << c;
      }
}

TEST(FloatElementwise, LayerNormMatchesTheDoubleLoop) {
  CpuDevice device(2);
  const int rows = 33, width = 200;
  const std::vector<float> x = spread_values(std::size_t(rows) * width, -3, 5);
  const std::vector<float> dy = spread_values(x.size(), -1, 1);
  const std::vector<float> scale_shift = spread_values(2 * std::size_t(width), -2, 2);
  std::vector<float> y(x.size()), dx(x.size()), mean(rows), variance(rows), dscale_shift(2 * width);
  std::vector<double> expected_y(x.size()), expected_dx(x.size()), expected_mean(rows),
      expected_variance(rows), expected_dscale_shift(2 * width);
  auto& single = device.math_float();
  single.layer_norm_forward(rows, width, x.data(), scale_shift.data(), y.data(), mean.data(),
                            variance.data());
  single.layer_norm_backward(rows, width, x.data(), scale_shift.data(), mean.data(),
                             variance.data(), dy.data(), dx.data(), dscale_shift.data());
  auto& exact = device.math_double();
  exact.layer_norm_forward(rows, width, widened(x).data(), widened(scale_shift).data(),
                           expected_y.data(), expected_mean.data(), expected_variance.data());
  exact.layer_norm_backward(rows, width, widened(x).data(), widened(scale_shift).data(),
                            expected_mean.data(), expected_variance.data(), widened(dy).data(),
                            expected_dx.data(), expected_dscale_shift.data());
  for (std::size_t i = 0; i < y.size(); ++i) {
    ASSERT_NEAR(y[i], expected_y[i], 1e-5 * (1 + std::abs(expected_y[i]))) << "y at " << i;
    ASSERT_NEAR(dx[i], expected_dx[i], 1e-4 * (1 + std::abs(expected_dx[i]))) << "dx at " << i;
  }
  for (std::size_t i = 0; i < dscale_shift.size(); ++i)
    ASSERT_NEAR(dscale_shift[i], expected_dscale_shift[i],
                1e-4 * (1 + std::abs(expected_dscale_shift[i])))
        << "scale or shift gradient at " << i;
}

}  // namespace
}  // namespace dlscale::kernels
