// Every layer, the loss and a whole network, checked against central finite differences in
// double precision: analytic backward must match (f(x+h) - f(x-h)) / 2h.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "core/random.hpp"
#include "kernels/cpu_device.hpp"
#include "kernels/dense_layer.hpp"
#include "kernels/network.hpp"
#include "kernels/sgd_momentum.hpp"
#include "kernels/sigmoid_layer.hpp"
#include "workloads/fcn_workload.hpp"

namespace dlscale::kernels {
namespace {

constexpr double step_size = 1e-6;
constexpr double tolerance = 1e-7;

std::vector<double> random_values(std::size_t count, std::uint64_t stream) {
  const CounterRandom random(1234, stream);
  std::vector<double> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = random.normal(i);
  return values;
}

// Central differences of `loss` with respect to every entry of `x` (changed and restored).
std::vector<double> numerical_gradient(std::vector<double>& x, const std::function<double()>& loss) {
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

void expect_gradients_match(const std::vector<double>& analytic,
                            const std::vector<double>& numerical, const char* what) {
  ASSERT_EQ(analytic.size(), numerical.size()) << what;
  for (std::size_t i = 0; i < analytic.size(); ++i)
    EXPECT_NEAR(analytic[i], numerical[i], tolerance * (1 + std::abs(numerical[i])))
        << what << " differs at index " << i;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// Checks a layer through the scalar loss L = sum(y * weights), whose output gradient is `weights`.
// The CPU device's memory is host memory, so host vectors serve as device buffers here.
void check_layer(Layer<double>& layer, int batch) {
  CpuDevice device(1);
  auto& math = device.math<double>();
  std::vector<double> parameters = random_values(layer.parameter_count(), 1);
  std::vector<double> parameter_gradient(layer.parameter_count());
  layer.bind(parameters.data(), parameter_gradient.data());
  std::vector<double> x = random_values(batch * layer.input_size(), 2);
  const std::vector<double> output_weights = random_values(batch * layer.output_size(), 3);
  std::vector<double> y(output_weights.size());

  const auto loss = [&] {
    layer.forward(math, batch, x.data(), y.data());
    return dot(y, output_weights);
  };
  loss();
  std::vector<double> input_gradient(x.size());
  layer.backward(math, batch, x.data(), y.data(), output_weights.data(), input_gradient.data());
  const std::vector<double> analytic_parameter_gradient = parameter_gradient;

  expect_gradients_match(input_gradient, numerical_gradient(x, loss), "input gradient");
  expect_gradients_match(analytic_parameter_gradient, numerical_gradient(parameters, loss),
                         "parameter gradient");
}

TEST(GradientCheck, DenseLayerMatchesFiniteDifferences) {
  DenseLayer<double> layer(7, 5);
  check_layer(layer, 3);
}

TEST(GradientCheck, SigmoidLayerMatchesFiniteDifferences) {
  SigmoidLayer<double> layer(6);
  check_layer(layer, 4);
}

TEST(GradientCheck, SoftmaxCrossEntropyMatchesFiniteDifferences) {
  CpuDevice device(1);
  const int rows = 4, classes = 5;
  std::vector<double> logits = random_values(rows * classes, 4);
  const std::vector<std::int32_t> labels = {0, 3, 4, 1};
  std::vector<double> analytic(logits.size()), scratch(logits.size());
  device.math<double>().softmax_cross_entropy(rows, classes, logits.data(), labels.data(),
                                              analytic.data());
  const auto loss = [&] {
    return device.math<double>().softmax_cross_entropy(rows, classes, logits.data(),
                                                       labels.data(), scratch.data());
  };
  expect_gradients_match(analytic, numerical_gradient(logits, loss), "logit gradient");
}

TEST(GradientCheck, SoftmaxCrossEntropyOfUniformLogitsIsLogClasses) {
  CpuDevice device(1);
  const std::vector<double> logits(3 * 10, 0.5);
  const std::vector<std::int32_t> labels = {1, 2, 9};
  std::vector<double> gradient(logits.size());
  EXPECT_NEAR(device.math<double>().softmax_cross_entropy(3, 10, logits.data(), labels.data(),
                                                          gradient.data()),
              std::log(10.0), 1e-12);
}

TEST(GradientCheck, WholeFcnNetworkMatchesFiniteDifferences) {
  CpuDevice device(1);
  const auto workload = workloads::parse_fcn_spec("6,5,4,3");
  const int batch = 4;
  Network<double> network(device, workload->make_layers<double>(), batch);
  network.initialize(7);
  std::vector<double> x = random_values(batch * 6, 5);
  const std::vector<std::int32_t> labels = {0, 2, 1, 2};
  const auto loss = [&] { return network.forward_loss(batch, x.data(), labels.data()); };
  loss();
  network.backward(batch, x.data());
  const std::vector<double> analytic(network.gradients().begin(), network.gradients().end());

  // The network's parameters live in device memory, which is host memory on the CPU device.
  std::vector<double> parameters(network.parameters().begin(), network.parameters().end());
  const auto loss_at = [&] {
    std::copy(parameters.begin(), parameters.end(), network.parameters().begin());
    return loss();
  };
  expect_gradients_match(analytic, numerical_gradient(parameters, loss_at),
                         "network parameter gradient");
}

TEST(Optimizer, SgdMomentumFollowsTheHeavyBallRecurrence) {
  CpuDevice device(1);
  SgdMomentum<double> optimizer(device, 1, 0.1, 0.9);
  std::vector<double> parameter = {1.0};
  const std::vector<double> gradient = {2.0};
  optimizer.step(parameter, gradient, 0.5);  // v = 1.0, p = 1 - 0.1
  optimizer.step(parameter, gradient, 0.5);  // v = 0.9 + 1.0, p = 0.9 - 0.19
  EXPECT_NEAR(parameter[0], 0.71, 1e-15);
}

}  // namespace
}  // namespace dlscale::kernels
