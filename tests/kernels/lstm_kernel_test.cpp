// The LSTM: the double-precision BPTT oracle against finite differences, then the CPU device's
// oneDNN kernel (float) against the oracle, forward and backward.
#include <gtest/gtest.h>

#include "kernels/cpu/cpu_device.hpp"
#include "tests/kernels/finite_differences.hpp"
#include "tests/kernels/reference_lstm.hpp"

namespace dlscale::kernels {
namespace {

using namespace dlscale::testing;

constexpr int batch = 2;
const LstmGeometry geometry{4, 3, 5};  // steps, inputs, hidden

TEST(Lstm, ReferenceMatchesFiniteDifferences) {
  std::vector<double> x = random_values(batch * geometry.steps * geometry.inputs, 11);
  std::vector<double> parameters = random_values(geometry.parameter_count(), 12);
  for (double& p : parameters) p *= 0.5;
  const std::vector<double> output_weights =
      random_values(batch * geometry.steps * geometry.hidden, 13);
  const auto loss = [&] {
    return dot(reference::lstm(geometry, batch, x, parameters, output_weights).output,
               output_weights);
  };
  const auto analytic = reference::lstm(geometry, batch, x, parameters, output_weights);
  expect_near_all(analytic.input_gradient, numerical_gradient(x, loss), 1e-6, "input gradient");
  expect_near_all(analytic.parameter_gradient, numerical_gradient(parameters, loss), 1e-6,
                  "parameter gradient");
}

std::vector<float> expect_onednn_matches_reference(const LstmGeometry& geometry) {
  const auto rounded = [](std::vector<double> values, double scale) {
    for (double& v : values) v = double(float(v * scale));
    return values;
  };
  const auto x = rounded(random_values(batch * geometry.steps * geometry.inputs, 11), 1);
  const auto parameters = rounded(random_values(geometry.parameter_count(), 12), 0.5);
  const auto dy = rounded(random_values(batch * geometry.steps * geometry.hidden, 13), 1);
  const auto to_float = [](const std::vector<double>& v) {
    return std::vector<float>(v.begin(), v.end());
  };
  const auto to_double = [](const std::vector<float>& v) {
    return std::vector<double>(v.begin(), v.end());
  };

  CpuDevice device(1);
  auto kernel = device.make_lstm(geometry);
  std::vector<float> y(dy.size()), dx(x.size()), dparameters(parameters.size(), 123.0f);
  kernel->forward(batch, to_float(x).data(), to_float(parameters).data(), y.data());
  // Twice: oneDNN accumulates weight gradients, and the kernel must overwrite them every step.
  for (int pass = 0; pass < 2; ++pass)
    kernel->backward(batch, to_float(x).data(), to_float(parameters).data(), y.data(),
                     to_float(dy).data(), dx.data(), dparameters.data());
  const auto expected = reference::lstm(geometry, batch, x, parameters, dy);
  expect_near_all(to_double(y), expected.output, 1e-5, "output");
  expect_near_all(to_double(dx), expected.input_gradient, 1e-4, "input gradient");
  expect_near_all(to_double(dparameters), expected.parameter_gradient, 1e-4, "parameter gradient");
  return dparameters;
}

TEST(Lstm, OneDnnMatchesReference) { expect_onednn_matches_reference(geometry); }

// One step from a zero state: the recurrent weights see only h0 = 0, so their gradient is
// exactly 0 (every product has a zero factor).
TEST(Lstm, OneDnnMatchesReferenceForASingleStep) {
  const LstmGeometry one_step{1, 4, 3};
  const auto gradient = expect_onednn_matches_reference(one_step);
  for (std::size_t i = 0; i < one_step.recurrent_weight_count(); ++i)
    EXPECT_EQ(gradient[one_step.input_weight_count() + i], 0.0f) << "recurrent weight " << i;
}

}  // namespace
}  // namespace dlscale::kernels
