// Every layer, the loss and a whole network, checked against central finite differences in
// double precision: analytic backward must match (f(x+h) - f(x-h)) / 2h.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_device.hpp"
#include "model/causal_self_attention_layer.hpp"
#include "model/dense_layer.hpp"
#include "model/embedding_layer.hpp"
#include "model/gelu_layer.hpp"
#include "model/layer_norm_layer.hpp"
#include "model/network.hpp"
#include "model/relu_layer.hpp"
#include "model/residual_block.hpp"
#include "model/sgd_momentum.hpp"
#include "model/sigmoid_layer.hpp"
#include "model/tied_output_head.hpp"
#include "tests/kernels/finite_differences.hpp"
#include "workloads/fcn_workload.hpp"
#include "workloads/gpt_workload.hpp"
#include "workloads/workload_registry.hpp"

namespace dlscale::model {
namespace {

using namespace dlscale::testing;
using kernels::CpuDevice;

// Checks a layer through the scalar loss L = sum(y * weights), whose output gradient is `weights`.
// The CPU device's memory is host memory, so host vectors serve as device buffers here.
void check_layer(Layer<double>& layer, int batch, double input_scale = 1.0) {
  CpuDevice device(1);
  auto& math = device.math<double>();
  std::vector<double> parameters = random_values(layer.parameter_count(), 1);
  std::vector<double> parameter_gradient(layer.parameter_count());
  layer.bind(parameters.data(), parameter_gradient.data());
  std::vector<double> x = random_values(batch * layer.input_size(), 2);
  for (double& value : x) value *= input_scale;
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

TEST(GradientCheck, DenseLayerOverTimeStepsMatchesFiniteDifferences) {
  DenseLayer<double> layer(4, 3, 5);
  check_layer(layer, 2);
}

TEST(GradientCheck, EmbeddingLayerMatchesFiniteDifferences) {
  CpuDevice device(1);
  EmbeddingLayer<double> layer(7, 3, 4);  // vocabulary 7, width 3, 4 steps
  std::vector<double> table = random_values(layer.parameter_count(), 1);
  std::vector<double> table_gradient(table.size());
  layer.bind(table.data(), table_gradient.data());
  const std::vector<double> ids = {0, 3, 3, 6, 2, 2, 2, 5};  // 2 samples; repeats accumulate
  const std::vector<double> output_weights = random_values(2 * layer.output_size(), 3);
  std::vector<double> y(output_weights.size());
  const auto loss = [&] {
    layer.forward(device.math<double>(), 2, ids.data(), y.data());
    return dot(y, output_weights);
  };
  loss();
  layer.backward(device.math<double>(), 2, ids.data(), y.data(), output_weights.data(), nullptr);
  const std::vector<double> analytic = table_gradient;
  expect_gradients_match(analytic, numerical_gradient(table, loss), "table gradient");
}

TEST(GradientCheck, SigmoidLayerMatchesFiniteDifferences) {
  SigmoidLayer<double> layer(6);
  check_layer(layer, 4);
}

TEST(GradientCheck, ReluLayerMatchesFiniteDifferences) {
  ReluLayer<double> layer(6);
  check_layer(layer, 4);  // normal inputs are never within a finite-difference step of 0
}

TEST(GradientCheck, Relu6LayerMatchesFiniteDifferences) {
  ReluLayer<double> layer(40, 6.0);
  check_layer(layer, 4, 8.0);  // inputs ~ N(0, 64), so some pass the ceiling of 6
}

TEST(GradientCheck, ResidualBlockWithIdentityShortcutMatchesFiniteDifferences) {
  CpuDevice device(1);
  ResidualBlock<double>::Layers branch;
  branch.push_back(std::make_unique<DenseLayer<double>>(5, 5));
  branch.push_back(std::make_unique<SigmoidLayer<double>>(5));
  branch.push_back(std::make_unique<DenseLayer<double>>(5, 5));
  ResidualBlock<double> block(device, std::move(branch), {}, true, 3);
  check_layer(block, 3);
}

TEST(GradientCheck, ResidualBlockWithProjectionShortcutMatchesFiniteDifferences) {
  CpuDevice device(1);
  ResidualBlock<double>::Layers branch, shortcut;
  branch.push_back(std::make_unique<DenseLayer<double>>(6, 4));
  branch.push_back(std::make_unique<SigmoidLayer<double>>(4));
  shortcut.push_back(std::make_unique<DenseLayer<double>>(6, 4));
  ResidualBlock<double> block(device, std::move(branch), std::move(shortcut), false, 3);
  check_layer(block, 3);
}

TEST(GradientCheck, SoftmaxCrossEntropyMatchesFiniteDifferences) {
  CpuDevice device(1);
  const int rows = 4, classes = 5;
  std::vector<double> logits = random_values(rows * classes, 4);
  const std::vector<std::int32_t> labels = {0, 3, 4, 1};
  std::vector<double> analytic(logits.size()), scratch(logits.size());
  double loss_value = 0;
  device.math<double>().softmax_cross_entropy(rows, classes, logits.data(), labels.data(),
                                              analytic.data(), &loss_value);
  const auto loss = [&] {
    device.math<double>().softmax_cross_entropy(rows, classes, logits.data(), labels.data(),
                                                scratch.data(), &loss_value);
    return loss_value;
  };
  expect_gradients_match(analytic, numerical_gradient(logits, loss), "logit gradient");
}

TEST(GradientCheck, SoftmaxCrossEntropyOfUniformLogitsIsLogClasses) {
  CpuDevice device(1);
  const std::vector<double> logits(3 * 10, 0.5);
  const std::vector<std::int32_t> labels = {1, 2, 9};
  std::vector<double> gradient(logits.size());
  double loss = 0;
  device.math<double>().softmax_cross_entropy(3, 10, logits.data(), labels.data(), gradient.data(),
                                              &loss);
  EXPECT_NEAR(loss, std::log(10.0), 1e-12);
}

TEST(GradientCheck, WholeFcnNetworkMatchesFiniteDifferences) {
  CpuDevice device(1);
  const auto workload = workloads::parse_fcn_spec("6,5,4,3");
  const int batch = 4;
  Network<double> network(device, workload->make_layers<double>(), batch);
  network.initialize(7);
  std::vector<double> x = random_values(batch * 6, 5);
  const std::vector<std::int32_t> labels = {0, 2, 1, 2};
  const auto loss = [&] {
    network.forward_loss(batch, x.data(), labels.data());
    return network.loss();
  };
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

TEST(GradientCheck, LayerNormLayerMatchesFiniteDifferences) {
  CpuDevice device(1);
  LayerNormLayer<double> layer(device, 5, 3, 2);  // width 5, 3 steps, batch up to 2
  check_layer(layer, 2);
}

TEST(GradientCheck, GeluLayerMatchesFiniteDifferences) {
  GeluLayer<double> layer(12);
  check_layer(layer, 3, 2.0);  // inputs ~ N(0, 4): both tails and the bend
}

TEST(GradientCheck, CausalSelfAttentionLayerMatchesFiniteDifferences) {
  CpuDevice device(1);
  CausalSelfAttentionLayer<double> layer(device, 5, 6, 2);  // 5 steps, width 6, 2 heads
  check_layer(layer, 2);
}

// Six heads go through in two passes (four, then two): the second pass's offsets into Q, K, V
// and the output, and its shorter batch, are checked as the first's.
TEST(GradientCheck, CausalSelfAttentionInTwoPassesOfHeadsMatchesFiniteDifferences) {
  static_assert(attention_heads_per_pass == 4, "six heads must take two passes");
  CpuDevice device(1);
  CausalSelfAttentionLayer<double> layer(device, 4, 12, 6);  // 4 steps, width 12, 6 heads of 2
  check_layer(layer, 2);
}

// Blocks of 3 query rows over 7 steps (3, 3 and 1): each block's GEMMs stop at its last row's
// step, and the keys' gradients gather the later blocks' queries.
TEST(GradientCheck, CausalSelfAttentionInUnevenBlocksOfRowsMatchesFiniteDifferences) {
  CpuDevice device(1);
  CausalSelfAttentionLayer<double> layer(device, 7, 12, 6, 3);
  check_layer(layer, 2);
}

// The float layer runs its heads through oneDNN's batched matmul, the double one through one GEMM
// at a time: the same attention, within float rounding, forward and backward.
TEST(GradientCheck, FloatAttentionAgreesWithTheDoubleLayer) {
  CpuDevice device(2);
  const int batch = 2, steps = 9, width = 24, heads = 6;
  CausalSelfAttentionLayer<float> single(device, steps, width, heads, 4);  // blocks of 4, 4, 1
  CausalSelfAttentionLayer<double> wide(device, steps, width, heads, 9);   // one block
  const std::vector<double> x = random_values(batch * single.input_size(), 5);
  const std::vector<double> dy = random_values(batch * single.output_size(), 6);
  const std::vector<float> x_float(x.begin(), x.end()), dy_float(dy.begin(), dy.end());
  std::vector<float> y_float(dy.size()), dx_float(x.size());
  std::vector<double> y(dy.size()), dx(x.size());
  single.forward(device.math<float>(), batch, x_float.data(), y_float.data());
  single.backward(device.math<float>(), batch, x_float.data(), y_float.data(), dy_float.data(),
                  dx_float.data());
  wide.forward(device.math<double>(), batch, x.data(), y.data());
  wide.backward(device.math<double>(), batch, x.data(), y.data(), dy.data(), dx.data());
  for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y_float[i], y[i], 1e-5) << "y at " << i;
  for (std::size_t i = 0; i < dx.size(); ++i)
    ASSERT_NEAR(dx_float[i], dx[i], 1e-5) << "dx at " << i;
}

TEST(GradientCheck, EmbeddingWithLearnedPositionsMatchesFiniteDifferences) {
  CpuDevice device(1);
  EmbeddingLayer<double> layer(7, 3, 4, {.learned_positions = true});
  std::vector<double> parameters = random_values(layer.parameter_count(), 1);
  std::vector<double> parameter_gradient(parameters.size());
  layer.bind(parameters.data(), parameter_gradient.data());
  const std::vector<double> ids = {0, 3, 3, 6, 2, 2, 2, 5};
  const std::vector<double> output_weights = random_values(2 * layer.output_size(), 3);
  std::vector<double> y(output_weights.size());
  const auto loss = [&] {
    layer.forward(device.math<double>(), 2, ids.data(), y.data());
    return dot(y, output_weights);
  };
  loss();
  layer.backward(device.math<double>(), 2, ids.data(), y.data(), output_weights.data(), nullptr);
  const std::vector<double> analytic = parameter_gradient;
  expect_gradients_match(analytic, numerical_gradient(parameters, loss),
                         "token and position table gradient");
}

// Checks a whole network's parameter gradients through its loss; `checked` takes every how-many-th
// parameter (1: all of them).
template <typename Ids>
void check_network(Network<double>& network, int batch, const Ids& inputs,
                   const std::vector<std::int32_t>& labels, std::size_t checked = 1) {
  const auto loss = [&] {
    network.forward_loss(batch, inputs.data(), labels.data());
    return network.loss();
  };
  loss();
  network.backward(batch, inputs.data());
  std::vector<double> analytic, sampled;
  std::vector<std::size_t> indices;
  for (std::size_t i = 0; i < network.parameter_count(); i += checked) indices.push_back(i);
  for (const std::size_t i : indices) {
    analytic.push_back(network.gradients()[i]);
    sampled.push_back(network.parameters()[i]);
  }
  const auto loss_at = [&] {
    for (std::size_t k = 0; k < indices.size(); ++k) network.parameters()[indices[k]] = sampled[k];
    return loss();
  };
  expect_gradients_match(analytic, numerical_gradient(sampled, loss_at),
                         "network parameter gradient");
}

// The head's part of the table's gradient and the lookups' part must both arrive, in that order.
TEST(GradientCheck, EmbeddingTiedToItsOutputHeadMatchesFiniteDifferences) {
  CpuDevice device(1);
  const int vocabulary = 6, width = 4, steps = 3, batch = 2;
  std::vector<std::unique_ptr<Layer<double>>> layers;
  auto embedding =
      std::make_unique<EmbeddingLayer<double>>(vocabulary, width, steps, EmbeddingOptions{true});
  auto& table = *embedding;
  layers.push_back(std::move(embedding));
  layers.push_back(std::make_unique<TiedOutputHead<double>>(table, width, vocabulary, steps));
  Network<double> network(device, std::move(layers), batch, vocabulary);
  network.initialize(3);
  const std::vector<double> ids = {0, 5, 5, 2, 1, 0};
  check_network(network, batch, ids, {5, 5, 2, 1, 0, 3});
}

std::vector<double> token_ids(const workloads::GptWorkload& workload, int batch) {
  const auto data = workload.make_batch(batch, 11, 0, 0);
  return {data.inputs.begin(), data.inputs.end()};
}
std::vector<std::int32_t> next_tokens(const workloads::GptWorkload& workload, int batch) {
  return workload.make_batch(batch, 11, 0, 0).labels;
}

TEST(GradientCheck, WholeSmallGptNetworkMatchesFiniteDifferences) {
  CpuDevice device(1);
  const auto workload = workloads::parse_gpt_spec("2,8,2,5,11");  // every parameter checked
  const int batch = 2;
  Network<double> network(device, workload->make_layers<double>(device, batch), batch, 11);
  network.initialize(7);
  check_network(network, batch, token_ids(*workload, batch), next_tokens(*workload, batch));
}

TEST(GradientCheck, WholeGptTinyNetworkMatchesFiniteDifferencesAtSampledParameters) {
  CpuDevice device(1);
  const auto workload = workloads::make_workload("gpt-tiny");
  const auto& gpt = dynamic_cast<const workloads::GptWorkload&>(*workload);
  const int batch = 2;
  Network<double> network(device, gpt.make_layers<double>(device, batch), batch,
                          gpt.shape().vocabulary);
  network.initialize(7);
  // 110,336 parameters: every 331st, in every layer (331 is prime, so the samples spread over
  // rows and columns of each weight matrix).
  check_network(network, batch, token_ids(gpt, batch), next_tokens(gpt, batch), 331);
}

TEST(Optimizer, SgdMomentumFollowsTheHeavyBallRecurrence) {
  CpuDevice device(1);
  SgdMomentum<double> optimizer(device, 1, 0.1, 0.9);
  std::vector<double> parameter = {1.0};
  const std::vector<double> gradient = {2.0};
  optimizer.step(parameter, gradient, 0.5);  // v = 1.0, p = 1 - 0.1
  optimizer.step(parameter, gradient, 0.5);  // v = 0.9 + 1.0, p = 0.9 - 0.19
  EXPECT_NEAR(parameter[0], 0.71, 1e-15);
  EXPECT_FALSE(optimizer.saw_nonfinite_gradient());
}

TEST(Optimizer, ANaNOrInfiniteGradientIsFlaggedAndStaysFlagged) {
  CpuDevice device(2);
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    const std::size_t count = 100000;  // enough for the parallel loop
    SgdMomentum<float> optimizer(device, count, 0.1f, 0.9f);
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

}  // namespace
}  // namespace dlscale::model
