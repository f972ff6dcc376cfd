// An LSTM stack built as one layer, where the device runs stacks in one call
// (Device::runs_lstm_stacks, DLSCALE_CUDNN_LSTM_STACK=yes on the GPU), is the same network as its
// layers built apart: the same parameters in the same order from the same initial values, the
// same gradients and the same three training steps, bit for bit, when the stack runs its layers
// on the same kernels (ComposedLstmStack on the CPU's oneDNN layers). What differs is only what
// the device does inside the stack's one kernel.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_device.hpp"
#include "tests/kernels/composed_lstm_stack.hpp"
#include "tests/workloads/first_gradients.hpp"
#include "tests/workloads/three_step_spread.hpp"

namespace dlscale::kernels {
namespace {

TEST(LstmGeometry, AStackCountsEachOfItsLayers) {
  const LstmGeometry one{8, 12, 16, 1};
  LstmGeometry stack = one;
  stack.layers = 3;
  const LstmGeometry above{8, 16, 16, 1};
  EXPECT_EQ(stack.layer(0).layer_parameter_count(), one.parameter_count());
  EXPECT_EQ(stack.layer(2).inputs, 16);
  EXPECT_EQ(stack.parameter_count(), one.parameter_count() + 2 * above.parameter_count());
  EXPECT_DOUBLE_EQ(stack.forward_flops_per_sample(),
                   one.forward_flops_per_sample() + 2 * above.forward_flops_per_sample());
}

TEST(LstmStack, TheCpuRunsOneLayerAKernel) {
  CpuDevice cpu(1);
  EXPECT_FALSE(cpu.runs_lstm_stacks());
  EXPECT_THROW(cpu.make_lstm({4, 8, 8, 2}), std::logic_error);
}

constexpr const char* stacked_model = "lstm:6,16,3,40";  // three layers of 16, 40 words

TEST(LstmStack, OneLayerOfThreeHasTheGradientsOfThreeLayers) {
  CpuDevice apart(1);
  testing::CpuDeviceRunningLstmStacks stacked;
  const auto layer_by_layer = testing::first_gradients(apart, stacked_model, 4);
  const auto as_one = testing::first_gradients(stacked, stacked_model, 4);
  ASSERT_EQ(layer_by_layer.layers.size(), 5u);  // embedding, three LSTMs, the head
  ASSERT_EQ(as_one.layers.size(), 3u);          // embedding, the stack, the head
  EXPECT_EQ(as_one.layers[1].kind, "lstm");
  EXPECT_EQ(as_one.layers[1].count, 3 * layer_by_layer.layers[1].count);
  EXPECT_EQ(as_one.values, layer_by_layer.values);
}

TEST(LstmStack, OneLayerOfThreeTrainsAsThreeLayers) {
  CpuDevice apart(1);
  testing::CpuDeviceRunningLstmStacks stacked;
  const auto layer_by_layer = testing::train_three_steps(apart, stacked_model, 4);
  const auto as_one = testing::train_three_steps(stacked, stacked_model, 4);
  EXPECT_EQ(as_one.loss, layer_by_layer.loss);
  EXPECT_EQ(as_one.parameters, layer_by_layer.parameters);
}

}  // namespace
}  // namespace dlscale::kernels
