// What a plan tells each element-wise layer about the images it works on: a ReLU or a residual
// block on images in ImageLayout::native calls the math's native_image_ ops, which a device may
// run on another element type (the GPU's bf16 images); one on the NCHW image handed to a dense
// layer, or on a dense layer's output, calls the float ones. A wrong flag would have a GPU read
// bf16 as float, so it is checked here, where every plan is made.
#include <gtest/gtest.h>

#include <memory>
#include <variant>

#include "workloads/network_plan.hpp"

namespace dlscale::workloads {
namespace {

using kernels::ImageLayout;

const PlannedRelu& relu_at(const std::vector<PlannedLayer>& layers, std::size_t index) {
  return std::get<PlannedRelu>(layers.at(index));
}

TEST(NetworkPlan, ReluSixBetweenImageLayersRunsOnNativeImages) {
  PlanBuilder plan({3, 8, 8});
  plan.convolution(4, 3, 1, 1).batch_norm().relu(6).convolution(4, 1);
  ASSERT_EQ(plan.layers().size(), 4u);
  EXPECT_TRUE(relu_at(plan.layers(), 2).native_image);
}

TEST(NetworkPlan, AReluOnTheImageHandedToADenseLayerRunsOnNchwFloats) {
  PlanBuilder plan({3, 8, 8});
  plan.convolution(4, 3, 1, 1).max_pool(2, 2).relu(6).dense(10).relu(6);
  ASSERT_EQ(plan.layers().size(), 5u);
  EXPECT_EQ(std::get<kernels::PoolingGeometry>(plan.layers()[1]).output_layout, ImageLayout::nchw);
  EXPECT_FALSE(relu_at(plan.layers(), 2).native_image) << "re-laid as NCHW for the dense layer";
  EXPECT_FALSE(relu_at(plan.layers(), 4).native_image) << "after the dense layer";
}

TEST(NetworkPlan, AResidualBlockKnowsWhereItsImagesAreNative) {
  const auto branch = [](PlanBuilder& path) { path.convolution(4, 3, 1, 1).batch_norm(); };
  PlanBuilder on_data({4, 8, 8});
  on_data.residual(branch, [](PlanBuilder& path) { path.convolution(4, 1); }, true);
  const auto& first = *std::get<std::shared_ptr<const PlannedResidual>>(on_data.layers().at(0));
  EXPECT_FALSE(first.native_input) << "the NCHW input data";
  EXPECT_TRUE(first.native_output);

  PlanBuilder after_convolution({3, 8, 8});
  after_convolution.convolution(4, 3, 1, 1).residual(branch, nullptr, true);
  const auto& block =
      *std::get<std::shared_ptr<const PlannedResidual>>(after_convolution.layers().at(1));
  EXPECT_TRUE(block.native_input);
  EXPECT_TRUE(block.native_output);
}

}  // namespace
}  // namespace dlscale::workloads
