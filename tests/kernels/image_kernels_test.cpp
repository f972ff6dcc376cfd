// Convolution, pooling and batch norm: the double-precision reference oracles against finite differences,
// then the CPU device's oneDNN kernels (float) against the oracles, forward and backward, over
// strides, padding, groups (depthwise included) and both pooling kinds.
#include <gtest/gtest.h>

#include "kernels/cpu_device.hpp"
#include "tests/kernels/finite_differences.hpp"
#include "tests/kernels/reference_image_kernels.hpp"

namespace dlscale::kernels {
namespace {

using namespace dlscale::testing;

constexpr int batch = 2;
constexpr double float_tolerance = 2e-5;

std::vector<float> to_float(const std::vector<double>& values) {
  return {values.begin(), values.end()};
}
std::vector<double> to_double(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

const std::vector<ConvolutionGeometry> convolution_cases = {
    {{3, 6, 5}, 4, 3, 1, 1, 1},   // same-size 3x3
    {{4, 7, 7}, 6, 3, 2, 1, 1},   // stride 2
    {{2, 5, 5}, 3, 5, 1, 2, 1},   // 5x5 with padding 2
    {{4, 6, 6}, 6, 3, 1, 1, 2},   // 2 groups
    {{6, 5, 5}, 6, 3, 2, 1, 6},   // depthwise, stride 2
    {{3, 9, 9}, 4, 1, 1, 0, 1},   // 1x1
    {{4, 6, 6}, 8, 1, 2, 0, 1, false}};  // 1x1 stride 2 without bias, as before batch norm

const std::vector<PoolingGeometry> pooling_cases = {
    {{3, 6, 6}, PoolingKind::max, 2, 2, 0},
    {{2, 7, 7}, PoolingKind::max, 3, 2, 0},
    {{2, 7, 7}, PoolingKind::max, 3, 2, 1},
    {{3, 6, 6}, PoolingKind::average, 2, 2, 0},
    {{2, 7, 7}, PoolingKind::average, 3, 2, 1},
    {{4, 5, 5}, PoolingKind::average, 5, 1, 0}};  // global average

class ConvolutionCase : public ::testing::TestWithParam<ConvolutionGeometry> {};
class PoolingCase : public ::testing::TestWithParam<PoolingGeometry> {};

TEST_P(ConvolutionCase, ReferenceMatchesFiniteDifferences) {
  const ConvolutionGeometry g = GetParam();
  std::vector<double> x = random_values(batch * g.input.size(), 1);
  std::vector<double> weights = random_values(g.weight_count(), 2);
  std::vector<double> bias = random_values(g.bias ? g.output_channels : 0, 3);
  const std::vector<double> output_weights = random_values(batch * g.output().size(), 4);
  const auto loss = [&] {
    return dot(reference::convolution_forward(g, batch, x, weights, bias), output_weights);
  };
  const auto grads = reference::convolution_backward(g, batch, x, weights, output_weights);
  expect_gradients_match(grads.input, numerical_gradient(x, loss), "input gradient");
  expect_gradients_match(grads.weights, numerical_gradient(weights, loss), "weight gradient");
  expect_gradients_match(grads.bias, numerical_gradient(bias, loss), "bias gradient");
}

TEST_P(ConvolutionCase, OneDnnMatchesReference) {
  const ConvolutionGeometry g = GetParam();
  // Inputs rounded to float first, so both sides compute on the same values.
  const auto x = to_double(to_float(random_values(batch * g.input.size(), 1)));
  const auto weights = to_double(to_float(random_values(g.weight_count(), 2)));
  const auto bias = to_double(to_float(random_values(g.bias ? g.output_channels : 0, 3)));
  const auto dy = to_double(to_float(random_values(batch * g.output().size(), 4)));

  CpuDevice device(1);
  auto kernel = device.make_convolution(g);
  std::vector<float> y(dy.size()), dx(x.size()), dweights(weights.size()), dbias(bias.size());
  kernel->forward(batch, to_float(x).data(), to_float(weights).data(), to_float(bias).data(),
                  y.data());
  kernel->backward(batch, to_float(x).data(), to_float(weights).data(), to_float(dy).data(),
                   dx.data(), dweights.data(), dbias.data());

  const auto expected = reference::convolution_backward(g, batch, x, weights, dy);
  expect_near_all(to_double(y), reference::convolution_forward(g, batch, x, weights, bias),
                  float_tolerance, "output");
  expect_near_all(to_double(dx), expected.input, float_tolerance, "input gradient");
  expect_near_all(to_double(dweights), expected.weights, float_tolerance, "weight gradient");
  expect_near_all(to_double(dbias), expected.bias, float_tolerance, "bias gradient");
}

TEST_P(PoolingCase, ReferenceMatchesFiniteDifferences) {
  const PoolingGeometry g = GetParam();
  std::vector<double> x = random_values(batch * g.input.size(), 5);
  const std::vector<double> output_weights = random_values(batch * g.output().size(), 6);
  const auto loss = [&] { return dot(reference::pooling_forward(g, batch, x), output_weights); };
  expect_gradients_match(reference::pooling_backward(g, batch, x, output_weights),
                         numerical_gradient(x, loss), "input gradient");
}

TEST_P(PoolingCase, OneDnnMatchesReference) {
  const PoolingGeometry g = GetParam();
  const auto x = to_double(to_float(random_values(batch * g.input.size(), 5)));
  const auto dy = to_double(to_float(random_values(batch * g.output().size(), 6)));
  CpuDevice device(1);
  auto kernel = device.make_pooling(g);
  std::vector<float> y(dy.size()), dx(x.size());
  kernel->forward(batch, to_float(x).data(), y.data());
  kernel->backward(batch, to_float(dy).data(), dx.data());
  expect_near_all(to_double(y), reference::pooling_forward(g, batch, x), float_tolerance, "output");
  expect_near_all(to_double(dx), reference::pooling_backward(g, batch, x, dy), float_tolerance,
                  "input gradient");
}

TEST(BatchNorm, ReferenceMatchesFiniteDifferences) {
  const ImageShape shape{3, 4, 5};
  std::vector<double> x = random_values(batch * shape.size(), 7);
  std::vector<double> scale = random_values(shape.channels, 8);
  std::vector<double> shift = random_values(shape.channels, 9);
  const std::vector<double> output_weights = random_values(x.size(), 10);
  const auto loss = [&] {
    return dot(reference::batch_norm(shape, batch, x, scale, shift, output_weights).output,
               output_weights);
  };
  const auto analytic = reference::batch_norm(shape, batch, x, scale, shift, output_weights);
  // The normalisation divides by a standard deviation, so allow a little more rounding.
  expect_near_all(analytic.input_gradient, numerical_gradient(x, loss), 1e-6, "input gradient");
  expect_near_all(analytic.scale_gradient, numerical_gradient(scale, loss), 1e-6, "scale gradient");
  expect_near_all(analytic.shift_gradient, numerical_gradient(shift, loss), 1e-6, "shift gradient");
}

TEST(BatchNorm, OneDnnMatchesReference) {
  const ImageShape shape{8, 5, 5};
  const auto x = to_double(to_float(random_values(batch * shape.size(), 7)));
  const auto scale = to_double(to_float(random_values(shape.channels, 8)));
  const auto shift = to_double(to_float(random_values(shape.channels, 9)));
  const auto dy = to_double(to_float(random_values(x.size(), 10)));
  CpuDevice device(1);
  auto kernel = device.make_batch_norm(shape);
  std::vector<float> y(x.size()), dx(x.size()), dscale(shape.channels), dshift(shape.channels);
  kernel->forward(batch, to_float(x).data(), to_float(scale).data(), to_float(shift).data(),
                  y.data());
  kernel->backward(batch, to_float(x).data(), to_float(scale).data(), to_float(shift).data(),
                   to_float(dy).data(), dx.data(), dscale.data(), dshift.data());
  const auto expected = reference::batch_norm(shape, batch, x, scale, shift, dy);
  expect_near_all(to_double(y), expected.output, 1e-4, "output");
  expect_near_all(to_double(dx), expected.input_gradient, 1e-4, "input gradient");
  expect_near_all(to_double(dscale), expected.scale_gradient, 1e-4, "scale gradient");
  expect_near_all(to_double(dshift), expected.shift_gradient, 1e-4, "shift gradient");
}

INSTANTIATE_TEST_SUITE_P(Geometries, ConvolutionCase, ::testing::ValuesIn(convolution_cases));
INSTANTIATE_TEST_SUITE_P(Geometries, PoolingCase, ::testing::ValuesIn(pooling_cases));

}  // namespace
}  // namespace dlscale::kernels
